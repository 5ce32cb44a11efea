// corral task run|get|ls|cancel|replay|outputs: tasks of the daemon
// (docs/tasks.md, docs/cli.md "Tasks"; REQUIREMENTS.md D6, T2). A task is
// submitted under an id the client chooses, so running the same `corral
// task run` again after a crash or a timeout never runs the command twice:
// it finds the stored task and waits for it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/base64.h"
#include "base/fs.h"
#include "base/json_text.h"
#include "base/random.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "base/utf8.h"
#include "cli/daemon_client.h"
#include "http/http_message.h"
#include "spec/mount_arg.h"
#include "spec/units.h"

namespace corral::cli {

namespace {

constexpr const char* kTaskUsage =
    "usage: corral task run [options] -- CMD [ARG...]\n"
    "       corral task get ID [--wait DURATION] [--json]\n"
    "       corral task ls [--status S[,S...]] [--limit N] [--json]\n"
    "       corral task cancel ID [--json]\n"
    "       corral task replay ID [--id NEW] [--network none|as_original] [--from-snapshot]\n"
    "                             [--timeout DURATION] [--wait] [--json]\n"
    "       corral task outputs ID [N...] [--output-dir DIR]\n"
    "\n"
    "Tasks run a command once in a fresh sandbox: inputs pushed in, outputs\n"
    "collected, a snapshot kept when it fails (docs/tasks.md). Running the same\n"
    "`corral task run --id ID` again finds the stored task and never runs the\n"
    "command a second time; the same id with another command is refused.\n"
    "`corral task SUBCOMMAND --help` describes each.\n";

constexpr const char* kReplayUsage =
    "usage: corral task replay ID [--id NEW] [--network none|as_original] [--from-snapshot]\n"
    "                             [--timeout DURATION] [--wait] [--json]\n"
    "\n"
    "Runs finished task ID again in a fresh sandbox (T2, docs/tasks.md \"Replay\"):\n"
    "the same resolved sandbox spec, image, command and environment, its inputs\n"
    "read from the copies the task kept (their sha256 checked). The replay is a\n"
    "new task whose replay_of is ID; prints it, or waits for its end with --wait.\n"
    "\n"
    "options:\n"
    "  --id NEW             the replay's id; default ID-replay-N (the next free N).\n"
    "                       The same --id again returns that replay, never a second run\n"
    "  --network MODE       none (the default: no network at all) or as_original\n"
    "  --from-snapshot      start from the failure snapshot's files (as archived,\n"
    "                       secrets redacted), then push the inputs\n"
    "  --timeout DURATION   the command's timeout; default the original's\n"
    "  --wait               wait for the replay's end; the exit status is then\n"
    "                       the one of `corral task run`\n"
    "  --json               print the task as JSON\n";

constexpr const char* kRunUsage =
    "usage: corral task run [options] -- CMD [ARG...]\n"
    "\n"
    "Submits a task and waits for it, showing its progress; then prints how it\n"
    "ended and saves its outputs. Running it again with the same --id finds the\n"
    "stored task (never runs the command twice).\n"
    "\n"
    "options:\n"
    "  --id ID              the task's id (1-128 of A-Z a-z 0-9 . _ : -); default a\n"
    "                       new random one, printed first\n"
    "  --input LOCAL:PATH   push the local file LOCAL to PATH in the sandbox (repeatable)\n"
    "  --output PATH        collect PATH; the task fails if it is missing (repeatable)\n"
    "  --optional-output PATH  collect PATH if it is there (repeatable)\n"
    "  --output-dir DIR     where outputs are saved, by their file name (default .)\n"
    "  --sh                 run CMD as one shell command line (sh -c)\n"
    "  --env K=V            environment of the command (repeatable)\n"
    "  --cwd DIR            working directory of the command\n"
    "  --timeout DURATION   the command's timeout (default: the daemon's)\n"
    "  --image NAME         the sandbox's image\n"
    "  --memory SIZE        the sandbox's memory limit\n"
    "  --snapshot MODE      on_failure (default), always or never\n"
    "  --keep-sandbox       keep the sandbox after the task ends\n"
    "  --no-wait            submit and print the id without waiting\n"
    "  --json               print the task's JSON at the end\n"
    "\n"
    "exit status: 0 succeeded; the command's status when it exited non-zero;\n"
    "124 timed out; 1 any other failure; 2 usage error.\n";

constexpr const char* kGetUsage =
    "usage: corral task get ID [--wait DURATION] [--json]\n"
    "\n"
    "Shows a task: its status, why it failed, its outputs and snapshot.\n"
    "\n"
    "options:\n"
    "  --wait DURATION      wait up to DURATION for the task to finish\n"
    "  --json               the API's JSON\n";

constexpr const char* kLsUsage =
    "usage: corral task ls [--status S[,S...]] [--limit N] [--json]\n"
    "\n"
    "Lists tasks, newest first: ID STATUS REASON SANDBOX.\n"
    "\n"
    "options:\n"
    "  --status S           only these statuses (comma-separated): queued, running,\n"
    "                       succeeded, failed, timed_out, cancelled\n"
    "  --limit N            at most N tasks\n"
    "  --json               the API's JSON ({\"tasks\": [...]})\n";

constexpr const char* kCancelUsage =
    "usage: corral task cancel ID [--json]\n"
    "\n"
    "Ends a queued or running task: its command is killed, its status is cancelled.\n"
    "\n"
    "options:\n"
    "  --json               the API's JSON\n";

constexpr const char* kOutputsUsage =
    "usage: corral task outputs ID [N...] [--output-dir DIR]\n"
    "\n"
    "Saves a task's outputs (all, or those numbered N) as DIR/<file name>,\n"
    "checked against their stored sha256; an existing file is never replaced.\n"
    "\n"
    "options:\n"
    "  --output-dir DIR     where to save them (default .)\n";

using sdk::task_path;

// The one task ID of get and cancel.
void take_task_id(ClientFlags& flags, std::string& id) {
  flags.positional([&id](std::string_view a) -> Refusal {
    if (!id.empty()) return "one task ID at a time";
    id = a;
    return std::nullopt;
  });
}

std::optional<ojson> parse_reply(const std::string& text) {
  auto j = ojson::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

std::string str_or(const ojson& j, const char* key, std::string fallback = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

std::optional<std::int64_t> int_of(const ojson& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

bool finished(const ojson& task) {
  const std::string s = str_or(task, "status");
  return s == "succeeded" || s == "failed" || s == "timed_out" || s == "cancelled";
}

// "task ID: failed (output_missing) in 3.2s, exit 0" and its details.
void print_task(const ojson& task) {
  std::string line = "task " + str_or(task, "id") + ": " + str_or(task, "status");
  if (auto reason = str_or(task, "reason"); !reason.empty()) line += " (" + reason + ")";
  auto created = int_of(task, "created_at_ms"), done = int_of(task, "finished_at_ms");
  if (created && done) {
    char buf[48];
    snprintf(buf, sizeof buf, " in %.1fs", static_cast<double>(*done - *created) / 1000.0);
    line += buf;
  }
  if (auto code = int_of(task, "exit_code")) line += ", exit " + std::to_string(*code);
  if (auto sig = int_of(task, "signal")) line += ", signal " + std::to_string(*sig);
  printf("%s\n", line.c_str());
  if (auto detail = str_or(task, "detail"); !detail.empty()) printf("  %s\n", detail.c_str());
  if (auto snap = str_or(task, "snapshot_id"); !snap.empty())
    printf("  snapshot %s (corral snapshot get %s)\n", snap.c_str(), snap.c_str());
  if (auto err = str_or(task, "snapshot_error"); !err.empty())
    printf("  no snapshot: %s\n", err.c_str());
  if (auto of = str_or(task, "replay_of"); !of.empty()) printf("  replay of %s\n", of.c_str());
  auto outputs = task.find("outputs");
  if (outputs != task.end() && outputs->is_array()) {
    std::size_t n = 0;
    for (const auto& o : *outputs) {
      const bool present = o.value("present", false);
      std::string size = present ? std::to_string(o.value("size", 0ull)) + " bytes" : "missing";
      printf("  output %zu %s  %s\n", n++, str_or(o, "path").c_str(), size.c_str());
    }
  }
}

int status_of(const ojson& task) {
  const std::string s = str_or(task, "status");
  if (s == "succeeded") return 0;
  if (s == "timed_out") return 124;
  auto code = int_of(task, "exit_code");
  if (s == "failed" && str_or(task, "reason") == "exit_code" && code && *code > 0 && *code < 256)
    return static_cast<int>(*code);
  return 1;
}

// Waits (long-polling 30 s at a time) until the task has finished,
// printing each new status and stage on stderr. `wait_ms` < 0: no bound.
Result<ojson> wait_for(sdk::RemoteProvider& daemon, const std::string& id, std::int64_t wait_ms,
                       bool progress) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  std::string shown;
  for (;;) {
    std::int64_t slice = 30000;
    if (wait_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      until - std::chrono::steady_clock::now())
                      .count();
      slice = std::max<std::int64_t>(0, std::min<std::int64_t>(slice, left));
    }
    // No wait at all is no parameter: the daemon takes "0" but refuses "0ms".
    std::string target = task_path(id);
    if (slice > 0) target += "?wait=" + std::to_string(slice) + "ms";
    auto reply = daemon.call("GET", target);
    if (!reply) return tl::unexpected(std::move(reply).error());
    auto task = parse_reply(*reply);
    if (!task) return make_error(ErrorCode::kInternal, "the daemon's answer is not a task");
    const std::string now = str_or(*task, "status") + " (" + str_or(*task, "stage") + ")";
    if (progress && now != shown && !finished(*task)) {
      fprintf(stderr, "corral: task %s: %s\n", id.c_str(), now.c_str());
      shown = now;
    }
    if (finished(*task)) return *task;
    if (wait_ms >= 0 && std::chrono::steady_clock::now() >= until) return *task;
  }
}

// Saves output `n` of task `id` as DIR/<its file name>, checking its
// sha256 against the daemon's; never replaces an existing file.
Status save_output(sdk::RemoteProvider& daemon, const std::string& id, std::size_t n,
                   const std::string& path, const std::string& dir) {
  std::string name = path.substr(path.rfind('/') + 1);
  if (name.empty() || name == "." || name == "..") name = "output-" + std::to_string(n);
  const std::string dest = dir + "/" + name;
  UniqueFd fd(::open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid())
    return errno_error("open(" + dest + ")", errno,
                       errno == EEXIST ? "remove it or pick another --output-dir" : "");
  auto total = daemon.download_task_output(id, n, [&](std::string_view data) -> Status {
    return write_all(fd.get(), data, dest);
  });
  if (!total) {
    ::unlink(dest.c_str());
    return tl::unexpected(std::move(total).error());
  }
  fprintf(stderr, "corral: saved %s (%llu bytes)\n", dest.c_str(),
          static_cast<unsigned long long>(*total));
  return ok();
}

Status save_outputs(sdk::RemoteProvider& daemon, const ojson& task, const std::string& dir,
                    const std::vector<std::size_t>& only) {
  auto outputs = task.find("outputs");
  if (outputs == task.end() || !outputs->is_array()) return ok();
  for (std::size_t n = 0; n < outputs->size(); ++n) {
    const ojson& o = (*outputs)[n];
    if (!only.empty() && std::find(only.begin(), only.end(), n) == only.end()) continue;
    if (!o.value("present", false)) continue;
    CORRAL_TRY(save_output(daemon, str_or(task, "id"), n, str_or(o, "path"), dir));
  }
  return ok();
}

Result<std::string> read_local_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errno_error("open(" + path + ")");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int run_task(const std::vector<std::string_view>& args) {
  ClientFlags flags(kRunUsage);
  flags.stop_at_double_dash();
  ojson body = ojson::object();
  ojson inputs = ojson::array(), outputs = ojson::array(), env = ojson::object();
  ojson sandbox = ojson::object(), limits = ojson::object();
  std::string id, output_dir = ".";
  bool as_json = false, no_wait = false, shell = false;
  std::set<std::string> output_names;
  flags.option("--id", [&](const std::string& v) -> Refusal {
    id = v;
    return std::nullopt;
  });
  flags.option("--input", [&](const std::string& v) -> Refusal {
    auto colon = v.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == v.size())
      return "--input \"" + v + "\" is not LOCAL:PATH";
    auto bytes = read_local_file(v.substr(0, colon));
    if (!bytes) return "--input: " + bytes.error().message;
    ojson in = ojson::object();
    in["path"] = v.substr(colon + 1);
    in["content_b64"] = api::base64_encode(*bytes);
    in["sha256"] = sha256_hex(*bytes);
    inputs.push_back(std::move(in));
    return std::nullopt;
  });
  auto output = [&](const char* flag, bool required) {
    flags.option(flag, [&, required](const std::string& v) -> Refusal {
      const std::string name = v.substr(v.rfind('/') + 1);
      if (!output_names.insert(name).second)
        return "two outputs are named \"" + name + "\": they would be saved to one file";
      ojson o = ojson::object();
      o["path"] = v;
      o["required"] = required;
      outputs.push_back(std::move(o));
      return std::nullopt;
    });
  };
  output("--output", true);
  output("--optional-output", false);
  flags.option("--output-dir", [&](const std::string& v) -> Refusal {
    output_dir = v;
    return std::nullopt;
  });
  flags.flag({"--sh"}, shell);
  flags.option("--env", [&](const std::string& v) -> Refusal {
    auto r = parse_env_arg(v);
    if (!r) return refused("--env", r.error());
    env[r->first] = r->second;
    return std::nullopt;
  });
  flags.sent("--cwd", body, "cwd");
  flags.sent("--timeout", body, "timeout", parse_duration);
  flags.sent("--image", sandbox, "image");
  flags.sent("--memory", limits, "memory", parse_size);
  flags.option("--snapshot", [&](const std::string& v) -> Refusal {
    if (v != "on_failure" && v != "always" && v != "never")
      return "--snapshot is on_failure, always or never, not \"" + v + "\"";
    body["snapshot"] = v;
    return std::nullopt;
  });
  flags.flag({"--keep-sandbox"}, [&] { body["keep_sandbox"] = true; });
  flags.flag({"--no-wait"}, no_wait);
  flags.flag({"--json"}, as_json);
  if (auto status = flags.parse(args)) return *status;
  const auto& command = flags.after_double_dash();
  if (!command || command->empty()) return flags.usage_error("give the command after --");
  if (shell && command->size() != 1)
    return flags.usage_error("--sh takes one command line after --: quote it");
  if (id.empty()) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(random_u64()));
    id = std::string("task-") + hex;
  }
  body["id"] = id;
  if (shell) {
    body["sh"] = std::string((*command)[0]);
  } else {
    ojson argv = ojson::array();
    for (auto a : *command) argv.push_back(std::string(a));
    body["command"] = std::move(argv);
  }
  if (!limits.empty()) sandbox["limits"] = std::move(limits);
  if (!sandbox.empty()) body["sandbox"] = std::move(sandbox);
  if (!inputs.empty()) body["inputs"] = std::move(inputs);
  if (!outputs.empty()) body["outputs"] = std::move(outputs);
  if (!env.empty()) body["env"] = std::move(env);
  if (auto bad = non_utf8_field(body, ""))
    return flags.usage_error(not_text_message("the request's " + json_text(ojson(*bad))));
  auto daemon = connect(flags.endpoint());
  if (!daemon) return command_failure(daemon.error());
  fprintf(stderr, "corral: task %s\n", id.c_str());
  auto reply = (*daemon)->call("POST", "/v1/tasks", json_text(body));
  if (!reply) return command_failure(reply.error());
  if (no_wait) {
    printf("%s\n", id.c_str());
    return 0;
  }
  auto task = wait_for(**daemon, id, -1, true);
  if (!task) return command_failure(task.error());
  if (as_json) {
    printf("%s\n", json_text(*task, 2).c_str());
  } else {
    print_task(*task);
  }
  if (auto saved = save_outputs(**daemon, *task, output_dir, {}); !saved)
    return command_failure(saved.error());
  return status_of(*task);
}

int get_task(const std::vector<std::string_view>& args) {
  ClientFlags flags(kGetUsage);
  std::string id;
  std::int64_t wait_ms = 0;
  bool as_json = false;
  flags.option("--wait", [&](const std::string& v) -> Refusal {
    auto d = parse_duration(v);
    if (!d) return refused("--wait", d.error());
    wait_ms = d->count();
    return std::nullopt;
  });
  flags.flag({"--json"}, as_json);
  take_task_id(flags, id);
  if (auto status = flags.parse(args)) return *status;
  if (id.empty()) return flags.usage_error("which task? give its ID");
  auto daemon = connect(flags.endpoint());
  if (!daemon) return command_failure(daemon.error());
  auto task = wait_for(**daemon, id, wait_ms, false);
  if (!task) return command_failure(task.error());
  if (as_json) {
    printf("%s\n", json_text(*task, 2).c_str());
  } else {
    print_task(*task);
  }
  return 0;
}

int list_tasks(const std::vector<std::string_view>& args) {
  ClientFlags flags(kLsUsage);
  std::string query;
  std::optional<std::size_t> limit;
  bool as_json = false;
  flags.option("--status", [&](const std::string& v) -> Refusal {
    query += "&status=" + http::percent_encode(v);
    return std::nullopt;
  });
  flags.option("--limit", [&](const std::string& v) -> Refusal {
    auto n = parse_count(v);
    if (!n || *n == 0) return "--limit is a count of at least 1, not \"" + v + "\"";
    limit = *n;
    return std::nullopt;
  });
  flags.flag({"--json"}, as_json);
  if (auto status = flags.parse(args)) return *status;
  auto daemon = connect(flags.endpoint());
  if (!daemon) return command_failure(daemon.error());
  ojson all = ojson::array();
  std::string cursor;
  for (;;) {
    std::string target = "/v1/tasks?limit=" + std::to_string(limit ? std::min<std::size_t>(*limit, 1000) : 100) + query;
    if (!cursor.empty()) target += "&cursor=" + http::percent_encode(cursor);
    auto reply = (*daemon)->call("GET", target);
    if (!reply) return command_failure(reply.error());
    auto page = parse_reply(*reply);
    if (!page) return command_failure(Error{ErrorCode::kInternal, "the daemon's answer is not a task list", "", 0});
    for (auto& t : (*page)["tasks"]) all.push_back(t);
    cursor = str_or(*page, "next_cursor");
    if (cursor.empty() || (limit && all.size() >= *limit)) break;
  }
  if (limit && all.size() > *limit) all.erase(all.begin() + static_cast<std::ptrdiff_t>(*limit), all.end());
  if (as_json) {
    ojson out = ojson::object();
    out["tasks"] = std::move(all);
    printf("%s\n", json_text(out, 2).c_str());
    return 0;
  }
  printf("%-32s %-10s %-18s %s\n", "ID", "STATUS", "REASON", "SANDBOX");
  for (const auto& t : all)
    printf("%-32s %-10s %-18s %s\n", str_or(t, "id").c_str(), str_or(t, "status").c_str(),
           str_or(t, "reason", "-").c_str(), str_or(t, "sandbox_id", "-").c_str());
  return 0;
}

// cancel ID: a POST on the task; prints the task it answers.
int cancel_task(const std::vector<std::string_view>& args) {
  ClientFlags flags(kCancelUsage);
  std::string id;
  bool as_json = false;
  flags.flag({"--json"}, as_json);
  take_task_id(flags, id);
  if (auto status = flags.parse(args)) return *status;
  if (id.empty()) return flags.usage_error("which task? give its ID");
  auto daemon = connect(flags.endpoint());
  if (!daemon) return command_failure(daemon.error());
  auto reply = (*daemon)->call("POST", task_path(id) + "/cancel");
  if (!reply) return command_failure(reply.error());
  auto task = parse_reply(*reply);
  if (as_json || !task) return print_json(reply);
  print_task(*task);
  return 0;
}

// replay ID: a POST on the task; the new task is printed, or waited for.
int replay_task(const std::vector<std::string_view>& args) {
  ClientFlags flags(kReplayUsage);
  std::string id;
  ojson body = ojson::object();
  bool as_json = false, wait = false;
  flags.option("--id", [&](const std::string& v) -> Refusal {
    body["id"] = v;
    return std::nullopt;
  });
  flags.option("--network", [&](const std::string& v) -> Refusal {
    if (v != "none" && v != "as_original")
      return "--network is none or as_original, not \"" + v + "\"";
    body["network"] = v;
    return std::nullopt;
  });
  flags.flag({"--from-snapshot"}, [&] { body["from_snapshot"] = true; });
  flags.option("--timeout", [&](const std::string& v) -> Refusal {
    if (auto d = parse_duration(v); !d) return refused("--timeout", d.error());
    body["timeout"] = v;
    return std::nullopt;
  });
  flags.flag({"--wait"}, wait);
  flags.flag({"--json"}, as_json);
  flags.positional([&](std::string_view a) -> Refusal {
    if (!id.empty()) return "one task ID at a time";
    id = a;
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  if (id.empty()) return flags.usage_error("which task? give its ID");
  if (auto bad = non_utf8_field(body, ""))
    return flags.usage_error(not_text_message("the request's " + json_text(ojson(*bad))));
  auto daemon = connect(flags.endpoint());
  if (!daemon) return command_failure(daemon.error());
  auto reply = (*daemon)->call("POST", task_path(id) + "/replay", json_text(body));
  if (!reply) return command_failure(reply.error());
  auto task = parse_reply(*reply);
  if (!task) return command_failure(Error{ErrorCode::kInternal, "the daemon's answer is not a task", "", 0});
  const std::string replay_id = str_or(*task, "id");
  fprintf(stderr, "corral: task %s replays %s\n", replay_id.c_str(), id.c_str());
  if (wait) {
    auto done = wait_for(**daemon, replay_id, -1, true);
    if (!done) return command_failure(done.error());
    task = std::move(*done);
  }
  if (as_json) printf("%s\n", json_text(*task, 2).c_str());
  else print_task(*task);
  return wait ? status_of(*task) : 0;
}

int task_outputs(const std::vector<std::string_view>& args) {
  ClientFlags flags(kOutputsUsage);
  std::string id, dir = ".";
  std::vector<std::size_t> only;
  flags.option("--output-dir", [&](const std::string& v) -> Refusal {
    dir = v;
    return std::nullopt;
  });
  flags.positional([&](std::string_view a) -> Refusal {
    if (id.empty()) {
      id = a;
      return std::nullopt;
    }
    auto n = parse_count(a);
    if (!n) return "\"" + std::string(a) + "\" is not an output number";
    only.push_back(*n);
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  if (id.empty()) return flags.usage_error("which task? give its ID");
  auto daemon = connect(flags.endpoint());
  if (!daemon) return command_failure(daemon.error());
  auto reply = (*daemon)->call("GET", task_path(id));
  if (!reply) return command_failure(reply.error());
  auto task = parse_reply(*reply);
  if (!task) return command_failure(Error{ErrorCode::kInternal, "the daemon's answer is not a task", "", 0});
  if (auto saved = save_outputs(**daemon, *task, dir, only); !saved)
    return command_failure(saved.error());
  return 0;
}

}  // namespace

int task_command(const std::vector<std::string_view>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    fputs(kTaskUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string_view sub = args[0];
  const std::vector<std::string_view> rest(args.begin() + 1, args.end());
  if (sub == "run") return run_task(rest);
  if (sub == "get") return get_task(rest);
  if (sub == "ls") return list_tasks(rest);
  if (sub == "cancel") return cancel_task(rest);
  if (sub == "replay") return replay_task(rest);
  if (sub == "outputs") return task_outputs(rest);
  return usage_error("unknown task command \"" + std::string(sub) +
                         "\": run, get, ls, cancel, replay or outputs",
                     kTaskUsage);
}

}  // namespace corral::cli
