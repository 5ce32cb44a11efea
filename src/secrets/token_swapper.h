// TokenSwapper: what the egress proxy and the gateway ask of the secret
// broker (issue 5, S1 "broker" mode) for a request leaving a sandbox.
//
// A sandbox holding a broker secret has only a token (`corral_tok_...`).
// When one of its requests passes through a point where corral can read
// it (the gateway: plain HTTP inside; TLS interception for hosts marked
// for it; plain-HTTP requests through the proxy), the head is given to
// swap(): a valid token, of this sandbox, whose secret names the
// destination host, is replaced by the secret's value. A token that is
// expired, revoked, of another sandbox, or not allowed for the host makes
// the whole request refused (nothing is forwarded): sending it elsewhere is
// treated as an exfiltration attempt. The implementation audits every swap
// and refusal itself.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "secrets/secret_value.h"

namespace corral::secrets {

// Every broker token starts with this (then 43 base62 characters).
inline constexpr std::string_view kTokenPrefix = "corral_tok_";

struct OutboundRequest {
  std::string_view sandbox;  // the sandbox id
  std::string_view host;     // the destination host name, lower case, no port
  std::uint16_t port = 0;
  std::string_view via;  // "gateway", "tls-intercept" or "http": for the audit record
};

enum class SwapOutcome : std::uint8_t {
  kNoToken,  // the head holds no token: forward it unchanged
  kSwapped,  // every token in it was replaced: forward the new head
  kRefused,  // some token may not go there: refuse the request
};

// One text a swap put into the head, and what the sandbox had written
// there. The response to a swapped request is scanned for `sent` (and,
// with `encodings`, its base64, percent and hex forms) and each is written
// back as `had` (in the same form): a host that reflects the request
// (an echo service, an error page quoting the Authorization field) gives
// the sandbox its own token again, never the value
// (reflection_guard.h, docs/secrets.md "Responses").
struct SwappedText {
  std::shared_ptr<const SecretValue> sent;  // a value, or a whole Basic credential as sent
  std::string had;                          // the token, or the Basic credential as it came
  bool encodings = true;                    // false for a Basic credential (itself only)
};

struct SwapResult {
  SwapOutcome outcome = SwapOutcome::kNoToken;
  std::vector<std::string> secrets;  // names of the secrets swapped (or refused)
  std::string reason;                // why refused: "expired", "revoked", "host not allowed", ...
  // kSwapped: every text put in, for the response scan. A swap that
  // leaves this empty gets no response scan.
  std::vector<SwappedText> swapped;
};

// The refusal text for a token that was valid once and is no more
// (revoked, expired), naming that plainly for the sandbox's program (issue
// 15, S4): "broker token revoked: ...". Empty for every other refusal,
// which the caller words itself. `destination` is where the request was
// going ("host:port" or a gateway service).
std::string stale_token_refusal(const SwapResult& result, std::string_view destination);

class TokenSwapper {
 public:
  virtual ~TokenSwapper() = default;

  // `head` is a request head: request line and header fields, CRLF
  // separated, ending in an empty line; no body. On kSwapped it holds the
  // secret values: the caller sends it, then wipes it (secrets::wipe).
  // On kRefused it is left unchanged.
  virtual SwapResult swap(const OutboundRequest& request, std::string& head) = 0;

  // Whether the proxy should intercept TLS from `sandbox` to host:port
  // (a broker secret of that sandbox names the host and asks for it).
  virtual bool intercepts(std::string_view sandbox, std::string_view host,
                          std::uint16_t port) const = 0;

  // The gateway's runtime endpoint (GET http://gateway.corral.internal/_secret
  // with the token as bearer): the value of the secret behind `token`, for
  // its own sandbox, when its tier allows a runtime read. Refusals are
  // kPermissionDenied with the reason; the implementation audits both.
  virtual Result<SecretValue> read_value(std::string_view token, std::string_view sandbox) {
    (void)token;
    (void)sandbox;
    return make_error(ErrorCode::kUnavailable, "this broker serves no runtime reads");
  }
};

}  // namespace corral::secrets
