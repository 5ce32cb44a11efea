#include "secrets/secret_spec.h"

#include "base/strings.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <new>
#include <string>
#include <utility>

namespace corral::secrets {

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

bool alnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// A plain file name for /run/secrets: like a secret name.
bool valid_file_name(std::string_view name) {
  if (name.empty() || name.size() > 128 || !alnum(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return alnum(c) || c == '_' || c == '.' || c == '-'; });
}

bool is_wildcard(std::string_view pattern) { return pattern.substr(0, 2) == "*."; }

// Two host patterns (same port) that some host name matches both of.
bool patterns_overlap(std::string_view a, std::string_view b) {
  if (a == b) return true;
  bool wa = is_wildcard(a);
  bool wb = is_wildcard(b);
  if (wa && !wb) return host_matches(a, b);
  if (wb && !wa) return host_matches(b, a);
  if (wa && wb) {
    std::string_view sa = a.substr(1);  // ".example.com"
    std::string_view sb = b.substr(1);
    auto ends_with = [](std::string_view s, std::string_view suffix) {
      return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
    };
    return ends_with(sa, sb) || ends_with(sb, sa);
  }
  return false;
}

std::string entry_ref(std::size_t index, const SecretRequest& r) {
  std::string s = "secrets[" + std::to_string(index) + "]";
  if (valid_secret_name(r.name)) s += " ('" + r.name + "')";
  return s;
}

tl::unexpected<Error> field_error(std::size_t index, const SecretRequest& r, std::string_view field,
                                  std::string problem, std::string hint) {
  return make_error(ErrorCode::kInvalidArgument,
                    entry_ref(index, r) + "." + std::string(field) + ": " + std::move(problem),
                    std::move(hint));
}

constexpr const char* kReservedEnv[] = {
    // Set by corral for every sandbox (jail/sandbox_planner, sandbox_network).
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "HOSTNAME", "LANG", "TERM", "PWD", "HTTP_PROXY",
    "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "FTP_PROXY",
    // Trust anchors corral points at its CA for TLS interception.
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE",
    // Read by shells at start-up.
    "ENV", "BASH_ENV", "IFS"};
constexpr const char* kReservedEnvPrefixes[] = {"LD_", "CORRAL_"};

}  // namespace

std::string_view secret_mode_name(SecretMode mode) {
  switch (mode) {
    case SecretMode::kEnv:
      return "env";
    case SecretMode::kFile:
      return "file";
    case SecretMode::kBroker:
      return "broker";
  }
  return "?";
}

std::string_view secret_tier_name(SecretTier tier) {
  switch (tier) {
    case SecretTier::kLow:
      return "low";
    case SecretTier::kMedium:
      return "medium";
    case SecretTier::kHigh:
      return "high";
  }
  return "?";
}

Result<SecretMode> parse_secret_mode(std::string_view text) {
  if (text == "env") return SecretMode::kEnv;
  if (text == "file") return SecretMode::kFile;
  if (text == "broker") return SecretMode::kBroker;
  return make_error(ErrorCode::kInvalidArgument,
                    "secret mode '" + std::string(text) + "' is not known",
                    "use env, file or broker");
}

Result<SecretTier> parse_secret_tier(std::string_view text) {
  if (text == "low") return SecretTier::kLow;
  if (text == "medium") return SecretTier::kMedium;
  if (text == "high") return SecretTier::kHigh;
  return make_error(ErrorCode::kInvalidArgument,
                    "secret tier '" + std::string(text) + "' is not known",
                    "use low, medium or high");
}

bool valid_secret_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxSecretNameLength || !alnum(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return alnum(c) || c == '_' || c == '.' || c == '-'; });
}

std::string env_var_refusal(std::string_view name) {
  if (name.empty() || name.size() > 128 ||
      !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') ||
      !std::all_of(name.begin(), name.end(), [](char c) { return alnum(c) || c == '_'; })) {
    return "not a variable name (a letter or _, then letters, digits or _)";
  }
  const std::string u = upper(name);
  for (const char* r : kReservedEnv) {
    if (u == r) return "corral sets " + std::string(r) + " itself: a secret may not override it";
  }
  for (const char* p : kReservedEnvPrefixes) {
    if (u.rfind(p, 0) == 0) {
      return "variables starting with " + std::string(p) +
             " are reserved: a secret may not set one";
    }
  }
  return {};
}

bool valid_host_pattern(std::string_view pattern) {
  std::string_view rest = pattern;
  bool wildcard = is_wildcard(pattern);
  if (wildcard) rest = pattern.substr(2);
  if (rest.empty() || rest.size() > 253) return false;
  std::size_t labels = 0;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = rest.find('.', start);
    std::string_view label =
        rest.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
    }
    ++labels;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return !wildcard || labels >= 2;
}

bool host_matches(std::string_view pattern, std::string_view host) {
  if (host.empty()) return false;
  if (!is_wildcard(pattern)) return pattern == host;
  std::string_view suffix = pattern.substr(1);  // ".example.com"
  return host.size() > suffix.size() && host.substr(host.size() - suffix.size()) == suffix &&
         host[host.size() - suffix.size() - 1] != '.';
}

Result<ResolvedSecrets> resolve_secret_requests(const std::vector<SecretRequest>& requests,
                                                const SecretStore& store,
                                                const ResolveContext& context) {
  using std::chrono::seconds;
  if (context.lifetime <= seconds(0)) {
    return make_error(ErrorCode::kInternal, "resolving secrets: the sandbox lifetime is not > 0");
  }
  if (context.expected_duration && *context.expected_duration <= seconds(0)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "expected_duration must be greater than 0 when secrets are declared",
                      "give the task's expected duration in seconds, or leave it out");
  }
  if (requests.size() > kMaxSecretsPerSandbox) {
    return make_error(ErrorCode::kInvalidArgument,
                      "secrets: " + std::to_string(requests.size()) +
                          " entries; a sandbox may ask for at most " +
                          std::to_string(kMaxSecretsPerSandbox),
                      "one secret per external service the task calls (S7): drop the others");
  }

  ResolvedSecrets out;
  std::map<std::string, std::size_t> names;  // name -> index
  std::map<std::string, std::size_t> keys;   // store key -> index
  std::map<std::string, std::size_t> vars;   // env var -> index
  std::map<std::string, std::size_t> paths;  // file path -> index
  struct HostUse {
    std::string pattern;
    std::uint16_t port;
    std::size_t index;
  };
  std::vector<HostUse> host_uses;

  for (std::size_t i = 0; i < requests.size(); ++i) {
    const SecretRequest& r = requests[i];
    if (!valid_secret_name(r.name)) {
      return field_error(i, r, "name",
                         r.name.empty() ? "missing"
                                        : "not a valid name (1 to 64 of A-Z a-z 0-9 _ . -, "
                                          "starting with a letter or digit)",
                         "name the secret, e.g. \"openai\"");
    }
    if (auto [it, fresh] = names.emplace(r.name, i); !fresh) {
      return field_error(
          i, r, "name",
          "'" + r.name + "' is already the name of secrets[" + std::to_string(it->second) + "]",
          "give each secret its own name");
    }

    // key: one store key, named exactly (S7: no wildcard, no whole store).
    if (r.key.empty()) {
      return field_error(i, r, "key", "missing", "name the store key the value comes from");
    }
    if (r.key.find('*') != std::string::npos) {
      return field_error(i, r, "key", "wildcards are refused: one secret per external service (S7)",
                         "name exactly one store key per secret");
    }
    if (!valid_secret_key(r.key)) {
      return field_error(i, r, "key", "not a valid store key (1 to 128 of A-Z a-z 0-9 _ . -)",
                         "name exactly one store key per secret");
    }
    const SecretValue* value = store.find(r.key);
    if (value == nullptr) {
      return make_error(
          ErrorCode::kNotFound,
          entry_ref(i, r) + ".key: store key '" + r.key + "' is not in the daemon's secret store",
          "check the spelling, or add the key to the store (`corral secrets check` "
          "lists the keys)");
    }
    if (auto [it, fresh] = keys.emplace(r.key, i); !fresh) {
      return field_error(i, r, "key",
                         "store key '" + r.key + "' is already used by secrets[" +
                             std::to_string(it->second) + "]",
                         "a store key may be used once per sandbox (S7)");
    }

    const SecretMode mode = r.mode.value_or(r.tier == SecretTier::kLow      ? SecretMode::kEnv
                                            : r.tier == SecretTier::kMedium ? SecretMode::kFile
                                                                            : SecretMode::kBroker);
    if (r.tier == SecretTier::kHigh && mode != SecretMode::kBroker) {
      return make_error(ErrorCode::kInvalidArgument,
                        "secret '" + r.name +
                            "' is tier high: env and file are refused; use mode "
                            "broker (" +
                            entry_ref(i, r) + ".mode is " + std::string(secret_mode_name(mode)) +
                            ")",
                        "set mode: broker and list the hosts it may be sent to, or lower the tier");
    }

    ResolvedSecret s;
    s.name = r.name;
    s.key = r.key;
    s.mode = mode;
    s.tier = r.tier;
    const std::string mode_name(secret_mode_name(mode));

    // Fields that belong to other modes are refused, not ignored.
    if (mode != SecretMode::kFile && !r.path.empty()) {
      return field_error(i, r, "path", "is for mode file; this secret is mode " + mode_name,
                         mode == SecretMode::kBroker ? "the broker token is given in env_var"
                                                     : "remove path, or set mode: file");
    }
    if (mode == SecretMode::kFile && !r.env_var.empty()) {
      return field_error(i, r, "env_var", "is for modes env and broker; this secret is mode file",
                         "remove env_var, or set mode: env");
    }
    if (mode != SecretMode::kBroker && !r.hosts.empty()) {
      return field_error(i, r, "hosts", "are for mode broker; this secret is mode " + mode_name,
                         "remove hosts, or set mode: broker");
    }
    if (mode != SecretMode::kBroker && r.ttl) {
      return field_error(
          i, r, "ttl",
          "is for mode broker; an " + mode_name + " secret lives as long as the sandbox",
          "remove ttl, or set mode: broker");
    }

    if (mode == SecretMode::kEnv || mode == SecretMode::kBroker) {
      std::string var = r.env_var;
      if (var.empty()) {
        var = upper(r.name);
        std::replace(var.begin(), var.end(), '-', '_');
        std::replace(var.begin(), var.end(), '.', '_');
      }
      if (std::string why = env_var_refusal(var); !why.empty()) {
        return field_error(
            i, r, "env_var",
            "'" + var + "'" + (r.env_var.empty() ? " (the default)" : "") + ": " + why,
            "set env_var to another name, e.g. OPENAI_API_KEY");
      }
      if (auto [it, fresh] = vars.emplace(var, i); !fresh) {
        return field_error(
            i, r, "env_var",
            "'" + var + "' is already set by secrets[" + std::to_string(it->second) + "]",
            "give each secret its own variable");
      }
      s.env_var = std::move(var);
    }

    if (mode == SecretMode::kFile) {
      std::string file = r.path.empty() ? r.name : r.path;
      const std::string dir_prefix = std::string(kSecretsDir) + "/";
      if (file.rfind(dir_prefix, 0) == 0) file.erase(0, dir_prefix.size());
      if (!valid_file_name(file) || file == "." || file == "..") {
        return field_error(i, r, "path",
                           "must be a plain file name under " + std::string(kSecretsDir) +
                               " (no '/', no '..', not starting with '.')",
                           "write e.g. path: openai (the file is /run/secrets/openai)");
      }
      s.path = dir_prefix + file;
      if (auto [it, fresh] = paths.emplace(s.path, i); !fresh) {
        return field_error(
            i, r, "path",
            s.path + " is already the file of secrets[" + std::to_string(it->second) + "]",
            "give each secret its own file");
      }
    }

    if (mode == SecretMode::kBroker) {
      if (r.hosts.empty()) {
        return field_error(i, r, "hosts",
                           "a broker secret needs at least one host: its token is swapped only "
                           "toward them",
                           "list the API's host, e.g. hosts: [{host: api.openai.com}]");
      }
      if (r.hosts.size() > kMaxHostsPerSecret) {
        return field_error(i, r, "hosts",
                           std::to_string(r.hosts.size()) + " hosts; at most " +
                               std::to_string(kMaxHostsPerSecret),
                           "one secret per external service (S7)");
      }
      for (std::size_t h = 0; h < r.hosts.size(); ++h) {
        SecretHost host = r.hosts[h];
        host.host = ascii_lower(host.host);
        const std::string field = "hosts[" + std::to_string(h) + "]";
        if (!valid_host_pattern(host.host)) {
          return field_error(
              i, r, field,
              "'" + host.host + "' is not a host name or a '*.' pattern of at least two labels",
              "write api.example.com or *.example.com (no scheme, port or path)");
        }
        if (host.port == 0) {
          return field_error(i, r, field + ".port", "0 is not a port", "give a port, e.g. 443");
        }
        for (const SecretHost& other : s.hosts) {
          if (other.host == host.host && other.port == host.port) {
            return field_error(i, r, field,
                               host.host + ":" + std::to_string(host.port) + " is listed twice",
                               "list each host once");
          }
        }
        for (const HostUse& use : host_uses) {
          if (use.port == host.port && patterns_overlap(use.pattern, host.host)) {
            return field_error(
                i, r, field,
                host.host + ":" + std::to_string(host.port) + " is also a host of secrets[" +
                    std::to_string(use.index) + "] ('" + requests[use.index].name + "', " +
                    use.pattern + ")",
                "one secret per external service (S7): two broker secrets may not name the "
                "same host");
          }
        }
        s.hosts.push_back(std::move(host));
      }
      for (const SecretHost& h : s.hosts) host_uses.push_back({h.host, h.port, i});

      if (r.ttl) {
        if (*r.ttl <= seconds(0)) {
          return field_error(i, r, "ttl", "must be greater than 0", "give a TTL such as 10m");
        }
        if (*r.ttl > context.lifetime) {
          return field_error(i, r, "ttl",
                             std::to_string(r.ttl->count()) +
                                 "s is longer than the sandbox's "
                                 "lifetime (" +
                                 std::to_string(context.lifetime.count()) + "s)",
                             "shorten the TTL or lengthen max_lifetime");
        }
        s.ttl = *r.ttl;
      } else if (context.expected_duration) {
        // 1.5x, rounded up to a whole second, capped at the lifetime.
        seconds t((context.expected_duration->count() * 3 + 1) / 2);
        s.ttl = std::min(t, context.lifetime);
      } else {
        s.ttl = context.lifetime;
      }
    } else {
      s.ttl = context.lifetime;
    }

    try {
      s.value = *value;
    } catch (const std::bad_alloc&) {
      return locked_memory_error("resolving secret '" + r.name + "'");
    }
    out.secrets.push_back(std::move(s));
  }
  return out;
}

}  // namespace corral::secrets
