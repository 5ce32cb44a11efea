#include "http/http_message.h"

#include "http/char_class.h"

namespace corral::http {

std::optional<std::string_view> find_header(const Headers& headers, std::string_view name) {
  for (const auto& h : headers) {
    if (chars::iequals(h.name, name)) return std::string_view(h.value);
  }
  return std::nullopt;
}

Result<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\0') return make_error(ErrorCode::kInvalidArgument, "NUL byte");
    if (c == '+' && plus_is_space) {
      out.push_back(' ');
      continue;
    }
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    int hi = i + 1 < text.size() ? chars::hex_value(static_cast<unsigned char>(text[i + 1])) : -1;
    int lo = i + 2 < text.size() ? chars::hex_value(static_cast<unsigned char>(text[i + 2])) : -1;
    if (hi < 0 || lo < 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        "bad percent escape " + chars::quote(text.substr(i, 3)));
    }
    int value = hi * 16 + lo;
    // An encoded NUL would cut the string short in every C API below us.
    if (value == 0) return make_error(ErrorCode::kInvalidArgument, "percent escape %00 (NUL)");
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  while (!query.empty()) {
    std::size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;  // "a=1&&b=2"
    std::size_t eq = part.find('=');
    std::string_view raw_name = part.substr(0, eq);
    std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    auto name = percent_decode(raw_name, true);
    if (!name)
      return tl::unexpected(name.error().wrap("query parameter " + chars::quote(raw_name)));
    auto value = percent_decode(raw_value, true);
    if (!value) {
      return tl::unexpected(value.error().wrap("query parameter " + chars::quote(raw_name)));
    }
    params.emplace_back(std::move(*name), std::move(*value));
  }
  return params;
}

std::string_view status_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 416:
      return "Range Not Satisfiable";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 426:
      return "Upgrade Required";
    case 428:
      return "Precondition Required";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    case 507:
      return "Insufficient Storage";
    default:
      return "";  // the reason phrase may be empty (RFC 9112 4)
  }
}

}  // namespace corral::http
