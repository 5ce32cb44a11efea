// Fuzz target for the internal-service gateway's checks of what a sandbox
// sends (src/egress/gateway_config.cc, src/egress/gateway_token.cc). The first input byte
// picks what is fuzzed (its value modulo 3, so corpus files can start with
// the digits '0'..'2'):
//   0 split_gateway_target: the request target
//   1 gateway_path_allowed: path prefixes (one per line before a blank
//     line), then the request target
//   2 verify_gateway_token: a token as sent (line 1) and the sandbox id it
//     is checked for (line 2), and single-byte edits of a minted token
// Properties, beyond "no crash": an accepted target is normalised (no '.',
// '..' or empty segment, no control byte, '\' or encoded '/' anywhere once
// decoded), its decoded rest is its raw rest percent-decoded, and refusals
// are printable; a prefix allows exactly the paths at or below it, segment
// by segment; a token verifies only as minted, for its own sandbox, before
// its expiry, and any edit of a minted token is refused.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_checks.h"
#include "egress/gateway.h"
#include "egress/gateway_token.h"

namespace {

namespace net = corral::net;
using corral::fuzz::printable;
using corral::fuzz::require;

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  path.remove_prefix(1);
  while (true) {
    std::size_t s = path.find('/');
    out.push_back(path.substr(0, s));
    if (s == std::string_view::npos) break;
    path.remove_prefix(s + 1);
  }
  return out;
}

void check_target(std::string_view in) {
  auto t = net::split_gateway_target(in);
  if (!t) {
    require(t.error().code == corral::ErrorCode::kInvalidArgument);
    require(!t.error().message.empty() && printable(t.error().message));
    return;
  }
  require(in.starts_with("/"));
  require(!t->service.empty() && t->service.find('/') == std::string::npos);
  require(t->rest.starts_with("/") && t->decoded_rest.starts_with("/"));
  require(t->decoded_rest == percent_decode(t->rest));
  for (char c : t->query) require(c > 0x20 && c < 0x7f);
  for (char c : t->rest) require(c > 0x20 && c < 0x7f && c != '\\');
  for (std::string_view text : {std::string_view(t->service), std::string_view(t->decoded_rest)}) {
    for (char c : text) {
      require(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f && c != '\\');
    }
  }
  require(t->service != "." && t->service != "..");
  auto segs = segments(t->decoded_rest);
  for (std::size_t i = 0; i < segs.size(); ++i) {
    require(segs[i] != "." && segs[i] != "..");
    // Only a trailing '/' leaves an empty segment ("/" itself is one).
    require(!segs[i].empty() || i + 1 == segs.size());
  }
}

// A prefix allows a path when the prefix's segments start the path's: a
// prefix ending in '/' allows the paths strictly below it.
bool reference_allowed(std::string_view prefix, std::string_view rest) {
  if (prefix == "/") return true;
  bool below_only = prefix.ends_with("/");
  if (below_only) prefix.remove_suffix(1);
  auto p = segments(prefix);
  auto r = segments(rest);
  if (r.size() < p.size()) return false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] != r[i]) return false;
  }
  return !below_only || r.size() > p.size();
}

void check_path_allowed(std::string_view in) {
  std::size_t blank = in.find("\n\n");
  if (blank == std::string_view::npos) return;
  std::vector<std::string> prefixes;
  std::string_view list = in.substr(0, blank);
  while (!list.empty() && prefixes.size() < 8) {
    std::size_t nl = list.find('\n');
    prefixes.emplace_back(list.substr(0, nl));
    list = nl == std::string_view::npos ? std::string_view() : list.substr(nl + 1);
  }
  auto service =
      net::parse_gateway_service("svc", "http://10.0.0.1:8080/base", {}, prefixes, std::nullopt);
  if (!service) return;
  auto t = net::split_gateway_target(in.substr(blank + 2));
  if (!t) return;
  bool allowed = net::gateway_path_allowed(*service, t->decoded_rest);
  bool expected = false;
  for (const auto& p : service->path_prefixes) {
    require(p.starts_with("/"));
    expected |= reference_allowed(p, t->decoded_rest);
  }
  require(allowed == expected);
}

constexpr std::string_view kSecret = "0123456789abcdef0123456789abcdef";
constexpr std::int64_t kNow = 1'800'000'000;
constexpr std::size_t kMaxTokenBytes = 1024;  // gateway_token.cc

void check_token(std::string_view in) {
  std::size_t nl = in.find('\n');
  std::string_view token = in.substr(0, nl);
  std::string_view sandbox = nl == std::string_view::npos ? "sb" : in.substr(nl + 1);

  auto c = net::verify_gateway_token(kSecret, token, sandbox, kNow);
  require(c.ok() == c.reason.empty());
  require(printable(c.reason));
  if (c.ok()) {
    // Only a minted token passes: re-minting it from its own fields gives it back.
    std::size_t last = token.rfind('.');
    std::size_t exp_dot = token.rfind('.', last - 1);
    std::int64_t expiry = std::stoll(std::string(token.substr(exp_dot + 1, last - exp_dot - 1)));
    require(expiry > kNow);
    require(net::mint_gateway_token(kSecret, sandbox, expiry) == token);
  }

  // A minted token for this sandbox passes; every single-byte edit of it fails.
  if (sandbox.empty()) return;
  std::int64_t expiry = kNow + 1 + static_cast<std::int64_t>(in.size());
  std::string minted = net::mint_gateway_token(kSecret, sandbox, expiry);
  if (minted.size() > kMaxTokenBytes) {
    // Only for ids far longer than corral's: verify reads at most 1 KiB.
    require(net::verify_gateway_token(kSecret, minted, sandbox, kNow).error ==
            net::TokenError::kMalformed);
    return;
  }
  require(net::verify_gateway_token(kSecret, minted, sandbox, kNow).ok());
  auto later = net::verify_gateway_token(kSecret, minted, sandbox, expiry);
  require(later.error == net::TokenError::kExpired);
  auto other = net::verify_gateway_token(kSecret, minted, std::string(sandbox) + "x", kNow);
  require(other.error == net::TokenError::kOtherSandbox);
  auto forged = net::verify_gateway_token("another owner's secret", minted, sandbox, kNow);
  require(forged.error == net::TokenError::kBadSignature);
  for (std::size_t i = 0; i < in.size() && i < 4; ++i) {
    std::string edited = minted;
    auto u = static_cast<unsigned char>(in[i]);
    std::size_t at = (u * 31u + i * 7u) % edited.size();
    edited[at] = static_cast<char>(edited[at] ^ (1 + u % 127));
    require(!net::verify_gateway_token(kSecret, edited, sandbox, kNow).ok());
  }
  if (!in.empty()) {
    std::string shorter =
        minted.substr(0, minted.size() - 1 - static_cast<unsigned char>(in[0]) % minted.size());
    require(!net::verify_gateway_token(kSecret, shorter, sandbox, kNow).ok());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      check_target(in);
      break;
    case 1:
      check_path_allowed(in);
      break;
    case 2:
      check_token(in);
      break;
  }
  return 0;
}
