#include "support/daemon_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "store/audit_verify.h"
#include "support/sandbox_harness.h"

namespace corral::testing {

nlohmann::json HttpReply::json() const {
  auto j = nlohmann::json::parse(body, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

TestDaemon::TestDaemon(std::vector<std::string> extra_args, std::string config_yaml,
                       std::vector<std::string> extra_env)
    : args_(std::move(extra_args)) {
  env_ = std::move(extra_env);
  dir_ = make_temp_dir("daemon");
  data_dir_ = dir_ + "/data";
  socket_ = dir_ + "/corral.sock";
  if (!config_yaml.empty()) {
    config_path_ = dir_ + "/config.yaml";
    std::ofstream(config_path_) << config_yaml;
  }
  launch();
}

bool TestDaemon::launch() {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return false;
  std::vector<std::string> argv = {
      corral_bin(), "serve", "--data-dir", data_dir_,
      "--socket",   socket_, "--listen",   "127.0.0.1:" + std::to_string(port_)};
  if (!config_path_.empty()) {
    argv.push_back("--config");
    argv.push_back(config_path_);
  }
  for (const auto& a : args_) argv.push_back(a);
  // Built before the fork: the child only makes async-signal-safe calls.
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  // This process's environment now, with env_'s names replaced.
  auto name_of = [](std::string_view e) { return e.substr(0, e.find('=')); };
  std::vector<std::string> env = env_;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const auto& x : env_) replaced = replaced || name_of(x) == name_of(*e);
    if (!replaced) env.emplace_back(*e);
  }
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // The daemon dies with the test process (an aborted or killed test run
    // leaks no daemon). Only the daemon: its sandboxes outlive it by design
    // (PDEATHSIG is not inherited across fork), and the next daemon
    // re-attaches them. The parent may have died before the prctl. The
    // kernel ties PDEATHSIG to the thread that forks here: a TestDaemon made
    // (or restart()ed) on a helper thread dies when that thread ends, so
    // make them on the test's own thread.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  if (pid_ < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return false;
  }
  close(pipefd[1]);
  out_fd_ = pipefd[0];
  // Wait for the one "listening on" line. output_ keeps what every launch
  // printed (a restarted daemon's too).
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[4096];
    ssize_t n = read(out_fd_, buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<size_t>(n));
    {
      std::lock_guard lock(output_mu_);
      output_.append(buf, static_cast<size_t>(n));
    }
    std::smatch m;
    static const std::regex re("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    if (std::regex_search(seen, m, re)) {
      port_ = static_cast<std::uint16_t>(std::stoi(m[1]));
      start_drain();
      return true;
    }
  }
  return false;
}

void TestDaemon::start_drain() {
  drain_stop_ = false;
  drain_ = std::thread([this, fd = out_fd_] {
    char buf[4096];
    while (!drain_stop_) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;  // every writer is gone: the daemon exited
      std::lock_guard lock(output_mu_);
      output_.append(buf, static_cast<size_t>(n));
    }
  });
}

void TestDaemon::stop_drain() {
  if (!drain_.joinable()) return;
  drain_stop_ = true;
  drain_.join();
}

std::string TestDaemon::output() const {
  std::lock_guard lock(output_mu_);
  return output_;
}

bool TestDaemon::wait_output(const std::string& text) const {
  for (int i = 0; i < 250; ++i) {
    if (output().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string TestDaemon::why_no_reply(const std::string& what) {
  std::string why = "[no reply: " + what + "; the daemon ";
  int status = 0;
  if (pid_ <= 0) {
    why += "was not running";
  } else if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    why += WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status))
                               : "exited with " + std::to_string(WEXITSTATUS(status));
  } else {
    why += "still runs";
  }
  // What it printed last (a sanitizer report, a fatal log line).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::string out = output();
  if (out.size() > 8192) out = "..." + out.substr(out.size() - 8192);
  return why + "; its output ends with:\n" + out + "]";
}

TestDaemon::~TestDaemon() {
  // A daemon a test killed (kill9 without restart) left its sandboxes
  // running: a new one re-attaches them, so that they can be destroyed.
  if (pid_ <= 0 && port_ != 0) {
    stop_drain();
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
    (void)launch();
  }
  if (pid_ > 0 && port_ != 0) {
    // Warm pools' sandboxes are in no list (ADR 0015) and outlive the
    // daemon's stop: ending each pool destroys them.
    auto pools = request("GET", "/v1/pools").json();
    if (pools.is_object() && pools.contains("pools")) {
      for (const auto& p : pools["pools"]) request("DELETE", "/v1/pools/" + p.value("name", ""));
    }
    // Destroy what is left, so no test leaks sandboxes.
    auto list = request("GET", "/v1/sandboxes");
    auto j = list.json();
    if (j.is_object() && j.contains("sandboxes")) {
      for (const auto& s : j["sandboxes"]) {
        if (s.value("state", "") != "cleaned")
          request("DELETE", "/v1/sandboxes/" + s.value("id", ""));
      }
    }
  }
  stop();
  stop_drain();
  if (out_fd_ >= 0) close(out_fd_);
  // Whatever is still mounted below (a secret tmpfs of a sandbox that could
  // not be destroyed) goes before the directory.
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  std::vector<std::string> left;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string dev, where;
    fields >> dev >> where;
    if (where.rfind(dir_ + "/", 0) == 0) left.push_back(where);
  }
  for (auto it = left.rbegin(); it != left.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  host_sh("rm -rf '" + dir_ + "'");
}

int TestDaemon::stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status;
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    usleep(50000);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

bool TestDaemon::kill9() {
  if (pid_ <= 0) return false;
  kill(pid_, SIGKILL);
  int status;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  stop_drain();
  if (out_fd_ >= 0) close(out_fd_);
  out_fd_ = -1;
  return true;
}

bool TestDaemon::restart() {
  if (pid_ > 0) stop();
  stop_drain();
  if (out_fd_ >= 0) close(out_fd_);
  out_fd_ = -1;
  return launch();
}

std::string TestDaemon::api_key() const {
  std::ifstream in(data_dir_ + "/api-key");
  std::string key;
  std::getline(in, key);
  return key;
}

HttpReply TestDaemon::request(const std::string& method, const std::string& target,
                              const std::string& body, bool via_tcp, bool with_key,
                              http::Headers headers) {
  HttpReply reply;
  auto endpoint = http::Endpoint::parse(via_tcp ? tcp_url() : unix_url());
  if (!endpoint) return reply;
  auto client = http::Client::connect(*endpoint, std::chrono::seconds(60));
  if (!client) {
    reply.body = why_no_reply("connect: " + client.error().message);
    return reply;
  }
  client->set_io_timeout(std::chrono::seconds(120));
  if (via_tcp && with_key) headers.push_back({"authorization", "Bearer " + api_key()});
  if (!body.empty() && !http::find_header(headers, "content-type"))
    headers.push_back({"content-type", "application/json"});
  auto head = client->send(method, target, headers, body);
  if (!head) {
    reply.body = why_no_reply(method + " " + target + ": " + head.error().message);
    return reply;
  }
  reply.status = head->status;
  reply.headers = head->headers;
  auto all = client->read_all(std::size_t{1} << 30);
  if (all) reply.body = *all;
  return reply;
}

std::string TestDaemon::create_sandbox(const std::string& body, HttpReply* out) {
  HttpReply r = request("POST", "/v1/sandboxes", body);
  if (out != nullptr) *out = r;
  auto j = r.json();
  if ((r.status != 201 && r.status != 200) || !j.is_object()) return "";
  return j.value("id", "");
}

nlohmann::json TestDaemon::exec(const std::string& id, const std::string& cmd) {
  nlohmann::json body{{"cmd", cmd}};
  return request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
}

std::vector<nlohmann::json> TestDaemon::audit_records(const std::string& type) const {
  std::vector<nlohmann::json> out;
  // The rotated files too, oldest first (docs/audit.md).
  auto files = list_audit_files(data_dir_ + "/audit.log");
  if (!files) return out;
  for (const auto& f : *files) {
    std::ifstream in(f.path);
    std::string line;
    while (std::getline(in, line)) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == type) out.push_back(j);
    }
  }
  return out;
}

std::vector<nlohmann::json> TestDaemon::wait_audit(const std::string& type,
                                                   std::size_t at_least) const {
  std::vector<nlohmann::json> got;
  for (int i = 0; i < 100; ++i) {
    got = audit_records(type);
    if (got.size() >= at_least) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return got;
}

}  // namespace corral::testing
