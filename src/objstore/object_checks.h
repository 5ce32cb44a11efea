// The checks both back-ends make before they touch storage: key prefixes,
// user metadata and sha256 digests (object_store.h states the rules). One
// place, so that the local directory and S3 refuse exactly the same input.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "objstore/object_store.h"

namespace corral::objstore {

inline constexpr std::size_t kMaxKeyBytes = 512;
inline constexpr std::size_t kMaxMetadataBytes = 2048;

// Empty, or the start of a valid key: the key alphabet, no leading '/', no
// "//", and no complete segment "." or ".." (the last, partial segment may
// be anything the alphabet allows: "..a" is a valid segment).
bool valid_key_prefix(std::string_view prefix);

// kInvalidArgument naming `key` (quoted) when it is not valid_object_key.
Status check_key(std::string_view key);
Status check_prefix(std::string_view prefix);

// Names [a-z0-9-]{1,64} except "sha256" (the store's own), values
// printable ASCII (0x20..0x7e), names and values 2 KiB in all.
Status check_metadata(const std::map<std::string, std::string>& metadata);

// 64 hex digits, returned lower-case; kInvalidArgument otherwise.
Result<std::string> normalize_sha256(std::string_view hex);

// The checks of PutOptions as a whole; returns the expected digest
// normalized (or nullopt).
Result<std::optional<std::string>> check_put_options(const PutOptions& options);

// The error of a put whose content is over PutOptions::max_size:
// kResourceExhausted with sys_errno kOverMaxSize.
tl::unexpected<Error> over_max_size(std::string message);

}  // namespace corral::objstore
