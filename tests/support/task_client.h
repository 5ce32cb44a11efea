// Helpers of the task tests (daemon_tasks_test.cc, daemon_tasks_restart_test.cc):
// a small task body, waiting for a task's end, and a side-effect counter
// (a line per run appended to a file on a host directory the task mounts)
// that shows from outside how often a command really ran.
#pragma once

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "http/http_message.h"
#include "support/daemon_harness.h"

namespace corral::testing {

// A task running `sh` in a small sandbox (64 MiB, 16 MiB of disk).
inline nlohmann::json task_body(const std::string& id, const std::string& sh) {
  return {{"id", id},
          {"sandbox", {{"limits", {{"memory", "64Mi"}, {"disk", "16Mi"}}}}},
          {"sh", sh}};
}

// The same with /side mounted writable from `host_dir`: each run appends a
// line to /side/<id> before `sh`.
inline nlohmann::json counted_task(const std::string& id, const std::string& host_dir,
                                   const std::string& sh) {
  nlohmann::json body = task_body(id, "echo run >> /side/" + id + "; " + sh);
  body["sandbox"]["mounts"] =
      nlohmann::json::array({{{"source", host_dir}, {"target", "/side"}, {"writable", true}}});
  return body;
}

inline int runs_of(const std::string& host_dir, const std::string& id) {
  std::ifstream in(host_dir + "/" + id);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line == "run";
  return n;
}

// GET ?wait=60s until the task is finished (at most ~5 minutes); the last
// answer either way.
inline nlohmann::json wait_task(TestDaemon& d, const std::string& id) {
  nlohmann::json t;
  for (int i = 0; i < 5; ++i) {
    auto r = d.request("GET", "/v1/tasks/" + id + "?wait=60s");
    t = r.json();
    const std::string status = t.value("status", "");
    if (r.status != 200 || (status != "queued" && status != "running")) return t;
  }
  return t;
}

// A string field of a task, "" when it is null or absent (reason, detail).
inline std::string text(const nlohmann::json& t, const char* key) {
  auto it = t.find(key);
  return it != t.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Until the command of counted task `id` runs and its daemon has recorded
// that (bounded, 30 s): the task is in execute, the command's first line
// has run, and its sandbox lists a running process (listed so only once
// the daemon has stored who it is on the host). The stage alone is stored
// before the command is spawned. The last task read, or {} on failure.
inline nlohmann::json wait_command_running(TestDaemon& d, const std::string& id,
                                           const std::string& host_dir) {
  for (int i = 0; i < 1200; ++i) {
    nlohmann::json t = d.request("GET", "/v1/tasks/" + id).json();
    if (t.is_object() && t.value("stage", "") == "execute" && runs_of(host_dir, id) == 1) {
      const std::string sandbox = text(t, "sandbox_id");
      auto procs = d.request("GET", "/v1/sandboxes/" + sandbox + "/processes").json();
      for (const auto& p : procs.value("processes", nlohmann::json::array()))
        if (p.value("state", "") == "running") return t;
    }
    usleep(25 * 1000);
  }
  return {};
}

inline std::string header(const HttpReply& r, std::string_view name) {
  auto v = http::find_header(r.headers, name);
  return v ? std::string(*v) : std::string();
}

}  // namespace corral::testing
