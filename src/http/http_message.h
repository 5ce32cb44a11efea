// HTTP/1.1 messages as corral's server and client see them: a parsed
// request or response head, plus helpers for headers and query strings.
// Bodies are never part of these structs: they are streamed (BodyReader),
// so a 1 GiB upload never needs 1 GiB of memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace corral::http {

struct Header {
  std::string name;   // lower-cased on parse
  std::string value;  // leading/trailing whitespace trimmed
};

using Headers = std::vector<Header>;

// First header named `name` (case-insensitive), if any.
std::optional<std::string_view> find_header(const Headers& headers, std::string_view name);

struct RequestHead {
  std::string method;     // "GET", "POST", ... (as sent; upper-case tokens only)
  std::string target;     // origin-form as sent: "/v1/sandboxes?x=1"
  std::string path;       // path part of target, as sent: never percent-decoded
                          // ("/v1/a%2Fb" stays so: "%2F" is no '/')
  std::string query;      // raw query part, without '?'
  int version_minor = 1;  // HTTP/1.<minor>
  Headers headers;

  // Framing of the body, from Content-Length / Transfer-Encoding.
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = true;  // from the version and Connection header
  bool expect_continue = false;

  std::optional<std::string_view> header(std::string_view name) const {
    return find_header(headers, name);
  }
};

struct ResponseHead {
  int status = 0;
  std::string reason;
  Headers headers;
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = true;

  std::optional<std::string_view> header(std::string_view name) const {
    return find_header(headers, name);
  }
};

// Query parameters, percent-decoded ('+' is a space), in order. A malformed
// escape is kInvalidArgument naming the parameter.
Result<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query);

// Percent-decoding of a path or query component. Refuses "%00" and bad
// escapes.
Result<std::string> percent_decode(std::string_view text, bool plus_is_space);
// Percent-encoding for a query value or path segment (unreserved kept).
std::string percent_encode(std::string_view text);

std::string_view status_reason(int status);

}  // namespace corral::http
