// Fuzz target for the secret broker's swap (src/secrets/broker.cc): the
// request heads a sandbox sends through the gateway, TLS interception or the
// plain-HTTP proxy, with broker tokens in them, plain or inside
// `Authorization: Basic` credentials.
//
// Tokens are random, so the input names them with placeholders the harness
// expands before the swap:
//   byte 0          the destination and sandbox (see kDestinations), its
//                   high bit: the request comes from the other sandbox
//   "\x01" + c      a token: 'a' alpha, 'b' beta (sandbox 1), 'c' gamma
//                   (sandbox 2), 'd' delta (revoked), another byte: a
//                   malformed token (the prefix, then that byte)
//   "\x02" ... EOL  the rest of the line, placeholders expanded, in base64
//                   (so "Authorization: Basic \x02user:\x01a" is git's form)
//
// Properties, beyond "no crash":
//   - a head with a token in it (plain, or in a Basic credential) is never
//     forwarded unchanged (kNoToken), nor one with a malformed token;
//   - kRefused and kNoToken leave the head unchanged; a refusal says why;
//   - after kSwapped no token survives (none in the text, none in a Basic
//     credential: a second swap finds nothing), and a value appears only
//     toward a host its secret names, from its own sandbox;
//   - a swap without Basic credentials is undone by putting the tokens
//     back in place of the values.
#include <sodium.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_checks.h"
#include "secrets/broker.h"

namespace {

namespace sec = corral::secrets;
using corral::fuzz::printable;
using corral::fuzz::require;

struct Dest {
  const char* host;
  std::uint16_t port;
};
// alpha: api.example.com:443; beta: *.svc.example:443; gamma: api.example.com:443
// (of sandbox 2); delta: api.example.com:443, revoked.
constexpr Dest kDestinations[] = {
    {"api.example.com", 443},
    {"x.svc.example", 443},
    {"a.b.svc.example", 443},
    {"svc.example", 443},
    {"api.example.com", 80},
    {"evil.example", 443},
    {"api.example.com.evil.example", 443},
    {"xsvc.example", 443},
};

struct Secret {
  std::string name;
  std::string sandbox;
  std::string value;
  std::vector<sec::SecretHost> hosts;
  std::string token;
  bool revoked = false;
};

struct World {
  sec::SecretBroker broker;
  std::vector<Secret> secrets;

  World() {
    require(sodium_init() >= 0);
    secrets = {
        {"alpha", "sb1", "VALUE-alpha-0001", {{"api.example.com", 443, true}}, "", false},
        {"beta", "sb1", "VALUE-beta-0002", {{"*.svc.example", 443, false}}, "", false},
        {"gamma", "sb2", "VALUE-gamma-0003", {{"api.example.com", 443, false}}, "", false},
        {"delta", "sb1", "VALUE-delta-0004", {{"api.example.com", 443, false}}, "", true},
    };
    for (auto& s : secrets) {
      sec::ResolvedSecret r;
      r.name = s.name;
      r.mode = sec::SecretMode::kBroker;
      r.tier = sec::SecretTier::kHigh;
      r.hosts = s.hosts;
      r.ttl = std::chrono::hours(24 * 365);
      r.value = sec::SecretValue(s.value);
      auto token = broker.issue(s.sandbox, r);
      require(token.has_value());
      s.token = *token;
      if (s.revoked) require(broker.revoke(s.token));
    }
  }

  bool allowed(const Secret& s, std::string_view sandbox, const Dest& d) const {
    if (s.revoked || s.sandbox != sandbox) return false;
    for (const auto& h : s.hosts) {
      if (h.port == d.port && sec::host_matches(h.host, d.host)) return true;
    }
    return false;
  }
};

World& world() {
  static World* w = new World();
  return *w;
}

std::string base64(std::string_view in) {
  std::string out(sodium_base64_ENCODED_LEN(in.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(in.data()),
                    in.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);  // the NUL
  return out;
}

// Expands token placeholders in `in`.
std::string expand_tokens(std::string_view in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\x01' || i + 1 == in.size()) {
      out += in[i];
      continue;
    }
    char c = in[++i];
    if (c >= 'a' && c <= 'd') {
      out += world().secrets[c - 'a'].token;
    } else {
      out += std::string(sec::kTokenPrefix) + c;
    }
  }
  return out;
}

// Expands the whole head: tokens, then "\x02" lines into base64.
std::string expand(std::string_view in) {
  std::string out;
  std::size_t pos = 0;
  while (pos < in.size()) {
    std::size_t mark = in.find('\x02', pos);
    out += expand_tokens(in.substr(pos, mark == std::string_view::npos ? mark : mark - pos));
    if (mark == std::string_view::npos) break;
    std::size_t eol = in.find_first_of("\r\n", mark);
    std::string_view plain =
        in.substr(mark + 1, eol == std::string_view::npos ? eol : eol - mark - 1);
    out += base64(expand_tokens(plain));
    pos = eol == std::string_view::npos ? in.size() : eol;
  }
  return out;
}

// The decoded texts of every `Authorization: Basic` credential in `head`
// (a looser reading than the broker's: any "basic" after a colon).
std::vector<std::string> basic_texts(std::string_view head) {
  std::vector<std::string> out;
  for (std::size_t at = 0; (at = head.find(':', at)) != std::string_view::npos; ++at) {
    std::size_t v = head.find_first_not_of(" \t", at + 1);
    if (v == std::string_view::npos || head.size() - v < 6) continue;
    std::string word(head.substr(v, 5));
    for (char& c : word) c = static_cast<char>(c | 0x20);
    if (word != "basic") continue;
    std::size_t b = head.find_first_not_of(" \t", v + 5);
    if (b == std::string_view::npos) continue;
    std::size_t e = head.find_first_of(" \t\r\n", b);
    std::string_view blob = head.substr(b, e == std::string_view::npos ? e : e - b);
    std::string bin(blob.size(), '\0');
    std::size_t n = 0;
    if (sodium_base642bin(reinterpret_cast<unsigned char*>(bin.data()), bin.size(), blob.data(),
                          blob.size(), nullptr, &n, nullptr, sodium_base64_VARIANT_ORIGINAL) == 0) {
      bin.resize(n);
      out.push_back(bin);
    }
  }
  return out;
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Whether `value` is in `head`, as it is or in a Basic credential.
bool shows(std::string_view head, std::string_view value) {
  if (contains(head, value)) return true;
  for (const auto& text : basic_texts(head)) {
    if (contains(text, value)) return true;
  }
  return false;
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (std::size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  World& w = world();
  const Dest& dest = kDestinations[(data[0] & 0x7f) % std::size(kDestinations)];
  const std::string sandbox = (data[0] & 0x80) ? "sb2" : "sb1";
  const std::string input =
      expand(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));

  std::string head = input;
  sec::OutboundRequest req{sandbox, dest.host, dest.port, "gateway"};
  sec::SwapResult r = w.broker.swap(req, head);

  bool token_in_basic = false;
  for (const auto& text : basic_texts(input)) token_in_basic |= contains(text, sec::kTokenPrefix);
  bool values_in_input = false;
  for (const auto& s : w.secrets) values_in_input |= shows(input, s.value);
  if (contains(input, sec::kTokenPrefix)) {
    require(r.outcome != sec::SwapOutcome::kNoToken);
  }
  if (r.outcome != sec::SwapOutcome::kSwapped) require(head == input);
  if (r.outcome == sec::SwapOutcome::kRefused) {
    require(!r.reason.empty() && printable(r.reason));
  }
  if (r.outcome == sec::SwapOutcome::kNoToken) {
    require(r.secrets.empty());
    return 0;
  }
  if (r.outcome == sec::SwapOutcome::kRefused) return 0;

  // Swapped: no token left (a second swap finds none, in the text or in a
  // credential), and each value only toward its hosts.
  require(!contains(head, sec::kTokenPrefix));
  for (const auto& s : w.secrets) {
    if (shows(head, s.value) && !shows(input, s.value)) require(w.allowed(s, sandbox, dest));
  }
  std::string again = head;
  require(w.broker.swap(req, again).outcome == sec::SwapOutcome::kNoToken);

  // Without Basic credentials, the swap is a plain substitution.
  if (!token_in_basic && !values_in_input) {
    std::string back = head;
    for (const auto& s : w.secrets) back = replace_all(back, s.value, s.token);
    require(back == input);
  }
  return 0;
}
