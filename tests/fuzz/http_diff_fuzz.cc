// Differential fuzz target: our HTTP head parser (src/http/http_parser.cc)
// against Boost.Beast's request_parser / response_parser (a test-only
// dependency). The first input byte picks what is compared (its value
// modulo 3): '0' requests, '1' responses: the rest, up to and including the
// first CRLF CRLF, is the head both parse (what HeadBuffer hands our
// parser); '2' the rest is a chunked request body (ChunkedDecoder).
//
// Both accept: they must agree on everything they report (method, target,
// version, status, reason, every field in order, Content-Length, chunked,
// keep-alive). One accepts and the other refuses: the input must show one
// of the intended differences listed in tests/fuzz/README.md ("HTTP: where
// we differ from Beast on purpose"), each checked here from what the input
// holds; any other disagreement traps.
#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_checks.h"
#include "http/http_parser.h"

namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace http = corral::http;
using corral::fuzz::require;

constexpr std::size_t kMaxHeaders = 100;  // HeadLimits' defaults
constexpr std::size_t kMaxTarget = 8 * 1024;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
  return out;
}

bool ieq(std::string_view a, std::string_view b) { return lower(a) == lower(b); }

struct Field {
  std::string name;  // lower case
  std::string value;
};

// What Beast read, in the form the checks need.
struct BeastView {
  bool ok = false;
  std::string method, target, reason;
  int version = 0;
  int status = 0;
  std::vector<Field> fields;
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = false;

  std::size_t count(std::string_view name) const {
    std::size_t n = 0;
    for (const auto& f : fields) n += f.name == name;
    return n;
  }
};

template <bool isRequest>
BeastView beast_parse(std::string_view head) {
  bhttp::parser<isRequest, bhttp::empty_body> p;
  p.eager(false);
  p.header_limit(1 << 20);
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  beast::error_code ec;
  std::size_t used = 0;
  while (!p.is_header_done() && used < head.size()) {
    std::size_t n = p.put(boost::asio::buffer(head.data() + used, head.size() - used), ec);
    if (ec) break;
    if (n == 0) break;
    used += n;
  }
  BeastView v;
  if (ec || !p.is_header_done()) return v;
  const auto& m = p.get();
  v.ok = true;
  v.version = m.version();
  if constexpr (isRequest) {
    auto method = m.method_string();
    auto target = m.target();
    v.method.assign(method.data(), method.size());
    v.target.assign(target.data(), target.size());
  } else {
    v.status = static_cast<int>(m.result_int());
    auto reason = m.reason();
    v.reason.assign(reason.data(), reason.size());
  }
  for (const auto& f : m) {
    auto name = f.name_string();
    auto value = f.value();
    v.fields.push_back({lower(std::string_view(name.data(), name.size())),
                        std::string(value.data(), value.size())});
  }
  if (auto cl = p.content_length()) v.content_length = *cl;
  v.chunked = p.chunked();
  v.keep_alive = p.keep_alive();
  return v;
}

bool has_obs_fold(std::string_view head) {
  return head.find("\r\n ") != std::string_view::npos ||
         head.find("\r\n\t") != std::string_view::npos;
}

// The framing and field rules both directions share (README: H3-H7).
const char* stricter_fields(const BeastView& b) {
  if (b.fields.size() > kMaxHeaders) return "H7 more than 100 fields";
  for (const auto& f : b.fields) {
    if (f.name == "transfer-encoding" && !ieq(f.value, "chunked"))
      return "H4 Transfer-Encoding other than exactly chunked";
    if (f.name == "content-length") {
      if (f.value.empty() || f.value.find_first_not_of("0123456789") != std::string::npos)
        return "H5 Content-Length not a plain number";
    }
  }
  if (b.count("transfer-encoding") > 0 && b.version == 10)
    return "H6 Transfer-Encoding in HTTP/1.0";
  return nullptr;
}

bool target_is_origin_form(std::string_view t) {
  if (t.empty() || t.front() != '/' || t.size() > kMaxTarget) return false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    auto c = static_cast<unsigned char>(t[i]);
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("-._~!$&'()*+,;=:@/?%").find(static_cast<char>(c)) ==
                      std::string_view::npos)
      return false;
    if (c == '%') {
      if (i + 2 >= t.size() || !std::isxdigit(static_cast<unsigned char>(t[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(t[i + 2])))
        return false;
    }
  }
  return true;
}

// Why we refuse a request Beast accepts (README: H1-H8), or null.
const char* stricter_request(const BeastView& b, std::string_view head) {
  if (has_obs_fold(head)) return "H8 obs-fold";
  for (char c : b.method) {
    if (c >= 'a' && c <= 'z') return "H1 method with lower case";
  }
  if (b.method.size() > 32) return "H1 method over 32 bytes";
  if (!target_is_origin_form(b.target)) return "H2 target not origin-form";
  if (b.version == 11 && b.count("host") == 0) return "H3 HTTP/1.1 without Host";
  if (b.count("host") > 1) return "H3 more than one Host";
  for (std::string_view name :
       {"authorization", "proxy-authorization", "content-length", "content-type",
        "transfer-encoding", "idempotency-key", "x-corral-gateway-token"}) {
    if (b.count(name) > 1) return "H10 a single-valued field twice";
  }
  return stricter_fields(b);
}

const char* stricter_response(const BeastView& b, std::string_view head) {
  if (has_obs_fold(head)) return "H8 obs-fold";
  if (b.status < 100 || b.status > 599) return "H9 status outside 100-599";
  return stricter_fields(b);
}

// Why Beast refuses what we accept (README: L1-L2), or null.
const char* lenient_request_or_response(std::string_view head, bool request,
                                        const http::Headers& ours) {
  if (!request) {
    // "HTTP/1.1 200\r\n": no SP after the status code.
    std::string_view line = head.substr(0, head.find("\r\n"));
    if (line.size() == 12) return "L1 status line without the SP before the reason";
  }
  for (const auto& h : ours) {
    if (h.name != "connection") continue;
    // Beast checks the Connection list's syntax; we only look for close and
    // keep-alive in it.
    std::string_view rest = h.value;
    while (true) {
      std::size_t comma = rest.find(',');
      std::string_view opt = rest.substr(0, comma);
      while (!opt.empty() && (opt.front() == ' ' || opt.front() == '\t')) opt.remove_prefix(1);
      while (!opt.empty() && (opt.back() == ' ' || opt.back() == '\t')) opt.remove_suffix(1);
      if (opt.empty() || opt.find_first_of(" \t\"(),/:;<=>?@[\\]{}") != std::string_view::npos)
        return "L2 Connection list Beast finds malformed";
      for (char c : opt) {
        if (static_cast<unsigned char>(c) >= 0x7f)
          return "L2 Connection list Beast finds malformed";
      }
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  return nullptr;
}

// Beast keeps fields of one name together (in their order); compare the
// fields grouped by name.
// The intended difference that explains a disagreement (traps on none);
// CORRAL_FUZZ_VERBOSE=1 prints it, to see which ones a corpus exercises.
void expect_known(const char* why) {
  if (std::getenv("CORRAL_FUZZ_VERBOSE")) std::fprintf(stderr, "known: %s\n", why ? why : "NONE");
  require(why != nullptr);
}

void same_fields(const BeastView& b, const http::Headers& ours) {
  std::vector<Field> mine;
  for (const auto& h : ours) mine.push_back({h.name, h.value});
  auto theirs = b.fields;
  auto by_name = [](const Field& x, const Field& y) { return x.name < y.name; };
  std::stable_sort(mine.begin(), mine.end(), by_name);
  std::stable_sort(theirs.begin(), theirs.end(), by_name);
  if (std::getenv("CORRAL_FUZZ_VERBOSE")) {
    for (const auto& f : theirs)
      std::fprintf(stderr, "beast [%s] [%s]\n", f.name.c_str(), f.value.c_str());
    for (const auto& f : mine)
      std::fprintf(stderr, "ours  [%s] [%s]\n", f.name.c_str(), f.value.c_str());
  }
  require(theirs.size() == mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    require(theirs[i].name == mine[i].name && theirs[i].value == mine[i].value);
  }
}

void diff_request(std::string_view head) {
  auto ours = http::parse_request_head(head);
  BeastView b = beast_parse<true>(head);
  if (b.ok && !ours) {
    expect_known(stricter_request(b, head));
    return;
  }
  if (!b.ok && ours) {
    expect_known(lenient_request_or_response(head, true, ours->headers));
    return;
  }
  if (!b.ok) return;
  require(b.method == ours->method && b.target == ours->target);
  require(b.version == 10 + ours->version_minor);
  same_fields(b, ours->headers);
  require(b.content_length == ours->content_length);
  require(b.chunked == ours->chunked);
  require(b.keep_alive == ours->keep_alive);
}

void diff_response(std::string_view head) {
  auto ours = http::parse_response_head(head);
  BeastView b = beast_parse<false>(head);
  if (b.ok && !ours) {
    expect_known(stricter_response(b, head));
    return;
  }
  if (!b.ok && ours) {
    expect_known(lenient_request_or_response(head, false, ours->headers));
    return;
  }
  if (!b.ok) return;
  require(b.status == ours->status);
  // Beast answers an empty reason with the status's usual one.
  auto usual = bhttp::obsolete_reason(static_cast<bhttp::status>(b.status));
  require(b.reason == ours->reason ||
          (ours->reason.empty() && b.reason == std::string_view(usual.data(), usual.size())));
  same_fields(b, ours->headers);
  bool bodiless = ours->status < 200 || ours->status == 204 || ours->status == 304;
  if (!bodiless) {
    require(b.content_length == ours->content_length);
    require(b.chunked == ours->chunked);
  }
  require(b.keep_alive == ours->keep_alive);
}

// What the chunk-size lines hold besides the size, up to the last chunk's.
struct ExtensionsSeen {
  bool any = false;  // text after the hex digits
  bool ctl = false;  // a control byte in it (NUL, a bare LF or CR, DEL; not HTAB)
};

// Where the trailer section starts (after the last chunk's line), walking
// the chunks leniently; npos when the body does not get there. `seen`
// gathers the extensions of the size lines walked.
std::size_t trailer_start(std::string_view body, ExtensionsSeen* seen = nullptr) {
  std::size_t at = 0;
  for (int chunks = 0; chunks < 10000; ++chunks) {
    std::uint64_t size = 0;
    std::size_t n = 0;
    while (at + n < body.size() && std::isxdigit(static_cast<unsigned char>(body[at + n])) &&
           n < 16) {
      char c = body[at + n];
      size = size * 16 + static_cast<std::uint64_t>(std::isdigit(static_cast<unsigned char>(c))
                                                        ? c - '0'
                                                        : (c | 0x20) - 'a' + 10);
      ++n;
    }
    std::size_t eol = body.find("\r\n", at);
    if (n == 0 || eol == std::string_view::npos) return std::string_view::npos;
    if (seen && eol > at + n) {
      seen->any = true;
      for (std::size_t i = at + n; i < eol; ++i) {
        auto c = static_cast<unsigned char>(body[i]);
        if ((c < 0x20 && c != '\t') || c == 0x7f) seen->ctl = true;
      }
    }
    at = eol + 2;
    if (size == 0) return at;
    if (size > body.size() - at) return std::string_view::npos;
    at += static_cast<std::size_t>(size) + 2;
  }
  return std::string_view::npos;
}

// Whether the body has trailer lines (text between the last chunk and the
// final blank line).
bool ours_trailer_seen(std::string_view body) {
  std::size_t t = trailer_start(body);
  return t != std::string_view::npos && body.substr(t, 2) != "\r\n";
}

// Whether a line of the body starts with more than 16 hex digits.
bool long_hex_run(std::string_view body) {
  for (std::size_t at = 0; at < body.size();) {
    std::size_t n = 0;
    while (at + n < body.size() && std::isxdigit(static_cast<unsigned char>(body[at + n]))) ++n;
    if (n > 16) return true;
    std::size_t nl = body.find("\r\n", at);
    if (nl == std::string_view::npos) break;
    at = nl + 2;
  }
  return false;
}

// A chunked body after a fixed request head: ChunkedDecoder against
// Beast's chunk parser. Outcomes: done (with the body and the bytes used),
// refused, or incomplete.
void diff_chunked(std::string_view body) {
  constexpr std::string_view kHead =
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  http::ChunkedDecoder ours;
  std::string ours_out;
  auto used = ours.decode(body, ours_out, body.size() + 1);
  enum Outcome { kDone, kRefused, kIncomplete };
  Outcome mine = !used ? kRefused : ours.done() ? kDone : kIncomplete;

  bhttp::request_parser<bhttp::string_body> p;
  p.eager(true);
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  std::string all = std::string(kHead) + std::string(body);
  beast::error_code ec;
  std::size_t pos = 0;
  while (!p.is_done() && pos < all.size()) {
    std::size_t n = p.put(boost::asio::buffer(all.data() + pos, all.size() - pos), ec);
    pos += n;
    if (ec || n == 0) break;
  }
  Outcome theirs = p.is_done()                             ? kDone
                   : (ec && ec != bhttp::error::need_more) ? kRefused
                                                           : kIncomplete;
  if (std::getenv("CORRAL_FUZZ_VERBOSE")) {
    std::fprintf(stderr, "chunked: ours %d theirs %d (%s)\n", mine, theirs, ec.message().c_str());
  }
  if (mine == kDone && theirs == kDone) {
    require(ours_out == p.get().body());
    require(*used == pos - kHead.size());
    return;
  }
  // Refused and incomplete differ only in when a bad line is noticed (Beast
  // waits for its CRLF); what matters is where the body ends, and its bytes.
  if (mine != kDone && theirs != kDone) return;
  const char* why = nullptr;
  ExtensionsSeen extensions;
  trailer_start(body, &extensions);
  if (theirs == kRefused && ec == bhttp::error::bad_chunk_extension) {
    why = "C1 a chunk extension outside Beast's grammar";
  } else if (mine == kDone && extensions.any) {
    why = "C1 a chunk extension outside Beast's grammar (an open quoted string)";
  } else if (mine == kDone && theirs == kRefused && ours_trailer_seen(body)) {
    why = "C2 a trailer Beast refuses (not a field, or a framing field); we drop trailers";
  } else if (mine == kRefused && theirs == kDone && long_hex_run(body)) {
    why = "C3 a chunk size of more than 16 hex digits (leading zeros too)";
  } else if (mine == kRefused && theirs == kDone && extensions.ctl) {
    why = "C4 a control byte in a chunk extension (Beast takes NUL or a bare LF in a quoted one)";
  } else if (mine == kRefused && theirs == kDone && ours_trailer_seen(body) &&
             has_obs_fold(body.substr(trailer_start(body) - 2))) {
    why = "H8 obs-fold (in a trailer)";
  }
  expect_known(why);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 3 == 2) {
    diff_chunked(in);
    return 0;
  }
  std::size_t end = in.find("\r\n\r\n");
  if (end == std::string_view::npos) return 0;
  std::string_view head = in.substr(0, end + 4);
  if (data[0] % 3 == 0) {
    diff_request(head);
  } else {
    diff_response(head);
  }
  return 0;
}
