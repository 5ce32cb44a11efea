// A random value a daemon keeps in its data dir (the E2B facade's token key,
// a node's instance token): made on first use, read back on every start.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace corral {

// The `bytes` random bytes in lower-case hex that `path` holds, made there
// first when it is missing (0600, written to <path>.tmp, fsynced, renamed
// into place). A file that is not a private regular file of root's (or
// this process's), or that does not hold 2*bytes hex digits, is an error;
// `if_removed` says, in its hint, what removing it costs.
Result<std::string> load_or_make_hex_file(const std::string& path, std::size_t bytes,
                                          std::string_view if_removed);

}  // namespace corral
