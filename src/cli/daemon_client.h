// What the client verbs (corral create|ls|inspect|exec|cp|rm, one file
// each: create_cmd.cc ...) share: reaching the daemon over its HTTP API
// (sdk::RemoteProvider), printing its answers, and refusing a value that is
// not UTF-8 before it is sent. User docs: docs/cli.md "Client commands".
// Exit codes: 0 success, 1 failure (the API's message and hint on stderr),
// 2 usage error (with the verb's usage text); `exec` exits with the
// command's status and uses 125 for its own failures, like `corral run`.
// Every verb reads its command line with ClientFlags (cli/client_flags.h).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "cli/cli_output.h"
#include "cli/client_flags.h"
#include "sdk/remote_provider.h"

namespace corral::cli {

using ojson = nlohmann::ordered_json;

// The verbs; `args` are the arguments after the verb.
int create_command(const std::vector<std::string_view>& args);
int ls_command(const std::vector<std::string_view>& args);
int inspect_command(const std::vector<std::string_view>& args);
int exec_command(const std::vector<std::string_view>& args);
int cp_command(const std::vector<std::string_view>& args);
int rm_command(const std::vector<std::string_view>& args);
int task_command(const std::vector<std::string_view>& args);  // task_cmd.cc
int volume_command(const std::vector<std::string_view>& args);  // create|ls|rm
int diagnose_command(const std::vector<std::string_view>& args);  // diagnose_cmd.cc
int mcp_command(const std::vector<std::string_view>& args);       // mcp_cmd.cc

// The daemon at `ep` (else $CORRAL_URL and $CORRAL_API_KEY).
Result<std::unique_ptr<sdk::RemoteProvider>> connect(const Endpoint& ep);

// The first key or string of `j` that is not UTF-8, named by its place in
// the request ("env.HOME", "network.allow[1]"); nothing if all are text.
// The API carries JSON text: such a value would reach the daemon changed
// (U+FFFD), so the command refuses it by name instead.
std::optional<std::string> non_utf8_field(const ojson& j, const std::string& at);

// "<what> is not UTF-8 text: ..." (the refusal of such a value).
std::string not_text_message(std::string_view what);

// The daemon's answer, indented. Exit status 0, or 1 without an answer.
int print_json(const Result<std::string>& reply);

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

}  // namespace corral::cli
