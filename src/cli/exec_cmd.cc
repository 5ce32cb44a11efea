// corral exec: a command in a sandbox of the daemon, its output streamed
// back (docs/cli.md).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/base64.h"
#include "base/utf8.h"
#include "base/json_text.h"
#include "cli/daemon_client.h"
#include "spec/mount_arg.h"
#include "spec/units.h"

namespace corral::cli {

namespace {

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

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t w = ::write(fd, data.data(), data.size());
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    data.remove_prefix(static_cast<std::size_t>(w));
  }
  return true;
}

constexpr int kExecFailure = 125;
constexpr std::size_t kMaxExecStdin = std::size_t{8} << 20;

}  // namespace

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
    if (!is_valid_utf8(request.argv[i]))
      return flags.usage_error(
          not_text_message("word " + std::to_string(i + 1) + " of the command"));
  }
  if (request.cmd && !is_valid_utf8(*request.cmd))
    return flags.usage_error(not_text_message("--sh"));
  if (request.cwd && !is_valid_utf8(*request.cwd))
    return flags.usage_error(not_text_message("--cwd"));
  for (const auto& [k, v] : request.env) {
    if (!is_valid_utf8(k) || !is_valid_utf8(v))
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

}  // namespace corral::cli
