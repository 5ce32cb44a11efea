// AuditRedactor: what every string of every audit record passes before it
// is hashed and written (S3; issue 12, item 7). The audit log's one choke
// point (AuditLog::set_string_filter) calls redact() for every string and
// every key of every record, whatever built the record: the file API, the
// egress proxy, the DNS server, the gateway, the broker.
//
// On top of the store's redactor (every value, its encoded forms, the known
// key formats; case-sensitive, as for the daemon's own output):
//   - every value and encoded form in any letter case. Host names reach the
//     records lower-cased (DNS names, Host, CONNECT targets, SNI), and a
//     sandbox holding a value can change its case: a value found only this
//     way leaves the whole string lower-cased, with the value replaced;
//   - every broker token, known or not (a revoked one, another daemon's),
//     by its shape: `corral_tok_` and its base62 body, its hex and its
//     base64 (both alphabets, any alignment), in any letter case. Tokens
//     are issued and revoked all the time, so they are found by shape
//     rather than by a set rebuilt per token.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "secrets/redactor.h"

namespace corral::secrets {

// The placeholder of a broker token in audit records.
inline constexpr std::string_view kTokenPlaceholder = "[REDACTED:broker-token]";

class AuditRedactor {
 public:
  // `exact`: the store's redactor (may be null). `values`: the same values,
  // for the letter-case-blind set (read during build() only).
  static Result<std::shared_ptr<const AuditRedactor>> build(
      std::shared_ptr<const RedactionSet> exact, const std::vector<NamedValue>& values);

  // `text` with every value, encoded form and token replaced.
  std::string redact(std::string_view text) const;

 private:
  AuditRedactor() = default;
  std::shared_ptr<const RedactionSet> exact_;
  // The values' forms lower-cased, matched against the text lower-cased.
  std::shared_ptr<const RedactionSet> caseless_;
};

// Every broker token in `text` (any case; plain, hex, base64) replaced by
// kTokenPlaceholder. Exposed for tests.
std::string redact_token_shapes(std::string_view text);

}  // namespace corral::secrets
