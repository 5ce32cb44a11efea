// corral snapshot ls|get|rm: the daemon's failure snapshots (D4;
// docs/snapshots.md, docs/cli.md).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "base/fs.h"
#include "base/json_text.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "cli/commands.h"
#include "cli/daemon_client.h"
#include "http/http_message.h"

namespace corral::cli {

namespace {

constexpr const char* kSnapshotUsage =
    "usage: corral snapshot ls [--task ID] [--limit N] [--json]\n"
    "       corral snapshot get ID [-o FILE] [--json]\n"
    "       corral snapshot rm ID...\n"
    "\n"
    "Failure snapshots: a failed task's writable layer, archived as tar + zstd\n"
    "with its secrets filtered out (docs/snapshots.md).\n"
    "  ls    lists them, newest first (all pages)\n"
    "  get   downloads one to FILE (default ID.tar.zst); the sha256 is checked.\n"
    "        With --json, prints its metadata instead\n"
    "  rm    deletes them\n"
    "\n"
    "options:\n"
    "  --task ID            only the snapshots of this task\n"
    "  --limit N            at most N snapshots (default: all)\n"
    "  -o, --output FILE    where get writes the archive (refused if it exists)\n"
    "  --json               the daemon's answer as JSON\n";

std::string time_text(std::int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int ls(sdk::RemoteProvider& daemon, const std::string& task, std::size_t limit, bool as_json) {
  ojson all = ojson::array();
  std::string cursor;
  do {
    std::string target = "/v1/snapshots?limit=" + std::to_string(std::min<std::size_t>(limit, 1000));
    if (!task.empty()) target += "&task=" + http::percent_encode(task);
    if (!cursor.empty()) target += "&cursor=" + http::percent_encode(cursor);
    auto reply = daemon.call("GET", target);
    if (!reply) return command_failure(reply.error());
    auto page = ojson::parse(*reply, nullptr, false);
    if (page.is_discarded() || !page.contains("snapshots"))
      return command_failure(Error{ErrorCode::kInternal, "the daemon's answer is not a page", {}, 0});
    for (auto& s : page["snapshots"])
      if (all.size() < limit) all.push_back(s);
    cursor = page.value("next_cursor", ojson()).is_string() ? page["next_cursor"].get<std::string>()
                                                            : std::string();
  } while (!cursor.empty() && all.size() < limit);
  if (as_json) {
    printf("%s\n", json_text(all, 2).c_str());
    return 0;
  }
  printf("%-37s %-24s %-14s %12s %-20s %s\n", "ID", "TASK", "REASON", "SIZE", "CREATED",
         "EXPIRES");
  for (const auto& s : all) {
    std::string t = s.value("task", ojson()).is_string() ? s["task"].get<std::string>() : "-";
    printf("%-37s %-24s %-14s %12llu %-20s %s%s\n", s.value("id", "").c_str(), t.c_str(),
           s.value("reason", "").c_str(),
           static_cast<unsigned long long>(s.value("size", std::uint64_t{0})),
           time_text(s.value("created_at_ms", std::int64_t{0})).c_str(),
           time_text(s.value("expires_at_ms", std::int64_t{0})).c_str(),
           s.value("partial", false) ? "  (partial)" : "");
  }
  return 0;
}

int get(sdk::RemoteProvider& daemon, const std::string& id, std::string output) {
  if (output.empty()) output = id + ".tar.zst";
  int raw = open(output.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (raw < 0) return command_failure(errno_error("open(" + output + ")", errno,
                                                  "give another -o FILE; an existing file is never overwritten").value());
  UniqueFd out(raw);
  Sha256 hash;
  http::Headers headers;
  auto got = daemon.download("/v1/snapshots/" + http::percent_encode(id) + "/archive",
                             [&](std::string_view bytes) -> Status {
                               hash.update(bytes);
                               return write_all(out.get(), bytes, output);
                             },
                             &headers);
  std::string digest = Sha256::hex(hash.final());
  auto expected = http::find_header(headers, "x-corral-sha256");
  if (got && expected && *expected != digest)
    got = make_error(ErrorCode::kSystem, "the download's sha256 " + digest +
                                             " differs from the daemon's " + std::string(*expected));
  if (!got) {
    unlink(output.c_str());
    return command_failure(got.error());
  }
  printf("%s  %s (%llu bytes)\n", digest.c_str(), output.c_str(),
         static_cast<unsigned long long>(*got));
  return 0;
}

}  // namespace

int snapshot_command(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  std::string_view sub = args.empty() ? std::string_view() : args.front();
  if (!args.empty()) args.erase(args.begin());
  if (sub != "ls" && sub != "get" && sub != "rm") {
    bool help = sub == "--help" || sub == "-h" || sub == "help";
    fputs(kSnapshotUsage, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  ClientFlags flags(kSnapshotUsage);
  std::vector<std::string> ids;
  std::optional<std::string> task, output, limit_text;
  bool as_json = false;
  flags.option("--task", task);
  flags.option("--limit", limit_text);
  flags.option({"-o", "--output"}, [&](std::string_view v) -> Refusal {
    output = std::string(v);
    return std::nullopt;
  });
  flags.flag({"--json"}, as_json);
  flags.positional([&](std::string_view a) -> Refusal {
    ids.emplace_back(a);
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  std::size_t limit = static_cast<std::size_t>(-1);
  if (limit_text) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(limit_text->c_str(), &end, 10);
    if (limit_text->empty() || *end != '\0' || v == 0)
      return flags.usage_error("--limit takes a positive number");
    limit = static_cast<std::size_t>(v);
  }
  if (sub == "ls" && !ids.empty()) return flags.usage_error("ls takes no IDs (use --task)");
  if (sub == "get" && ids.size() != 1) return flags.usage_error("get takes one snapshot ID");
  if (sub == "rm" && ids.empty()) return flags.usage_error("which snapshots? give their IDs");
  auto daemon = connect(flags.endpoint());
  if (!daemon) return command_failure(daemon.error());
  if (sub == "ls") return ls(**daemon, task.value_or(""), limit, as_json);
  if (sub == "get") {
    if (as_json) return print_json((*daemon)->call("GET", "/v1/snapshots/" + http::percent_encode(ids[0])));
    return get(**daemon, ids[0], output.value_or(""));
  }
  int status = 0;
  for (const auto& id : ids) {
    auto reply = (*daemon)->call("DELETE", "/v1/snapshots/" + http::percent_encode(id));
    if (!reply) {
      print_error(reply.error());
      status = 1;
      continue;
    }
    printf("%s\n", id.c_str());
  }
  return status;
}

}  // namespace corral::cli
