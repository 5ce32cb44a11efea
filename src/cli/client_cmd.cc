// corral create|ls|inspect|exec|cp|rm: the daemon's client verbs, over its
// HTTP API (sdk::RemoteProvider). User docs: docs/cli.md "Client commands".
// Exit codes: 0 success, 1 failure (the API's message and hint on stderr),
// 2 usage error (with the verb's usage text); `exec` exits with the
// command's status and uses 125 for its own failures, like `corral run`.
// Every verb reads its command line with ClientFlags (cli/client_flags.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/base64.h"
#include "base/json_text.h"
#include "base/unique_fd.h"
#include "cli/cli_output.h"
#include "cli/client_flags.h"
#include "cli/commands.h"
#include "sdk/remote_provider.h"
#include "spec/mount_arg.h"
#include "spec/sandbox_spec.h"
#include "spec/units.h"

namespace corral::cli {

namespace {

using ojson = nlohmann::ordered_json;

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

constexpr const char* kLsUsage =
    "usage: corral ls [--all] [--json]\n"
    "\n"
    "Lists the daemon's sandboxes: ID STATE AGE EXPIRES MEM DISK (used/limit).\n"
    "\n"
    "options:\n"
    "  --all                also destroyed (cleaned) sandboxes\n"
    "  --json               the API's JSON ({\"sandboxes\": [...]})\n";

constexpr const char* kInspectUsage =
    "usage: corral inspect ID\n"
    "\n"
    "Prints a sandbox's state, spec, live usage and timestamps as JSON.\n"
    "\n"
    "options:\n";

constexpr const char* kExecUsage =
    "usage: corral exec [options] ID -- CMD [ARGS...]\n"
    "       corral exec [options] ID --sh 'SHELL COMMAND'\n"
    "\n"
    "Runs a command in sandbox ID. Its stdout and stderr arrive here while it\n"
    "runs, and corral exits with its status. Interrupting corral (Ctrl-C) kills\n"
    "the command.\n"
    "\n"
    "options:\n"
    "  -i, --stdin          send our stdin to the command: it is read to its end\n"
    "                       first, then sent with the request (not interactive;\n"
    "                       at most 8 MiB: copy bigger inputs with corral cp)\n"
    "  --sh STRING          run STRING with /bin/sh -c instead of CMD after --\n"
    "  --env K=V            add an environment variable (repeatable)\n"
    "  --cwd DIR            working directory (default: the sandbox's workdir)\n"
    "  --timeout DURATION   kill the command after this long (default: the\n"
    "                       sandbox's --timeout)\n"
    "\n"
    "exit status: the command's; 124 its timeout fired; 128+N killed by signal N;\n"
    "126/127 not executable / not found; 125 corral failed (a bad option, an\n"
    "unknown sandbox, the daemon unreachable).\n"
    "\n"
    "options to reach the daemon:\n";

constexpr const char* kCpUsage =
    "usage: corral cp SRC DST\n"
    "\n"
    "Copies one regular file into or out of a sandbox. Exactly one side is\n"
    "ID:PATH (a path inside sandbox ID); the other is a local path, or - for\n"
    "stdin (upload) or stdout (download). Data streams in both directions with\n"
    "bounded memory.\n"
    "\n"
    "  corral cp ./job.py sb-0123456789ab:/workspace/      upload (into a directory)\n"
    "  corral cp - sb-0123456789ab:/workspace/in.csv < in.csv\n"
    "  corral cp sb-0123456789ab:/workspace/out.json .      download\n"
    "  corral cp sb-0123456789ab:/workspace/log.txt -       to stdout\n"
    "\n"
    "A PATH ending in / (or naming a directory) gets the other side's file name.\n"
    "An upload keeps the local file's permission bits (0644 from stdin); a\n"
    "download replaces DST only once every byte arrived. Write a local path\n"
    "that contains ':' as ./NAME.\n"
    "\n"
    "options:\n";

constexpr const char* kRmUsage =
    "usage: corral rm ID...\n"
    "       corral rm --all\n"
    "\n"
    "Destroys sandboxes: every process is killed and the writable layer wiped;\n"
    "then the daemon checks that nothing is left on the host and reports it if\n"
    "something is. Prints each id once it is gone.\n"
    "\n"
    "options:\n"
    "  --all                every sandbox of the daemon that is not destroyed yet\n";

Result<std::unique_ptr<sdk::RemoteProvider>> connect(const Endpoint& ep) {
  sdk::RemoteOptions options = sdk::RemoteProvider::options_from_environment();
  if (!ep.url.empty()) options.url = ep.url;
  if (!ep.key_file.empty()) {
    std::ifstream in(ep.key_file);
    if (!in)
      return make_error(ErrorCode::kNotFound, "cannot read the API key file " + ep.key_file,
                        "the daemon's key is in <data-dir>/api-key");
    std::string key;
    std::getline(in, key);
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t'))
      key.pop_back();
    options.api_key = key;
  }
  // Creating a sandbox may build the host base first; destroys wait for
  // the teardown to be verified.
  options.timeout = std::chrono::seconds(120);
  auto provider = sdk::RemoteProvider::open(options);
  if (!provider) return provider;
  if (!(*provider)->endpoint().is_unix && options.api_key.empty())
    return make_error(ErrorCode::kInvalidArgument, "no API key for " + options.url,
                      "set CORRAL_API_KEY, or pass --api-key-file FILE (the daemon prints "
                      "where its key file is when it starts)");
  return provider;
}

std::string pretty(std::string_view text) {
  auto j = ojson::parse(text, nullptr, false);
  if (j.is_discarded()) return std::string(text);
  return json_text(j, 2);
}

// The first key or string of `j` that is not UTF-8, named by its place in
// the request ("env.HOME", "network.allow[1]"); nothing if all are text.
// The API carries JSON text: such a value would reach the daemon changed
// (U+FFFD), so the command refuses it by name instead.
std::optional<std::string> non_utf8_field(const ojson& j, const std::string& at) {
  if (j.is_string()) {
    if (!api::is_valid_utf8(j.get_ref<const std::string&>())) return at;
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      const std::string here = (at.empty() ? "" : at + ".") + key;
      if (!api::is_valid_utf8(key)) return here + " (the name)";
      if (auto bad = non_utf8_field(value, here)) return bad;
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (auto bad = non_utf8_field(j[i], at + "[" + std::to_string(i) + "]")) return bad;
    }
  }
  return std::nullopt;
}

std::string not_text_message(std::string_view what) {
  return std::string(what) +
         " is not UTF-8 text: the API carries it as JSON text, so corral will not send it "
         "changed (write the bytes to a file in the sandbox instead)";
}

// The daemon's answer, indented. Exit status 0, or 1 without an answer.
int print_json(const Result<std::string>& reply) {
  if (!reply) return command_failure(reply.error());
  printf("%s\n", pretty(*reply).c_str());
  return 0;
}

// The daemon's answer as JSON with --json (`as_json`), else what `print`
// makes of it once `parse` has read it.
template <typename Parse, typename Print>
int print_reply(const Result<std::string>& reply, bool as_json, Parse parse, Print print) {
  if (!reply || as_json) return print_json(reply);
  auto parsed = parse(*reply);
  if (!parsed) return command_failure(parsed.error().wrap("the daemon's answer"));
  print(*parsed);
  return 0;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t w = ::write(fd, data.data(), data.size());
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    data.remove_prefix(static_cast<std::size_t>(w));
  }
  return true;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "45s", "12m", "3h", "2d".
std::string short_duration(std::int64_t ms) {
  std::int64_t s = ms / 1000;
  if (s < 0) s = 0;
  char buf[32];
  if (s < 120) {
    snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 120 * 60) {
    snprintf(buf, sizeof buf, "%lldm", static_cast<long long>(s / 60));
  } else if (s < 48 * 3600) {
    snprintf(buf, sizeof buf, "%lldh", static_cast<long long>(s / 3600));
  } else {
    snprintf(buf, sizeof buf, "%lldd", static_cast<long long>(s / 86400));
  }
  return buf;
}

// "512Mi", "1.5Gi", "16Ki", "0".
std::string short_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti"};
  double v = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0 || v >= 100 || v == static_cast<double>(static_cast<std::uint64_t>(v))) {
    snprintf(buf, sizeof buf, "%.0f%s", v, kUnits[unit]);
  } else {
    snprintf(buf, sizeof buf, "%.1f%s", v, kUnits[unit]);
  }
  return buf;
}

// ID:PATH, where ID has no '/' (so ./a:b and /x:y stay local).
struct RemotePath {
  std::string id;
  std::string path;
};
std::optional<RemotePath> remote_path(std::string_view arg) {
  std::size_t colon = arg.find(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string_view id = arg.substr(0, colon);
  if (id.find('/') != std::string_view::npos) return std::nullopt;
  return RemotePath{std::string(id), std::string(arg.substr(colon + 1))};
}

std::string base_name(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// ---- create -------------------------------------------------------------------------

int create_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kCreateUsage);
  ojson body = ojson::object();
  ojson limits = ojson::object();
  ojson env = ojson::object();
  std::optional<std::string> idempotency_key;
  bool as_json = false;
  flags.flag({"--root"}, [&] { body["root"] = true; });
  flags.flag({"--json"}, as_json);
  // A value sent as given in `object[key]`, once `check` accepted it (with
  // the same parsers as the daemon's).
  auto sent = [&](std::string_view flag, ojson& object, const char* key, auto check) {
    flags.option(flag, [flag, check, &object, key](const std::string& v) -> Refusal {
      if (auto r = check(v); !r) return refused(flag, r.error());
      object[key] = v;
      return std::nullopt;
    });
  };
  auto any = [](std::string_view) { return Status(); };
  sent("--image", body, "image", any);
  sent("--memory", limits, "memory", parse_size);
  sent("--cpus", limits, "cpus", parse_cpus);
  flags.option("--pids", [&](const std::string& v) -> Refusal {
    auto r = parse_count(v);
    if (!r) return refused("--pids", r.error());
    limits["pids"] = *r;
    return std::nullopt;
  });
  sent("--disk", limits, "disk", parse_size);
  sent("--timeout", limits, "timeout", parse_duration);
  sent("--lifetime", body, "max_lifetime", parse_duration);
  flags.option("--env", [&](const std::string& v) -> Refusal {
    auto r = parse_env_arg(v);
    if (!r) return refused("--env", r.error());
    env[r->first] = r->second;
    return std::nullopt;
  });
  sent("--workdir", body, "workdir", any);
  flags.option("--hostname", [&](const std::string& v) -> Refusal {
    if (!is_valid_hostname(v))
      return "--hostname \"" + v +
             "\" is not a host name: use letters, digits, '-' and '.' (at most 64)";
    body["hostname"] = v;
    return std::nullopt;
  });
  ojson network = ojson::object();
  sent("--network", network, "mode", any);
  sent("--network-template", network, "template", any);
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
  sent("--expected-duration", body, "expected_duration", parse_duration);
  flags.option("--idempotency-key", idempotency_key);
  if (auto status = flags.parse(args)) return *status;
  if (!secrets.empty()) body["secrets"] = std::move(secrets);
  if (!network.empty()) body["network"] = std::move(network);
  if (!limits.empty()) body["limits"] = std::move(limits);
  if (!env.empty()) body["env"] = std::move(env);
  if (idempotency_key && !api::is_valid_utf8(*idempotency_key))
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

// ---- ls -----------------------------------------------------------------------------

// ID STATE AGE EXPIRES MEM DISK, one sandbox a line.
void print_sandbox_table(const std::vector<api::SandboxInfo>& list) {
  const std::int64_t now = now_ms();
  printf("%-16s %-12s %-6s %-8s %-15s %s\n", "ID", "STATE", "AGE", "EXPIRES", "MEM", "DISK");
  for (const api::SandboxInfo& s : list) {
    std::string expires = "-";
    const bool alive = s.state != "cleaned" && s.state != "failed";
    if (s.expires_at_ms && alive)
      expires = *s.expires_at_ms > now ? "in " + short_duration(*s.expires_at_ms - now) : "now";
    std::string mem = "-", disk = "-";
    if (s.usage) {
      mem = short_size(s.usage->memory_bytes) + "/" + short_size(s.spec.limits.memory_bytes);
      disk = short_size(s.usage->disk_bytes) + "/" + short_size(s.spec.limits.disk_bytes);
    }
    printf("%-16s %-12s %-6s %-8s %-15s %s\n", s.id.c_str(), s.state.c_str(),
           short_duration(now - s.created_at_ms).c_str(), expires.c_str(), mem.c_str(),
           disk.c_str());
  }
}

int ls_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kLsUsage);
  bool all = false, as_json = false;
  flags.flag({"--all", "-a"}, all);
  flags.flag({"--json"}, as_json);
  flags.unknown_word("argument");
  if (auto status = flags.parse(args)) return *status;
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  auto reply = (*provider)->call("GET", all ? "/v1/sandboxes?all=true" : "/v1/sandboxes");
  return print_reply(reply, as_json, api::parse_sandbox_list, print_sandbox_table);
}

// ---- inspect ------------------------------------------------------------------------

int inspect_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kInspectUsage);
  std::string id;
  flags.positional([&](std::string_view a) -> Refusal {
    if (!id.empty()) return "one sandbox ID at a time";
    id = std::string(a);
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  if (id.empty()) return flags.usage_error("which sandbox? give its ID");
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  return print_json((*provider)->call("GET", sdk::sandbox_path(id)));
}

// ---- exec ---------------------------------------------------------------------------

constexpr int kExecFailure = 125;
constexpr std::size_t kMaxExecStdin = std::size_t{8} << 20;

int exec_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kExecUsage, kExecFailure);
  std::string id;
  api::ExecRequest request;
  bool forward_stdin = false;
  std::optional<std::string> shell;
  flags.stop_at_double_dash();
  flags.flag({"-i", "--stdin", "--interactive"}, forward_stdin);
  flags.option("--env", [&](const std::string& v) -> Refusal {
    auto r = parse_env_arg(v);
    if (!r) return refused("--env", r.error());
    request.env.push_back(*r);
    return std::nullopt;
  });
  flags.option("--cwd", request.cwd);
  flags.option("--timeout", [&](const std::string& v) -> Refusal {
    auto r = parse_duration(v);
    if (!r) return refused("--timeout", r.error());
    request.timeout_ms = r->count();
    return std::nullopt;
  });
  flags.option("--sh", shell);
  flags.positional([&](std::string_view a) -> Refusal {
    if (!id.empty())
      return "unexpected argument \"" + std::string(a) +
             "\": put the command after -- (or use --sh)";
    id = std::string(a);
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  if (id.empty()) return flags.usage_error("which sandbox? give its ID");
  const auto& command = flags.after_double_dash();
  if (command) {
    for (std::string_view a : *command) request.argv.emplace_back(a);
  }
  if (shell && command)
    return flags.usage_error("give either --sh STRING or a command after --, not both");
  if (shell) {
    request.cmd = *shell;
  } else if (request.argv.empty()) {
    return flags.usage_error("no command given: put it after -- (or use --sh)");
  }

  if (forward_stdin) {
    std::string data;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        print_error("reading stdin: " + std::string(strerror(errno)), "");
        return kExecFailure;
      }
      if (n == 0) break;
      data.append(buf, static_cast<std::size_t>(n));
      if (data.size() > kMaxExecStdin) {
        print_error("stdin is larger than " + std::to_string(kMaxExecStdin >> 20) +
                        " MiB, the most -i sends with a command",
                    "copy it in first: corral cp - " + id +
                        ":/workspace/input, then --sh 'CMD < /workspace/input'");
        return kExecFailure;
      }
    }
    request.stdin_data = std::move(data);
  }
  // Text only, as in create (stdin may be bytes: it travels as stdin_b64).
  for (std::size_t i = 0; i < request.argv.size(); ++i) {
    if (!api::is_valid_utf8(request.argv[i]))
      return flags.usage_error(not_text_message("word " + std::to_string(i + 1) +
                                                " of the command"));
  }
  if (request.cmd && !api::is_valid_utf8(*request.cmd))
    return flags.usage_error(not_text_message("--sh"));
  if (request.cwd && !api::is_valid_utf8(*request.cwd))
    return flags.usage_error(not_text_message("--cwd"));
  for (const auto& [k, v] : request.env) {
    if (!api::is_valid_utf8(k) || !api::is_valid_utf8(v))
      return flags.usage_error(not_text_message("--env " + json_text(ojson(k))));
  }
  // The request as the daemon will read it: refused here with the same words.
  if (auto parsed = api::parse_exec(api::to_json(request)); !parsed)
    return flags.usage_error(api::to_api_error(parsed.error()).message);

  auto provider = connect(flags.endpoint());
  if (!provider) {
    print_error(provider.error());
    return kExecFailure;
  }
  // Each chunk goes out as it arrives. A reader that closed our stdout ends
  // us with SIGPIPE, as it would end any command; the daemon then kills
  // the command with its request.
  sdk::OutputSink sink = [](api::ExecEvent::Kind kind, std::string_view data) {
    (void)write_all(kind == api::ExecEvent::kStdout ? STDOUT_FILENO : STDERR_FILENO, data);
  };
  auto result = (*provider)->exec_stream(id, request, sink);
  if (!result) {
    print_error(result.error());
    return kExecFailure;
  }
  return sdk::exit_status_of(*result);
}

// ---- cp -----------------------------------------------------------------------------

int upload(sdk::RemoteProvider& provider, const std::string& src, RemotePath dst,
           const ClientFlags& flags) {
  if (dst.path.empty()) return flags.usage_error("the path inside " + dst.id + " is empty");
  UniqueFd file;
  int fd = STDIN_FILENO;
  std::optional<std::uint64_t> length;
  std::uint32_t mode = 0644;
  if (src != "-") {
    file = UniqueFd(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file) return command_failure(errno_error("open " + src).value());
    struct stat st;
    if (fstat(file.get(), &st) != 0) return command_failure(errno_error("stat " + src).value());
    if (!S_ISREG(st.st_mode))
      return command_failure(Error{ErrorCode::kInvalidArgument, src + " is not a regular file",
                                   "corral cp copies one file; for a directory, pipe a tar: "
                                   "tar c DIR | corral exec -i ID --sh 'tar x'",
                                   0});
    fd = file.get();
    length = static_cast<std::uint64_t>(st.st_size);
    mode = st.st_mode & 0777;
  }
  // Into a directory: keep the file's name.
  bool into_dir = dst.path.back() == '/';
  if (!into_dir) {
    auto stat = provider.call(
        "GET", sdk::sandbox_path(dst.id) + "/files/stat?path=" + http::percent_encode(dst.path));
    if (stat) {
      auto entry = api::parse_file_entry(*stat);
      into_dir = entry && entry->type == "directory";
    }
  }
  if (into_dir) {
    if (src == "-")
      return flags.usage_error("name the file to write from stdin: ID:" + dst.path + "NAME");
    if (dst.path.back() != '/') dst.path += '/';
    dst.path += base_name(src);
  }
  sdk::ByteSource source = [fd](char* buf, std::size_t cap) -> Result<std::size_t> {
    for (;;) {
      ssize_t n = ::read(fd, buf, cap);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_error("read");
      return static_cast<std::size_t>(n);
    }
  };
  auto put = provider.put_file_from(dst.id, dst.path, source, length, mode);
  if (!put) return command_failure(put.error());
  return 0;
}

int download(sdk::RemoteProvider& provider, const RemotePath& src, std::string dst,
             const ClientFlags& flags) {
  if (src.path.empty()) return flags.usage_error("the path inside " + src.id + " is empty");
  if (dst == "-") {
    auto got = provider.get_file_to_fd(src.id, src.path, STDOUT_FILENO);
    if (!got) return command_failure(got.error());
    return 0;
  }
  struct stat st;
  if (dst.back() == '/' || (::stat(dst.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
    if (dst.back() != '/') dst += '/';
    dst += base_name(src.path);
  }
  // Into a temporary file next to DST, renamed over it once complete.
  std::string tmp = dst + ".corral-XXXXXX";
  UniqueFd out(mkostemp(tmp.data(), O_CLOEXEC));
  if (!out) return command_failure(errno_error("create a temporary file next to " + dst).value());
  const mode_t mask = umask(0);
  umask(mask);
  auto got = provider.get_file_to_fd(src.id, src.path, out.get());
  Status done = ok();
  if (!got) {
    done = tl::unexpected(got.error());
  } else if (fchmod(out.get(), 0666 & ~mask) != 0 || fsync(out.get()) != 0) {
    done = errno_error("finish " + tmp);
  } else if (::rename(tmp.c_str(), dst.c_str()) != 0) {
    done = errno_error("rename " + tmp + " to " + dst);
  }
  if (!done) {
    ::unlink(tmp.c_str());
    return command_failure(done.error());
  }
  return 0;
}

int cp_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kCpUsage);
  std::vector<std::string> paths;
  flags.positional(
      [&](std::string_view a) -> Refusal {
        paths.emplace_back(a);
        return std::nullopt;
      },
      /*lone_dash_is_positional=*/true);
  if (auto status = flags.parse(args)) return *status;
  if (paths.size() != 2) return flags.usage_error("give a SRC and a DST");
  auto src_remote = remote_path(paths[0]);
  auto dst_remote = remote_path(paths[1]);
  if (src_remote && dst_remote)
    return flags.usage_error("both sides are in sandboxes: copy through a local file");
  if (!src_remote && !dst_remote)
    return flags.usage_error("one side must be ID:PATH (a path inside a sandbox)");
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  if (dst_remote) return upload(**provider, paths[0], *dst_remote, flags);
  return download(**provider, *src_remote, paths[1], flags);
}

// ---- rm -----------------------------------------------------------------------------

int rm_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kRmUsage);
  std::vector<std::string> ids;
  bool all = false;
  flags.flag({"--all"}, all);
  flags.positional([&](std::string_view a) -> Refusal {
    ids.emplace_back(a);
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  if (all && !ids.empty()) return flags.usage_error("give IDs or --all, not both");
  if (!all && ids.empty()) return flags.usage_error("which sandboxes? give their IDs (or --all)");
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  if (all) {
    auto list = (*provider)->list(false);
    if (!list) return command_failure(list.error());
    for (const auto& s : *list) {
      if (s.state != "cleaned") ids.push_back(s.id);
    }
  }
  int status = 0;
  for (const std::string& id : ids) {
    auto info = (*provider)->destroy_sandbox(id);
    if (!info) {
      print_error(info.error());
      status = 1;
      continue;
    }
    for (const std::string& r : info->residue)
      fprintf(stderr, "corral: warning: sandbox %s left behind after cleanup: %s\n", id.c_str(),
              r.c_str());
    if (info->residue_bytes > 0)
      fprintf(stderr, "corral: warning: sandbox %s: %llu bytes still allocated in its layer\n",
              id.c_str(), static_cast<unsigned long long>(info->residue_bytes));
    if (!info->residue.empty() || info->residue_bytes > 0) status = 1;
    printf("%s\n", id.c_str());
    fflush(stdout);
  }
  return status;
}

}  // namespace

int client_command(int argc, char** argv) {
  std::string_view verb = argv[1];
  std::vector<std::string_view> args(argv + 2, argv + argc);
  if (verb == "create") return create_command(args);
  if (verb == "ls") return ls_command(args);
  if (verb == "inspect") return inspect_command(args);
  if (verb == "exec") return exec_command(args);
  if (verb == "cp") return cp_command(args);
  if (verb == "rm") return rm_command(args);
  fprintf(stderr, "corral: unknown client command \"%.*s\"\n", static_cast<int>(verb.size()),
          verb.data());
  return 2;
}

}  // namespace corral::cli
