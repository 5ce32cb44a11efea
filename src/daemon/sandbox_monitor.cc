// The monitor thread: one epoll over every sandbox's spawn channel (the
// zygote's replies: a process started, failed or exited) and its init's
// pidfd (the sandbox ended on its own). An init exit starts a tracked
// teardown thread (docs/adr/0007-daemon-threads.md).
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "daemon/sandbox_service.h"
#include "daemon/sandbox_service_internal.h"
#include "jail/stage.h"
#include "sys/syscalls.h"

namespace corral::daemon {

namespace {

// epoll tokens: sandbox index in the low bits, what kind of fd in bit 0.
enum class Watch : std::uint64_t { kSpawn = 0, kInit = 1 };

}  // namespace

using namespace service_internal;

// One open and read, no streams: it runs on every process start.
pid_t service_internal::pid_of_pidfd(int pidfd, std::uint32_t* in_sandbox) {
  char path[48];
  snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
  UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return -1;
  char buf[1024];
  ssize_t n = read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return -1;
  buf[n] = '\0';
  if (in_sandbox != nullptr) {
    if (const char* ns = strstr(buf, "\nNSpid:"); ns != nullptr) {
      const char* end = strchr(ns + 1, '\n');
      if (end == nullptr) end = buf + n;
      const char* last = end;
      while (last > ns + 7 && (last[-1] == ' ' || last[-1] == '\t')) --last;
      while (last > ns + 7 && last[-1] >= '0' && last[-1] <= '9') --last;
      *in_sandbox = static_cast<std::uint32_t>(std::strtoul(last, nullptr, 10));
    }
  }
  const char* pid = strstr(buf, "\nPid:");  // never the first line ("pos:")
  return pid != nullptr ? static_cast<pid_t>(std::atoi(pid + 5)) : -1;
}

void SandboxService::watch(const std::shared_ptr<SandboxEntry>& e) {
  // Tokens: the entry's address with bit 0 telling spawn fd from pidfd.
  // The entry outlives its registration (unwatch runs before it is freed).
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 =
      reinterpret_cast<std::uint64_t>(e.get()) | static_cast<std::uint64_t>(Watch::kSpawn);
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, e->live->spawn_fd(), &ev);
  ev.data.u64 = reinterpret_cast<std::uint64_t>(e.get()) | static_cast<std::uint64_t>(Watch::kInit);
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, e->live->pidfd(), &ev);
}

void SandboxService::unwatch(const SandboxEntry& e) {
  if (!e.live) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, e.live->spawn_fd(), nullptr);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, e.live->pidfd(), nullptr);
}

void SandboxService::monitor_loop() {
  epoll_event events[64];
  while (!stopping_) {
    int n = epoll_wait(epoll_.get(), events, 64, 1000);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == ~0ULL) continue;  // wake
      auto* raw = reinterpret_cast<SandboxEntry*>(events[i].data.u64 & ~1ULL);
      const bool is_init = (events[i].data.u64 & 1ULL) != 0;
      std::shared_ptr<SandboxEntry> e = registry_.find_by_address(raw);
      if (!e || !e->live) continue;
      if (is_init) {
        on_init_exit(e);
        continue;
      }
      for (;;) {
        auto reply = e->live->read_reply();
        if (!reply) {
          // The zygote is gone: init follows it, and its pidfd will tell.
          epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, e->live->spawn_fd(), nullptr);
          break;
        }
        if (!*reply) break;
        on_reply(e, std::move(**reply));
      }
    }
  }
}

void SandboxService::on_reply(const std::shared_ptr<SandboxEntry>& e, ReceivedReply r) {
  if (r.reply.type == SpawnReplyType::kReady) return;
  std::shared_ptr<ProcessEntry> p;
  {
    std::lock_guard lock(e->mu);
    auto it = e->processes.find(r.reply.request_id);
    if (it != e->processes.end()) p = it->second;
  }
  if (!p) return;  // e.g. an exec whose request was abandoned
  std::lock_guard lock(p->mu);
  // Already ended: recorded as lost after a restart, or ended with its
  // sandbox. A late report changes nothing.
  if (p->finished()) return;
  switch (r.reply.type) {
    case SpawnReplyType::kStarted:
      p->pidfd = std::move(r.pidfd);
      p->host_pid = p->pidfd ? pid_of_pidfd(p->pidfd.get(), &p->ns_pid) : -1;
      if (p->phase == ProcessEntry::Phase::kStarting) p->phase = ProcessEntry::Phase::kRunning;
      if (p->pending_signal != 0 && p->pidfd) {
        if (p->host_pid > 0) kill(-p->host_pid, p->pending_signal);
        sys::pidfd_send_signal(p->pidfd.get(), p->pending_signal, nullptr, 0);
        p->pending_signal = 0;
      }
      if (p->background) {
        // Who it is on the host, for a daemon that restarts while it runs.
        // The start time is ours if the pidfd still names the same pid
        // after reading it (not yet reaped, so the pid is not reused).
        std::uint64_t start = p->host_pid > 0 ? process_start_time(p->host_pid) : 0;
        if (start != 0 && pid_of_pidfd(p->pidfd.get()) != p->host_pid) start = 0;
        if (start != 0)
          (void)store_.set_process_host(p->id, p->host_pid, start);
        else
          (void)store_.update_process(p->id, ProcessState::kRunning, std::nullopt, std::nullopt);
      }
      // The eventfd tells an exec's request of the end only: waking it now
      // would be a wasted round on the exec path. Waiters on cv hear it.
      p->cv.notify_all();
      break;
    case SpawnReplyType::kFailed: {
      const Stage stage = static_cast<Stage>(r.reply.stage);
      p->phase = ProcessEntry::Phase::kFailed;
      if (stage == Stage::kExec) {
        p->exit_code = r.reply.err == ENOENT ? 127 : 126;
        p->failure =
            std::string(r.reply.detail) + ": " +
            (r.reply.err == ENOENT ? "command not found in the sandbox" : strerror(r.reply.err));
      } else {
        p->exit_code = 125;
        p->failure = "process setup failed at stage " + std::string(stage_name(stage)) + " (" +
                     r.reply.detail + "): " + std::string(errno_name(r.reply.err));
      }
      finish_process(*e, *p);
      break;
    }
    case SpawnReplyType::kExited:
      p->phase = ProcessEntry::Phase::kExited;
      p->wait_status = r.reply.status;
      if (WIFEXITED(r.reply.status)) p->exit_code = WEXITSTATUS(r.reply.status);
      if (WIFSIGNALED(r.reply.status)) p->signal = WTERMSIG(r.reply.status);
      if (p->timed_out) p->exit_code = 124;
      finish_process(*e, *p);
      break;
    default:
      break;
  }
}

void SandboxService::on_init_exit(const std::shared_ptr<SandboxEntry>& e) {
  unwatch(*e);
  {
    std::lock_guard lock(e->mu);
    if (!takes_work(e->state)) return;  // a destroy of ours
    (void)transition(e.get(), e->id, SandboxState::kFailed,
                     "the sandbox's init exited (its zygote died or it was killed)");
  }
  // Tear down off the monitor thread (it waits on the kernel), on a thread
  // stop() joins: it uses the store, the network and the journal, which go
  // after stop() returns.
  std::unique_lock lock(teardowns_mu_);
  std::erase_if(teardowns_, [](TeardownThread& t) {
    if (!t.done->load()) return false;
    t.thread.join();  // it has returned from teardown(): only its exit is left
    return true;
  });
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread thread;
  try {
    thread = std::thread([this, e, done] {
      teardown(e, e->id, "init exited", true);
      done->store(true);
    });
  } catch (const std::system_error&) {
    // No thread to be had (EAGAIN): tear down here, on the monitor, rather
    // than let the exception end the daemon.
    lock.unlock();
    teardown(e, e->id, "init exited", true);
    return;
  }
  teardowns_.push_back(TeardownThread{std::move(thread), std::move(done)});
}

}  // namespace corral::daemon
