// A destroy that races file transfers (issue 14, items 6 and 7; D6, F3, X1):
// DELETE waits for the requests that hold files of the sandbox, after
// cutting off the transfers among them (a client that stopped reading a
// download, or stopped sending an upload, cannot hold it up), and ends
// `cleaned` with nothing left; a teardown that failed is retried by the
// daemon itself (and at once by a second DELETE), without a restart; and
// the audit log has the sandbox.destroy record before the store says
// `cleaned`. Against a real daemon, on both listeners.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http/http_client.h"
#include "jail/cgroup.h"
#include "support/daemon_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr std::uint64_t kBig = 16 << 20;  // the file the downloads read
const char* const kSandbox = R"({"limits": {"memory": "256Mi", "disk": "128Mi"}})";

std::string describe(const HttpReply& r) {
  return "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 600);
}

// A raw connection to one of the daemon's listeners, for clients that stop
// reading or sending halfway.
class RawConnection {
 public:
  RawConnection(TestDaemon& d, bool tcp) : tcp_(tcp), key_(tcp ? d.api_key() : "") {
    if (tcp) {
      fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(d.port());
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      small_buffers();
      if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close_fd();
    } else {
      fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::strncpy(a.sun_path, d.socket_path().c_str(), sizeof a.sun_path - 1);
      small_buffers();
      if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close_fd();
    }
  }
  ~RawConnection() { close_fd(); }
  bool ok() const { return fd_ >= 0; }

  bool send_head(const std::string& method, const std::string& target,
                 const std::string& extra = "") {
    std::string head = method + " " + target + " HTTP/1.1\r\nHost: corral\r\n" + extra;
    if (tcp_) head += "Authorization: Bearer " + key_ + "\r\n";
    head += "\r\n";
    return send_bytes(head.data(), head.size());
  }
  bool send_bytes(const char* data, std::size_t n) {
    while (n > 0) {
      ssize_t w = ::send(fd_, data, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      data += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }
  // Reads until the response head is in; returns it ("" on failure).
  std::string read_head() {
    std::string got;
    char buf[4096];
    while (got.find("\r\n\r\n") == std::string::npos) {
      if (!wait_readable(30s)) return "";
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return "";
      got.append(buf, static_cast<std::size_t>(n));
    }
    return got.substr(0, got.find("\r\n\r\n"));
  }
  // Reads what is left until the daemon closes the connection; false if it
  // is still open after `limit`.
  bool ends_within(std::chrono::seconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    char buf[1 << 16];
    while (std::chrono::steady_clock::now() < until) {
      if (!wait_readable(1s)) continue;
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  void small_buffers() {
    int size = 64 << 10;
    (void)setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  }
  bool wait_readable(std::chrono::milliseconds t) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, static_cast<int>(t.count())) > 0;
  }
  void close_fd() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
  bool tcp_;
  std::string key_;
};

std::string files_target(const std::string& id, const std::string& path) {
  return "/v1/sandboxes/" + id + "/files?path=" + path;
}

// Every record of the audit log (one file: these tests never rotate it).
std::vector<json> audit_log(TestDaemon& d) {
  std::vector<json> out;
  std::ifstream in(d.data_dir() + "/audit.log");
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

// Item 7: the sandbox.destroy record without residue comes before the
// transition to cleaned, and every file operation of the sandbox (the
// destroy waited for them) comes before its first sandbox.destroy.
void expect_audit_order(TestDaemon& d, const std::string& id) {
  std::vector<json> log = audit_log(d);
  long first_destroy = -1, clean_destroy = -1, cleaned = -1, last_file_op = -1;
  for (long i = 0; i < static_cast<long>(log.size()); ++i) {
    const json& r = log[static_cast<std::size_t>(i)];
    if (r.value("sandbox", "") != id) continue;
    const std::string type = r.value("type", "");
    if (type == "sandbox.destroy") {
      if (first_destroy < 0) first_destroy = i;
      if (r.contains("residue") && r["residue"].empty()) clean_destroy = i;
    } else if (type == "sandbox.transition" && r.value("to", "") == "cleaned") {
      cleaned = i;
    } else if (type.rfind("file.", 0) == 0) {
      last_file_op = i;
    }
  }
  ASSERT_GE(cleaned, 0) << "no transition to cleaned for " << id;
  EXPECT_GE(clean_destroy, 0) << "no sandbox.destroy record without residue for " << id;
  EXPECT_LT(clean_destroy, cleaned)
      << id << ": the store's cleaned transition was audited before sandbox.destroy";
  EXPECT_LT(last_file_op, first_destroy)
      << id << ": a file operation was audited after the teardown began";
}

// Nothing of the sandbox on the host: its cgroup and its lock file.
void expect_nothing_left(const std::string& id) {
  auto manager = CgroupManager::detect();
  ASSERT_TRUE(manager) << manager.error().message;
  auto names = (*manager)->list();
  ASSERT_TRUE(names) << names.error().message;
  for (const auto& n : *names) EXPECT_NE(n, id) << "cgroup of " << id << " left";
  EXPECT_NE(access(("/run/corral/sandboxes/" + id + ".lock").c_str(), F_OK), 0)
      << "lock file of " << id << " left";
}

void expect_cleaned(const HttpReply& r) {
  ASSERT_EQ(r.status, 200) << describe(r);
  json j = r.json();
  EXPECT_EQ(j.value("state", ""), "cleaned") << describe(r);
  EXPECT_EQ(j.value("residue_bytes", std::uint64_t{1}), 0u) << describe(r);
  EXPECT_TRUE(j.contains("residue") && j["residue"].empty()) << describe(r);
}

class DaemonDestroyRace : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() { daemon_ = new TestDaemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  TestDaemon& d() { return *daemon_; }
  bool tcp() const { return GetParam(); }

  // A sandbox with a kBig file at /workspace/big.
  std::string sandbox_with_big_file() {
    HttpReply r;
    std::string id = d().create_sandbox(kSandbox, &r);
    EXPECT_FALSE(id.empty()) << describe(r);
    if (id.empty()) return id;
    json x = d().exec(id, "head -c " + std::to_string(kBig) + " /dev/zero > /workspace/big");
    EXPECT_EQ(x.value("exit_code", -1), 0) << x.dump();
    return id;
  }

  // Waits until the upload to `path` has put bytes in the file: its
  // handler holds the file open then.
  bool upload_started(const std::string& id, const std::string& path) {
    for (int i = 0; i < 600; ++i) {
      HttpReply s = d().request("GET", "/v1/sandboxes/" + id + "/files/stat?path=" + path);
      if (s.status == 200 && s.json().value("size", 0) > 0) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  static TestDaemon* daemon_;
};

TestDaemon* DaemonDestroyRace::daemon_ = nullptr;

// Clients that stop reading a download or a background process's output,
// or stop sending an upload, while their handlers hold files of the sandbox: the DELETE cuts them off,
// waits for the files to be closed, and the wipe finds nothing.
TEST_P(DaemonDestroyRace, StalledTransfersAreCutOffAndTheSandboxEndsCleaned) {
  ASSERT_TRUE(d().ready()) << d().output();
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string id = sandbox_with_big_file();
    ASSERT_FALSE(id.empty());
    std::vector<std::unique_ptr<RawConnection>> readers;
    for (int i = 0; i < 2; ++i) {
      auto c = std::make_unique<RawConnection>(d(), tcp());
      ASSERT_TRUE(c->ok());
      ASSERT_TRUE(c->send_head("GET", files_target(id, "/workspace/big")));
      std::string head = c->read_head();
      ASSERT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
      readers.push_back(std::move(c));  // and reads no more
    }
    // A background process's output, on the sandbox's layer, read by a
    // client that stops reading too.
    HttpReply started = d().request("POST", "/v1/sandboxes/" + id + "/processes",
                                    json{{"cmd", "head -c " + std::to_string(kBig) + " /dev/zero"}}.dump());
    ASSERT_EQ(started.status, 201) << describe(started);
    const std::string pid = started.json().value("id", "");
    HttpReply waited = d().request("POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/wait",
                                   "{}");
    ASSERT_EQ(waited.status, 200) << describe(waited);
    {
      auto c = std::make_unique<RawConnection>(d(), tcp());
      ASSERT_TRUE(c->ok());
      ASSERT_TRUE(c->send_head("GET", "/v1/sandboxes/" + id + "/processes/" + pid + "/output"));
      std::string head = c->read_head();
      ASSERT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
      readers.push_back(std::move(c));
    }
    RawConnection uploader(d(), tcp());
    ASSERT_TRUE(uploader.ok());
    ASSERT_TRUE(uploader.send_head("PUT", files_target(id, "/workspace/up"),
                                   "Content-Type: application/octet-stream\r\n"
                                   "Content-Length: " +
                                       std::to_string(64 << 20) + "\r\n"));
    std::string part(4 << 20, 'u');
    ASSERT_TRUE(uploader.send_bytes(part.data(), part.size()));  // and sends no more
    ASSERT_TRUE(upload_started(id, "/workspace/up"));

    HttpReply del = d().request("DELETE", "/v1/sandboxes/" + id, "", tcp());
    expect_cleaned(del);
    for (auto& c : readers) EXPECT_TRUE(c->ends_within(30s)) << "a stalled download stayed open";
    EXPECT_TRUE(uploader.ends_within(30s)) << "a stalled upload stayed open";
    expect_nothing_left(id);
    expect_audit_order(d(), id);
  }
}

// Downloads and uploads running flat out, and short file operations, when
// the DELETE comes: every round ends cleaned, every file request is
// answered (or cut off), and a file request on a sandbox being destroyed
// gets 409 conflict, never a 5xx.
TEST_P(DaemonDestroyRace, ActiveTransfersRacingDeleteEndCleaned) {
  ASSERT_TRUE(d().ready()) << d().output();
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string id = sandbox_with_big_file();
    ASSERT_FALSE(id.empty());
    std::atomic<bool> stop{false};
    std::atomic<int> transfers{0};
    std::atomic<int> bad{0};
    std::string bad_reply;
    std::mutex bad_mu;
    auto note = [&](const HttpReply& r) {
      // 200/201: done; 409: the sandbox takes no more work; 0: cut off.
      if (r.status == 0 || r.status == 200 || r.status == 201) return;
      if (r.status == 409 && r.json()["error"].value("code", "") == "conflict") {
        stop = true;
        return;
      }
      ++bad;
      std::lock_guard lock(bad_mu);
      bad_reply = describe(r);
    };
    std::vector<std::thread> clients;
    for (int i = 0; i < 2; ++i) {
      clients.emplace_back([&, i] {
        while (!stop) {
          note(d().request("GET", files_target(id, "/workspace/big"), "", (i % 2) == 1));
          ++transfers;
        }
      });
      clients.emplace_back([&, i] {
        const std::string body(2 << 20, 'x');
        const std::string path = "/workspace/up" + std::to_string(i);
        while (!stop) {
          note(d().request("PUT", files_target(id, path), body, (i % 2) == 0,
                           true, {{"content-type", "application/octet-stream"}}));
          ++transfers;
        }
      });
    }
    clients.emplace_back([&] {
      while (!stop) note(d().request("GET", "/v1/sandboxes/" + id + "/files/stat?path=/workspace"));
    });
    // Some transfers done, others in flight, at a different point each round.
    while (transfers < 2 + round) std::this_thread::sleep_for(5ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(7 * round));
    HttpReply del = d().request("DELETE", "/v1/sandboxes/" + id, "", tcp());
    stop = true;
    for (auto& t : clients) t.join();
    expect_cleaned(del);
    EXPECT_EQ(bad, 0) << bad_reply;
    expect_nothing_left(id);
    expect_audit_order(d(), id);
  }
}

INSTANTIATE_TEST_SUITE_P(Listeners, DaemonDestroyRace, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Tcp" : "Unix"; });

// A teardown that fails because something outside the daemon holds a file
// of the sandbox (here the test itself, through /proc/<pid>/root: harmless,
// and let go when the test says) ends `failed` with residue; the daemon
// retries it by itself, and a second DELETE retries it at once.
class DaemonTeardownRetry : public ::testing::Test {
 protected:
  // Opens /workspace/big of sandbox `id` from the host, through one of its
  // processes' root, so that its bytes stay allocated after the wipe.
  int hold_file(const std::string& id) {
    auto manager = CgroupManager::detect();
    if (!manager) return -1;
    auto cg = (*manager)->open(id);
    if (!cg) return -1;
    auto pids = (*cg)->processes();
    if (!pids) return -1;
    for (pid_t pid : *pids) {
      int fd = open(("/proc/" + std::to_string(pid) + "/root/workspace/big").c_str(),
                    O_RDONLY | O_CLOEXEC);
      if (fd >= 0) return fd;
    }
    return -1;
  }

  std::string failed_sandbox(int* held) {
    HttpReply r;
    std::string id = d_.create_sandbox(kSandbox, &r);
    EXPECT_FALSE(id.empty()) << describe(r);
    if (id.empty()) return id;
    json x = d_.exec(id, "head -c 1048576 /dev/zero > /workspace/big");
    EXPECT_EQ(x.value("exit_code", -1), 0) << x.dump();
    *held = hold_file(id);
    EXPECT_GE(*held, 0) << "could not open a file of " << id << " from the host";
    HttpReply del = d_.request("DELETE", "/v1/sandboxes/" + id, "", true);
    EXPECT_EQ(del.status, 200) << describe(del);
    // The precondition: the held file is left after the wipe.
    EXPECT_EQ(del.json().value("state", ""), "failed") << describe(del);
    EXPECT_GT(del.json().value("residue_bytes", std::uint64_t{0}), 0u) << describe(del);
    return id;
  }

  std::string state_of(const std::string& id) {
    return d_.request("GET", "/v1/sandboxes/" + id).json().value("state", "");
  }

  TestDaemon d_;
};

TEST_F(DaemonTeardownRetry, TheDaemonRetriesAFailedTeardownWithoutARestart) {
  ASSERT_TRUE(d_.ready()) << d_.output();
  const pid_t daemon_pid = d_.pid();
  int held = -1;
  const std::string id = failed_sandbox(&held);
  ASSERT_FALSE(id.empty());
  ASSERT_GE(held, 0);
  // Failed, and retried while it still fails: it stays failed.
  std::vector<json> attempts;
  for (int i = 0; i < 300 && attempts.size() < 2; ++i) {
    attempts.clear();
    for (auto& a : d_.audit_records("sandbox.destroy"))
      if (a.value("sandbox", "") == id) attempts.push_back(a);
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_GE(attempts.size(), 2u) << "no retry of the failed teardown was audited";
  EXPECT_EQ(attempts[1].value("attempt", 0), 2) << attempts[1].dump();
  EXPECT_EQ(attempts[1].value("outcome", ""), "failed") << attempts[1].dump();
  EXPECT_EQ(state_of(id), "failed");
  // Let go: a later retry finds the layer empty.
  close(held);
  std::string state;
  for (int i = 0; i < 600 && state != "cleaned"; ++i) {
    std::this_thread::sleep_for(50ms);
    state = state_of(id);
  }
  EXPECT_EQ(state, "cleaned") << "the failed teardown was not retried to the end";
  EXPECT_EQ(d_.pid(), daemon_pid);  // no restart did it
  expect_nothing_left(id);
  expect_audit_order(d_, id);
  HttpReply m = d_.request("GET", "/metrics");
  EXPECT_NE(m.body.find("corral_teardown_retries_total{outcome=\"cleaned\"}"), std::string::npos)
      << m.body.substr(0, 2000);
  EXPECT_NE(m.body.find("corral_teardowns_failed 0"), std::string::npos);
}

TEST_F(DaemonTeardownRetry, ASecondDeleteRetriesAFailedTeardownAtOnce) {
  ASSERT_TRUE(d_.ready()) << d_.output();
  for (bool tcp : {false, true}) {
    SCOPED_TRACE(tcp ? "tcp" : "unix");
    int held = -1;
    const std::string id = failed_sandbox(&held);
    ASSERT_FALSE(id.empty());
    ASSERT_GE(held, 0);
    // While the file is held, a DELETE tries and says so.
    HttpReply again = d_.request("DELETE", "/v1/sandboxes/" + id, "", tcp);
    ASSERT_EQ(again.status, 200) << describe(again);
    EXPECT_EQ(again.json().value("state", ""), "failed") << describe(again);
    EXPECT_GT(again.json().value("residue_bytes", std::uint64_t{0}), 0u) << describe(again);
    close(held);
    expect_cleaned(d_.request("DELETE", "/v1/sandboxes/" + id, "", tcp));
    expect_nothing_left(id);
    expect_audit_order(d_, id);
    // A file request now: 409, as for any sandbox that takes no more work.
    HttpReply f = d_.request("GET", files_target(id, "/workspace/big"), "", tcp);
    EXPECT_EQ(f.status, 409) << describe(f);
  }
}

// Item 7: the destroy record is written before the store says cleaned, so
// a daemon killed at any moment of a destroy leaves no sandbox that the
// store has as cleaned without a destroy record (sandbox.destroy without
// residue, or the next start's sandbox.reconcile_destroy).
class DaemonDestroyAudit : public ::testing::Test {
 protected:
  TestDaemon d_;
};

TEST_F(DaemonDestroyAudit, TheDestroyRecordComesBeforeCleanedOnBothListeners) {
  ASSERT_TRUE(d_.ready()) << d_.output();
  for (bool tcp : {false, true}) {
    HttpReply r;
    const std::string id = d_.create_sandbox("{}", &r);
    ASSERT_FALSE(id.empty()) << describe(r);
    expect_cleaned(d_.request("DELETE", "/v1/sandboxes/" + id, "", tcp));
    expect_audit_order(d_, id);
  }
}

TEST_F(DaemonDestroyAudit, EveryCleanedSandboxHasADestroyRecordAfterAKill) {
  ASSERT_TRUE(d_.ready()) << d_.output();
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<std::string> ids;
    for (int i = 0; i < 4; ++i) {
      HttpReply r;
      ids.push_back(d_.create_sandbox(R"({"limits": {"memory": "64Mi", "disk": "16Mi"}})", &r));
      ASSERT_FALSE(ids.back().empty()) << describe(r);
    }
    std::vector<std::thread> deletes;
    for (std::size_t i = 0; i < ids.size(); ++i)
      deletes.emplace_back([&, i] {
        (void)d_.request("DELETE", "/v1/sandboxes/" + ids[i], "", (i % 2) == 1);
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + 15 * round));
    ASSERT_TRUE(d_.kill9()) << d_.output();
    for (auto& t : deletes) t.join();
    ASSERT_TRUE(d_.restart()) << d_.output();  // its reconcile finishes what was cut short
    std::set<std::string> recorded;
    for (const json& rec : audit_log(d_)) {
      const std::string type = rec.value("type", "");
      const bool clean = rec.contains("residue") && rec["residue"].empty();
      if ((type == "sandbox.destroy" || type == "sandbox.reconcile_destroy") && clean)
        recorded.insert(rec.value("sandbox", ""));
    }
    for (const std::string& id : ids) {
      HttpReply g = d_.request("GET", "/v1/sandboxes/" + id);
      ASSERT_EQ(g.status, 200) << describe(g);
      if (g.json().value("state", "") != "cleaned") {
        // Its DELETE never arrived: re-adopted, it would hold capacity.
        (void)d_.request("DELETE", "/v1/sandboxes/" + id);
        continue;
      }
      EXPECT_EQ(recorded.count(id), 1u) << id << " is cleaned without a destroy record";
    }
  }
}

}  // namespace
}  // namespace corral::testing
