// Host-side views of a daemon sandbox's processes, for the tests that
// check from outside what a sandbox's processes can see and signal: a
// background `sleep <token>` found by its command line, its zygote and
// init (its parent and grandparent), their pids inside the sandbox.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "support/daemon_harness.h"

namespace corral::testing {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value of `key:` in a /proc/<pid>/status text, trimmed.
inline std::string status_field(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::string v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

inline std::string proc_status(pid_t pid) {
  return read_text("/proc/" + std::to_string(pid) + "/status");
}

// The host pid of the process whose command line is exactly `wanted`
// (arguments NUL-terminated), or -1.
inline pid_t find_by_cmdline(const std::string& wanted) {
  DIR* d = opendir("/proc");
  if (d == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    if (read_text("/proc/" + std::string(e->d_name) + "/cmdline") == wanted) {
      found = static_cast<pid_t>(pid);
      break;
    }
  }
  closedir(d);
  return found;
}

inline pid_t parent_of(pid_t pid) {
  return static_cast<pid_t>(std::atoi(status_field(proc_status(pid), "PPid").c_str()));
}

// The pid of host process `pid` in its innermost pid namespace (the last
// NSpid entry): how the sandbox names it. Empty if unknown.
inline std::string inner_pid(pid_t pid) {
  std::istringstream ns(status_field(proc_status(pid), "NSpid"));
  std::string inner, next;
  while (ns >> next) inner = next;
  return inner;
}

// A unique `sleep` argument, so the process can be found by its cmdline.
inline std::string sleep_token() {
  std::mt19937_64 rng(std::random_device{}());
  return "3600." + std::to_string(rng() % 1000000);
}

struct Sleeper {
  std::string process_id;  // the daemon's id ("p-...")
  std::string token;       // `sleep <token>`
  pid_t pid = -1;          // host pid
};

// Starts a background `sleep <token>` in `sandbox` through the processes
// API and finds it on the host.
inline Sleeper start_sleeper(TestDaemon& d, const std::string& sandbox) {
  Sleeper s;
  s.token = sleep_token();
  nlohmann::json body{{"argv", {"sleep", s.token}}};
  HttpReply r = d.request("POST", "/v1/sandboxes/" + sandbox + "/processes", body.dump());
  if (r.status != 201) return s;
  s.process_id = r.json().value("id", "");
  const std::string cmdline = std::string("sleep") + '\0' + s.token + '\0';
  for (int i = 0; i < 500 && s.pid < 0; ++i) {
    s.pid = find_by_cmdline(cmdline);
    if (s.pid < 0) usleep(10000);
  }
  return s;
}

}  // namespace corral::testing
