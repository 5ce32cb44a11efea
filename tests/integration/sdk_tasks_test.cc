// Tasks through the C++ SDK (issue 15 point 10; REQUIREMENTS.md D6, P1):
// RemoteProvider's submit_task, get_task, wait_task, run_task, list_tasks,
// cancel_task and verified output downloads against a real `corral serve`.
// The same behaviours as sdk/python/tests/test_tasks.py, plus what only a
// man in the middle can show: a download whose bytes changed on the way
// (or whose sha256 header went missing) is refused, through a proxy on a
// unix socket that flips a byte or drops the header.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "sdk/remote_provider.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/team_b.h"

namespace corral::testing {
namespace {

using namespace std::chrono_literals;

// A task running `sh` in a small sandbox, as the other task tests do.
api::TaskRequest shell_task(const std::string& id, const std::string& sh) {
  api::TaskRequest t;
  t.id = id;
  t.sandbox_json = R"({"limits": {"memory": "64Mi", "disk": "16Mi"}})";
  t.sh = sh;
  return t;
}

api::TaskInput inline_input(const std::string& path, std::string content) {
  api::TaskInput in;
  in.path = path;
  in.content = std::move(content);
  in.sha256 = sha256_hex(in.content);
  return in;
}

// ---- a man in the middle ------------------------------------------------------------

int unix_socket_at(const std::string& path, bool listen_there) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return ::close(fd), -1;
  path.copy(addr.sun_path, path.size());
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  int rc = listen_there ? ::bind(fd, sa, sizeof addr) : ::connect(fd, sa, sizeof addr);
  if (rc != 0 || (listen_there && ::listen(fd, 8) != 0)) return ::close(fd), -1;
  return fd;
}

bool write_all_to(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads until `buf` holds a head ("\r\n\r\n") and the Content-Length bytes
// after it; false when the peer closed first.
bool read_message(int fd, std::string& buf, std::size_t& head_end) {
  char chunk[16384];
  for (;;) {
    head_end = buf.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      head_end += 4;
      std::size_t length = 0;
      std::string lower = buf.substr(0, head_end);
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (auto at = lower.find("\r\ncontent-length:"); at != std::string::npos)
        length = std::stoull(lower.substr(at + 17));
      if (buf.size() >= head_end + length) return true;
    }
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<std::size_t>(n));
  }
}

// Relays one request per connection from its own socket to the daemon's,
// changing the answer on the way as `mode` says; then closes (and says so
// in the answer's head, so the client does not reuse the connection).
class TamperingProxy {
 public:
  enum class Mode { kPass, kFlipLastBodyByte, kDropSha256Header };

  TamperingProxy(std::string upstream, std::string dir, Mode mode)
      : upstream_(std::move(upstream)), path_(dir + "/proxy.sock"), mode_(mode) {
    listen_fd_ = unix_socket_at(path_, true);
    if (listen_fd_ >= 0) thread_ = std::thread([this] { serve(); });
  }
  ~TamperingProxy() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  bool ok() const { return listen_fd_ >= 0; }
  std::string url() const { return "unix:" + path_; }
  int tampered() const { return tampered_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      relay(client);
      ::close(client);
    }
  }

  void relay(int client) {
    std::string request, answer;
    std::size_t head_end = 0;
    if (!read_message(client, request, head_end)) return;
    int up = unix_socket_at(upstream_, false);
    if (up < 0) return;
    bool whole = write_all_to(up, request) && read_message(up, answer, head_end);
    ::close(up);
    if (!whole) return;
    std::string head = answer.substr(0, head_end), body = answer.substr(head_end);
    if (mode_ == Mode::kFlipLastBodyByte && !body.empty()) {
      body.back() = static_cast<char>(body.back() ^ 0x01);
      ++tampered_;
    }
    if (mode_ == Mode::kDropSha256Header) {
      std::string lower = head;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto at = lower.find("\r\nx-corral-sha256:");
      if (at != std::string::npos) {
        head.erase(at, head.find("\r\n", at + 2) - at);
        ++tampered_;
      }
    }
    head.insert(head.find("\r\n") + 2, "Connection: close\r\n");
    (void)write_all_to(client, head + body);
  }

  std::string upstream_, path_;
  Mode mode_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> tampered_{0};
  std::thread thread_;
};

// ---- fixture ------------------------------------------------------------------------

class SdkTasks : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<TestDaemon>();
    ASSERT_TRUE(daemon_->ready()) << daemon_->output();
    client_ = open_client(daemon_->unix_url());
    ASSERT_TRUE(client_);
  }

  static std::unique_ptr<sdk::RemoteProvider> open_client(const std::string& url) {
    sdk::RemoteOptions options;
    options.url = url;
    options.timeout = 120s;
    auto p = sdk::RemoteProvider::open(options);
    EXPECT_TRUE(p) << p.error().to_string();
    return p ? std::move(*p) : nullptr;
  }

  // A finished task whose output 0 holds `content`.
  api::TaskInfo task_with_output(const std::string& id, const std::string& content) {
    api::TaskRequest t = shell_task(id, "cp /workspace/in /workspace/out");
    t.inputs.push_back(inline_input("/workspace/in", content));
    t.outputs.push_back({"/workspace/out", true, std::nullopt});
    auto done = client_->run_task(t);
    EXPECT_TRUE(done) << done.error().to_string();
    EXPECT_TRUE(done && done->ok()) << (done ? api::to_json(*done) : "");
    return done ? *done : api::TaskInfo{};
  }

  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<sdk::RemoteProvider> client_;
};

TEST_F(SdkTasks, RunTaskPushesInputsAndItsOutputDownloadsHashChecked) {
  std::string data;
  for (int i = 0; i < 64 * 256; ++i) data += static_cast<char>(i & 0xff);  // not UTF-8
  api::TaskRequest t = shell_task(
      "cc-run-1", "wc -c < /workspace/in.bin > /workspace/out.txt; "
                  "cat /workspace/note.txt >> /workspace/out.txt; cp /workspace/in.bin /workspace/copy.bin");
  t.inputs.push_back(inline_input("/workspace/in.bin", data));
  t.inputs.push_back(inline_input("/workspace/note.txt", "note\n"));
  t.outputs.push_back({"/workspace/out.txt", true, std::nullopt});
  t.outputs.push_back({"/workspace/copy.bin", true, std::nullopt});
  t.timeout_ms = 60'000;
  auto task = client_->run_task(t);
  ASSERT_TRUE(task) << task.error().to_string();
  ASSERT_TRUE(task->finished());
  ASSERT_TRUE(task->ok()) << api::to_json(*task);
  EXPECT_EQ(task->exit_code, 0);
  ASSERT_TRUE(task->finished_at_ms);
  EXPECT_GE(*task->finished_at_ms, task->created_at_ms);
  ASSERT_EQ(task->outputs.size(), 2u);

  auto text = client_->task_output(task->id, 0);
  ASSERT_TRUE(text) << text.error().to_string();
  EXPECT_EQ(*text, "16384\nnote\n");
  EXPECT_TRUE(task->outputs[0].present);
  EXPECT_EQ(task->outputs[0].size, text->size());
  EXPECT_EQ(task->outputs[0].sha256, sha256_hex(*text));

  std::string copy;
  auto n = client_->download_task_output(task->id, 1, [&](std::string_view d) -> Status {
    copy.append(d);
    return ok();
  });
  ASSERT_TRUE(n) << n.error().to_string();
  EXPECT_EQ(*n, data.size());
  EXPECT_EQ(copy, data);
  // A sink's error stops the download and is the call's error.
  auto refused = client_->download_task_output(task->id, 1, [](std::string_view) -> Status {
    return make_error(ErrorCode::kResourceExhausted, "sink is full");
  });
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("sink is full"), std::string::npos);
  auto small = client_->task_output(task->id, 1, 100);
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(client_->task_output(task->id, 7).error().code, ErrorCode::kNotFound);

  // The request went out as given: the daemon stored the timeout and the
  // inputs' hashes (GET of one task carries its request).
  auto got = client_->get_task(task->id);
  ASSERT_TRUE(got) << got.error().to_string();
  ASSERT_TRUE(got->request_json);
  auto stored = api::parse_stored_task_request(*got->request_json);
  ASSERT_TRUE(stored) << stored.error().to_string();
  // (compared as JSON values: the store sorts the sandbox object's keys)
  const auto as_sent = nlohmann::json::parse(api::to_canonical_json(t));
  const auto as_stored = nlohmann::json::parse(api::to_canonical_json(*stored));
  EXPECT_TRUE(as_sent == as_stored) << "first difference: "
                                    << nlohmann::json::diff(as_sent, as_stored).dump().substr(0, 400);
  EXPECT_EQ(stored->timeout_ms, 60'000);
}

TEST_F(SdkTasks, AFailedTaskIsAResultThatSaysWhy) {
  auto exit3 = client_->run_task(shell_task("cc-fail-exit", "exit 3"));
  ASSERT_TRUE(exit3) << exit3.error().to_string();
  EXPECT_EQ(exit3->status, "failed");
  EXPECT_FALSE(exit3->ok());
  EXPECT_EQ(exit3->exit_code, 3);
  EXPECT_EQ(exit3->reason, "exit_code");
  EXPECT_TRUE(exit3->detail && !exit3->detail->empty());

  api::TaskRequest missing = shell_task("cc-fail-missing", "true");
  missing.outputs.push_back({"/workspace/none", true, std::nullopt});
  auto t = client_->run_task(missing);
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->status, "failed");
  EXPECT_EQ(t->exit_code, 0);
  EXPECT_EQ(t->reason, "output_missing");
  ASSERT_TRUE(t->detail);
  EXPECT_NE(t->detail->find("/workspace/none"), std::string::npos) << *t->detail;
  ASSERT_EQ(t->outputs.size(), 1u);
  EXPECT_FALSE(t->outputs[0].present);
  EXPECT_EQ(client_->task_output(t->id, 0).error().code, ErrorCode::kNotFound);
}

TEST_F(SdkTasks, ARepeatReturnsTheStoredTaskAndAnotherBodyConflictsNamingTheField) {
  const api::TaskRequest once = shell_task("cc-idem-1", "echo once");
  auto first = client_->run_task(once);
  ASSERT_TRUE(first) << first.error().to_string();
  ASSERT_TRUE(first->ok()) << api::to_json(*first);
  auto again = client_->submit_task(once);
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(again->status, first->status);
  EXPECT_EQ(again->attempt, 1);
  EXPECT_EQ(again->sandbox_id, first->sandbox_id);
  EXPECT_EQ(again->finished_at_ms, first->finished_at_ms);
  auto rerun = client_->run_task(once);  // the same: no second run
  ASSERT_TRUE(rerun) << rerun.error().to_string();
  EXPECT_EQ(rerun->sandbox_id, first->sandbox_id);

  api::TaskRequest other = once;
  other.sh = "echo twice";
  auto conflict = client_->submit_task(other);
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.error().code, ErrorCode::kAlreadyExists) << conflict.error().to_string();
  EXPECT_NE(conflict.error().to_string().find("field sh differs"), std::string::npos)
      << conflict.error().to_string();
  auto listed = client_->list_tasks();
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->tasks.size(), 1u);
}

// D6: whatever part of the request differs, a submit under a taken id is
// kAlreadyExists naming that part, and so is an id another namespace took
// (its request is not shown); nothing runs or is stored for either.
TEST_F(SdkTasks, ATakenIdIsAlreadyExistsNamingTheFieldThatDiffers) {
  daemon_ = std::make_unique<TestDaemon>(std::vector<std::string>{}, team_b_config());
  ASSERT_TRUE(daemon_->ready()) << daemon_->output();
  client_ = open_client(daemon_->unix_url());
  ASSERT_TRUE(client_);
  api::TaskRequest taken = shell_task("cc-taken-1", "cp /workspace/in /workspace/out");
  taken.inputs.push_back(inline_input("/workspace/in", "first"));
  taken.outputs.push_back({"/workspace/out", true, std::nullopt});
  auto first = client_->run_task(taken);
  ASSERT_TRUE(first) << first.error().to_string();
  ASSERT_TRUE(first->ok()) << api::to_json(*first);

  struct Variant {
    std::string field;
    std::function<void(api::TaskRequest&)> change;
  };
  const std::vector<Variant> variants = {
      {"sh", [](api::TaskRequest& r) { r.sh = "true"; }},
      {"timeout_ms", [](api::TaskRequest& r) { r.timeout_ms = 12'345; }},
      {"env.EXTRA", [](api::TaskRequest& r) { r.env.push_back({"EXTRA", "1"}); }},
      {"inputs[0].content",
       [](api::TaskRequest& r) { r.inputs[0] = inline_input("/workspace/in", "second"); }},
      {"outputs[0].path", [](api::TaskRequest& r) { r.outputs[0].path = "/workspace/other"; }},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.field);
    api::TaskRequest other = taken;
    v.change(other);
    auto refused = client_->submit_task(other);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kAlreadyExists) << refused.error().to_string();
    EXPECT_NE(refused.error().message.find("field " + v.field + " differs"), std::string::npos)
        << refused.error().to_string();
  }

  // Another namespace (over TCP with its key), even with the same body.
  sdk::RemoteOptions team_b;
  team_b.url = daemon_->tcp_url();
  team_b.api_key = kTeamBKey;
  team_b.timeout = 120s;
  auto other_ns = sdk::RemoteProvider::open(team_b);
  ASSERT_TRUE(other_ns) << other_ns.error().to_string();
  auto refused = (*other_ns)->submit_task(taken);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kAlreadyExists) << refused.error().to_string();
  EXPECT_NE(refused.error().message.find("is taken"), std::string::npos)
      << refused.error().to_string();

  auto still = client_->get_task(taken.id);
  ASSERT_TRUE(still) << still.error().to_string();
  EXPECT_EQ(still->attempt, 1);
  EXPECT_EQ(still->finished_at_ms, first->finished_at_ms);
  auto listed = client_->list_tasks();
  ASSERT_TRUE(listed) << listed.error().to_string();
  EXPECT_EQ(listed->tasks.size(), 1u);
}

TEST_F(SdkTasks, ListingPagesThroughEveryTaskNewestFirstAndFilters) {
  std::vector<api::TaskInfo> made;  // oldest first
  for (int i = 0; i < 5; ++i) {
    auto t = client_->run_task(shell_task("cc-ls-" + std::to_string(i), i == 3 ? "exit 1" : "true"));
    ASSERT_TRUE(t) << t.error().to_string();
    ASSERT_TRUE(t->finished());
    made.push_back(*t);
  }
  for (std::size_t i = 1; i < made.size(); ++i)
    ASSERT_GT(made[i].created_at_ms, made[i - 1].created_at_ms);

  // Pages of two: 2 + 2 + 1, each with the cursor of the one before.
  std::vector<std::string> seen;
  sdk::TaskQuery q;
  q.limit = 2;
  int pages = 0;
  for (;;) {
    auto page = client_->list_tasks(q);
    ASSERT_TRUE(page) << page.error().to_string();
    ASSERT_LE(page->tasks.size(), 2u);
    ++pages;
    for (const auto& t : page->tasks) {
      seen.push_back(t.id);
      EXPECT_FALSE(t.request_json) << "a listing carries no requests";
    }
    if (!page->next_cursor) break;
    q.cursor = page->next_cursor;
    ASSERT_LT(pages, 10) << "the cursor does not advance";
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, (std::vector<std::string>{"cc-ls-4", "cc-ls-3", "cc-ls-2", "cc-ls-1", "cc-ls-0"}));

  sdk::TaskQuery failed;
  failed.statuses = {"failed", "timed_out"};
  auto only = client_->list_tasks(failed);
  ASSERT_TRUE(only) << only.error().to_string();
  ASSERT_EQ(only->tasks.size(), 1u);
  EXPECT_EQ(only->tasks[0].id, "cc-ls-3");
  EXPECT_EQ(only->tasks[0].reason, "exit_code");

  // created_after is inclusive, created_before exclusive (docs/tasks.md).
  sdk::TaskQuery after;
  after.created_after_ms = made[2].created_at_ms;
  auto newer = client_->list_tasks(after);
  ASSERT_TRUE(newer);
  std::vector<std::string> ids;
  for (const auto& t : newer->tasks) ids.push_back(t.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"cc-ls-4", "cc-ls-3", "cc-ls-2"}));
  sdk::TaskQuery before;
  before.created_before_ms = made[2].created_at_ms;
  before.statuses = {"succeeded"};
  auto older = client_->list_tasks(before);
  ASSERT_TRUE(older);
  ids.clear();
  for (const auto& t : older->tasks) ids.push_back(t.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"cc-ls-1", "cc-ls-0"}));

  sdk::TaskQuery bad;
  bad.statuses = {"sleeping"};
  auto refused = client_->list_tasks(bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("sleeping"), std::string::npos) << refused.error().message;
}

TEST_F(SdkTasks, CancelEndsARunningTaskAndABoundedWaitReturnsItUnfinished) {
  api::TaskRequest t = shell_task("cc-cancel-1", "sleep 300");
  t.timeout_ms = 600'000;
  auto submitted = client_->submit_task(t);
  ASSERT_TRUE(submitted) << submitted.error().to_string();
  EXPECT_FALSE(submitted->finished());
  // A bounded wait on a task that runs for minutes returns it as it is.
  auto waited = client_->wait_task(t.id, 300ms);
  ASSERT_TRUE(waited) << waited.error().to_string();
  EXPECT_FALSE(waited->finished()) << api::to_json(*waited);
  auto polled = client_->get_task(t.id, 200ms);
  ASSERT_TRUE(polled) << polled.error().to_string();
  EXPECT_FALSE(polled->finished());

  auto cancelled = client_->cancel_task(t.id);
  ASSERT_TRUE(cancelled) << cancelled.error().to_string();
  auto end = client_->wait_task(t.id);
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_EQ(end->status, "cancelled");
  EXPECT_EQ(end->reason, "cancelled");
  // A finished task cannot be cancelled: 409 naming its status. A state
  // that refuses the call, not a taken id: it stays kUnavailable (only a
  // submit's 409 is kAlreadyExists).
  auto twice = client_->cancel_task(t.id);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, ErrorCode::kUnavailable) << twice.error().to_string();
  EXPECT_NE(twice.error().message.find("cancelled"), std::string::npos) << twice.error().message;
}

TEST_F(SdkTasks, UnknownTasksAreNotFound) {
  EXPECT_EQ(client_->get_task("cc-none").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(client_->get_task("cc-none", 100ms).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(client_->cancel_task("cc-none").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(client_->task_output("cc-none", 0).error().code, ErrorCode::kNotFound);
  // A bad request is refused by the daemon's parser, naming the field.
  api::TaskRequest no_command;
  no_command.id = "cc-bad";
  auto refused = client_->submit_task(no_command);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().to_string().find("command"), std::string::npos);
}

// Bytes changed between the daemon and the client are refused: a proxy
// that relays faithfully proves itself first, then one flips the last
// byte of the body and one drops the X-Corral-Sha256 header.
TEST_F(SdkTasks, ADownloadChangedOnTheWayIsRefused) {
  const std::string content = "the output, checked end to end\n";
  api::TaskInfo task = task_with_output("cc-tamper-1", content);
  ASSERT_TRUE(task.ok());
  const std::string dir = make_temp_dir("sdk-proxy");
  const std::string upstream = daemon_->unix_url().substr(5);
  using Mode = TamperingProxy::Mode;
  for (Mode mode : {Mode::kPass, Mode::kFlipLastBodyByte, Mode::kDropSha256Header}) {
    const std::string sub = dir + "/" + std::to_string(static_cast<int>(mode));
    ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
    TamperingProxy proxy(upstream, sub, mode);
    ASSERT_TRUE(proxy.ok());
    auto client = open_client(proxy.url());
    ASSERT_TRUE(client);
    std::string got;
    auto n = client->download_task_output(task.id, 0, [&](std::string_view d) -> Status {
      got.append(d);
      return ok();
    });
    if (mode == Mode::kPass) {
      ASSERT_TRUE(n) << n.error().to_string();
      EXPECT_EQ(got, content);
      continue;
    }
    EXPECT_EQ(proxy.tampered(), 1);
    ASSERT_FALSE(n) << "a tampered download was accepted: " << got;
    EXPECT_EQ(n.error().code, ErrorCode::kSystem);
    const char* says = mode == Mode::kDropSha256Header ? "without an X-Corral-Sha256 header"
                                                        : "not the stored";
    EXPECT_NE(n.error().message.find(says), std::string::npos) << n.error().message;
    if (mode == Mode::kFlipLastBodyByte) {
      EXPECT_NE(n.error().message.find(sha256_hex(content)), std::string::npos)
          << n.error().message;
    }
  }
  host_sh("rm -rf '" + dir + "'");
}

}  // namespace
}  // namespace corral::testing
