// corral create: a long-lived sandbox in the daemon (docs/cli.md).
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/base64.h"
#include "base/utf8.h"
#include "base/json_text.h"
#include "cli/daemon_client.h"
#include "spec/mount_arg.h"
#include "spec/sandbox_spec.h"
#include "spec/units.h"

namespace corral::cli {

namespace {

// "NAME[,key=K][,tier=T][,mode=M][,env=VAR][,path=P][,host=H[:PORT]]
// [,intercept=H[:PORT]][,ttl=D]" as the API's secret object. The daemon
// checks the rules; this only splits the words (the error says which).
tl::expected<ojson, std::string> parse_secret_arg(const std::string& text) {
  ojson s = ojson::object();
  std::size_t start = 0;
  bool first = true;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (first) {
      if (item.empty() || item.find('=') != std::string::npos)
        return tl::unexpected(std::string("starts with the secret's name"));
      s["name"] = item;
      first = false;
      continue;
    }
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      return tl::unexpected("\"" + item + "\" is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "key" || key == "tier" || key == "mode" || key == "path") {
      s[key] = value;
    } else if (key == "env") {
      s["env_var"] = value;
    } else if (key == "ttl") {
      auto d = parse_duration(value);
      if (!d) return tl::unexpected("ttl: " + d.error().message);
      s["ttl"] = std::to_string(d->count()) + "ms";
    } else if (key == "host" || key == "intercept") {
      ojson h = ojson::object();
      auto colon = value.rfind(':');
      h["host"] = value.substr(0, colon);
      if (colon != std::string::npos) {
        int port = std::atoi(value.c_str() + colon + 1);
        if (port < 1 || port > 65535) return tl::unexpected("\"" + value + "\" has no valid port");
        h["port"] = port;
      }
      if (key == "intercept") h["intercept"] = true;
      s["hosts"].push_back(std::move(h));
    } else {
      return tl::unexpected("unknown field \"" + key +
                            "\" (key, tier, mode, env, path, host, intercept, ttl)");
    }
  }
  return s;
}

constexpr const char* kCreateUsage =
    "usage: corral create [options]\n"
    "\n"
    "Creates a long-lived sandbox in the daemon and prints its id. Run commands\n"
    "in it with `corral exec`, copy files with `corral cp`, end it with `corral rm`\n"
    "(or let its lifetime run out).\n"
    "\n"
    "options (unset ones take the daemon's defaults):\n"
    "  --image NAME         base image of the daemon's data dir (default: host base)\n"
    "  --memory SIZE        memory+swap limit (512Mi, 2Gi)\n"
    "  --cpus N             CPU quota in cores (1.5, 500m)\n"
    "  --pids N             process limit\n"
    "  --disk SIZE          writable layer size\n"
    "  --timeout DURATION   default timeout of each command (30s, 5m)\n"
    "  --lifetime DURATION  the sandbox is destroyed after this long (default 10m)\n"
    "  --env K=V            environment of every command (repeatable)\n"
    "  --workdir DIR        working directory of commands (default /workspace)\n"
    "  --root               commands run as uid 0 inside (never root on the host)\n"
    "  --hostname NAME      (default sandbox)\n"
    "  --network MODE       none (loopback only, the default), allowlist or open\n"
    "  --allow RULE         let the sandbox reach RULE: [http|tls|tcp://]host[:ports]\n"
    "                       (repeatable; docs/network.md)\n"
    "  --deny RULE          refuse RULE even if an allow rule matches (repeatable)\n"
    "  --network-template NAME  start from a rule set: code-exec, data-query, scraping\n"
    "  --dns IP[:PORT]      upstream DNS server for this sandbox (repeatable)\n"
    "  --gateway NAME       grant an internal service of the daemon's gateway (repeatable)\n"
    "  --secret NAME[,key=K][,tier=low|medium|high][,mode=env|file|broker][,env=VAR]\n"
    "                 [,path=FILE][,host=H[:PORT]][,intercept=H[:PORT]][,ttl=DURATION]\n"
    "                       give the sandbox a secret of the daemon's store (repeatable;\n"
    "                       docs/secrets.md): host= may take the broker token to H,\n"
    "                       intercept= also intercepts TLS to H so the token is swapped\n"
    "  --expected-duration DURATION  how long the task should take (broker tokens\n"
    "                       live 1.5 times this)\n"
    "  --idempotency-key K  a retry with the same key returns the same sandbox\n"
    "  --json               print the sandbox's full description instead of its id\n";

}  // namespace

int create_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kCreateUsage);
  ojson body = ojson::object();
  ojson limits = ojson::object();
  ojson env = ojson::object();
  std::optional<std::string> idempotency_key;
  bool as_json = false;
  flags.flag({"--root"}, [&] { body["root"] = true; });
  flags.flag({"--json"}, as_json);
  flags.sent("--image", body, "image");
  flags.sent("--memory", limits, "memory", parse_size);
  flags.sent("--cpus", limits, "cpus", parse_cpus);
  flags.option("--pids", [&](const std::string& v) -> Refusal {
    auto r = parse_count(v);
    if (!r) return refused("--pids", r.error());
    limits["pids"] = *r;
    return std::nullopt;
  });
  flags.sent("--disk", limits, "disk", parse_size);
  flags.sent("--timeout", limits, "timeout", parse_duration);
  flags.sent("--lifetime", body, "max_lifetime", parse_duration);
  flags.option("--env", [&](const std::string& v) -> Refusal {
    auto r = parse_env_arg(v);
    if (!r) return refused("--env", r.error());
    env[r->first] = r->second;
    return std::nullopt;
  });
  flags.sent("--workdir", body, "workdir");
  flags.option("--hostname", [&](const std::string& v) -> Refusal {
    if (!is_valid_hostname(v))
      return "--hostname \"" + v +
             "\" is not a host name: use letters, digits, '-' and '.' (at most 64)";
    body["hostname"] = v;
    return std::nullopt;
  });
  ojson network = ojson::object();
  flags.sent("--network", network, "mode");
  flags.sent("--network-template", network, "template");
  auto listed = [&](std::string_view flag, const char* key) {
    flags.option(flag, [&network, key](const std::string& v) -> Refusal {
      network[key].push_back(v);
      return std::nullopt;
    });
  };
  listed("--allow", "allow");
  listed("--deny", "deny");
  listed("--dns", "dns_servers");
  listed("--gateway", "gateway");
  ojson secrets = ojson::array();
  flags.option("--secret", [&secrets](const std::string& v) -> Refusal {
    auto s = parse_secret_arg(v);
    if (!s) return "--secret \"" + v + "\": " + s.error();
    secrets.push_back(std::move(*s));
    return std::nullopt;
  });
  flags.sent("--expected-duration", body, "expected_duration", parse_duration);
  flags.option("--idempotency-key", idempotency_key);
  if (auto status = flags.parse(args)) return *status;
  if (!secrets.empty()) body["secrets"] = std::move(secrets);
  if (!network.empty()) body["network"] = std::move(network);
  if (!limits.empty()) body["limits"] = std::move(limits);
  if (!env.empty()) body["env"] = std::move(env);
  if (idempotency_key && !is_valid_utf8(*idempotency_key))
    return flags.usage_error(not_text_message("--idempotency-key"));
  // Only what was given goes out: the daemon's defaults fill in the rest.
  if (auto bad = non_utf8_field(body, ""))
    return flags.usage_error(not_text_message("the request's " + json_text(ojson(*bad))));
  const std::string text = json_text(body);
  if (auto parsed = api::parse_create_sandbox(text); !parsed) {
    api::ApiError e = api::to_api_error(parsed.error());
    return flags.usage_error(e.message);
  }
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  http::Headers headers;
  if (idempotency_key) headers.push_back({"idempotency-key", *idempotency_key});
  auto reply = (*provider)->call("POST", "/v1/sandboxes", text, headers);
  return print_reply(reply, as_json, api::parse_sandbox_info,
                     [](const api::SandboxInfo& info) { printf("%s\n", info.id.c_str()); });
}

}  // namespace corral::cli
