// The two XML documents the S3 back-end reads, parsed with pugixml (ADR
// 0009): a ListObjectsV2 page and an error body. Never regular expressions:
// keys, tokens and messages come back entity-escaped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::objstore {

struct S3ListPage {
  struct Entry {
    std::string key;  // the full key in the bucket, prefix included
    std::uint64_t size = 0;
  };
  std::vector<Entry> entries;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken when truncated
};

// A <ListBucketResult>; kUnavailable for a body that is not one (a server
// that answers 200 with something else is not a usable store).
Result<S3ListPage> parse_list_page(std::string_view xml);

struct S3ErrorBody {
  std::string code;     // "NoSuchKey", "SignatureDoesNotMatch", ...
  std::string message;  // the server's sentence
};

// An <Error> body; empty fields when the body is not one (a proxy's HTML).
S3ErrorBody parse_error_body(std::string_view xml);

}  // namespace corral::objstore
