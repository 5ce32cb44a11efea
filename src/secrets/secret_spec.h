// The secrets a sandbox asks for (issue 5, S1, S2, S4, S7), and their
// resolution against the daemon's SecretStore: defaults applied, every rule
// checked, each value copied (guarded memory) for the injection step.
// Plain structs: the API and spec codecs fill SecretRequest.
// User guide: docs/secrets.md, "Declaring secrets in a spec".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "secrets/secret_store.h"
#include "secrets/secret_value.h"

namespace corral::secrets {

enum class SecretMode : std::uint8_t {
  kEnv,     // an environment variable of the processes corral starts
  kFile,    // a file on the sandbox's secrets tmpfs (/run/secrets/NAME)
  kBroker,  // the sandbox holds a token; the proxy swaps it toward the hosts
};
enum class SecretTier : std::uint8_t {
  kLow,     // default mode env
  kMedium,  // default mode file
  kHigh,    // default (and only) mode broker
};

std::string_view secret_mode_name(SecretMode mode);  // "env", "file", "broker"
std::string_view secret_tier_name(SecretTier tier);  // "low", "medium", "high"
Result<SecretMode> parse_secret_mode(std::string_view text);
Result<SecretTier> parse_secret_tier(std::string_view text);

// A host a broker secret may be sent to: an exact name ("api.openai.com")
// or "*.example.com" (one or more labels before example.com; not
// example.com itself), and a port.
struct SecretHost {
  std::string host;
  std::uint16_t port = 443;
  // Intercept TLS to this host (per-daemon CA) so the token can be swapped
  // in HTTPS requests sent straight to it, not only through the gateway.
  bool intercept = false;
};

struct SecretRequest {
  std::string name;  // the secret's name in this sandbox: [A-Za-z0-9][A-Za-z0-9_.-]{0,63}
  std::string key;   // the store key it takes its value from
  std::optional<SecretMode> mode;  // default: from the tier
  SecretTier tier = SecretTier::kMedium;
  std::string env_var;            // env and broker: default NAME upper-cased, '-' and '.' -> '_'
  std::string path;               // file: a file name under /run/secrets; default NAME
  std::vector<SecretHost> hosts;  // broker: at least one
  std::optional<std::chrono::seconds> ttl;  // broker token lifetime
};

struct ResolveContext {
  // The sandbox's maximum lifetime (must be > 0): the longest any secret
  // or token may live.
  std::chrono::seconds lifetime{0};
  // The task's declared expected duration, if any: the default token TTL
  // is 1.5 times it (capped at the lifetime).
  std::optional<std::chrono::seconds> expected_duration;
};

struct ResolvedSecret {
  std::string name;
  std::string key;
  SecretMode mode = SecretMode::kFile;
  SecretTier tier = SecretTier::kMedium;
  std::string env_var;            // env and broker modes (broker: holds the token)
  std::string path;               // file mode: "/run/secrets/<file>"
  std::vector<SecretHost> hosts;  // broker mode; host names lower-cased
  std::chrono::seconds ttl{0};    // broker: the token's TTL; else the lifetime
  SecretValue value;              // a copy of the store's value
};

struct ResolvedSecrets {
  std::vector<ResolvedSecret> secrets;
};

// Limits of one spec (S7: one secret per external service).
inline constexpr std::size_t kMaxSecretsPerSandbox = 32;
inline constexpr std::size_t kMaxHostsPerSecret = 16;
inline constexpr std::size_t kMaxSecretNameLength = 64;
inline constexpr std::string_view kSecretsDir = "/run/secrets";

bool valid_secret_name(std::string_view name);
// An env variable name a secret may use: [A-Za-z_][A-Za-z0-9_]*, and not
// one corral sets or that changes how programs load or connect (PATH,
// HOME, LD_*, CORRAL_*, *_PROXY, SSL_CERT_FILE, ...). Empty when allowed,
// else why not.
std::string env_var_refusal(std::string_view name);
// A host pattern: lower-case labels of [a-z0-9-] (an IPv4 literal is
// fine), or "*." followed by at least two labels.
bool valid_host_pattern(std::string_view pattern);
// Whether `host` (lower case) matches `pattern` (exact, or "*.suffix":
// one or more labels before the suffix).
bool host_matches(std::string_view pattern, std::string_view host);

// Checks every request and applies the defaults. The first problem is the
// error: it names the entry (index and name) and the field, and says what
// to do. Never a value.
Result<ResolvedSecrets> resolve_secret_requests(const std::vector<SecretRequest>& requests,
                                                const SecretStore& store,
                                                const ResolveContext& context);

}  // namespace corral::secrets
