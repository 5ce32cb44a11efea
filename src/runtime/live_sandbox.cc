#include "runtime/live_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/paths.h"
#include "jail/sandbox_plan.h"
#include "jail/stage.h"
#include "sys/syscalls.h"

namespace corral {

namespace {

using Clock = std::chrono::steady_clock;

std::string describe(Stage stage, int err, const char* detail) {
  std::string m = "sandbox setup failed at stage " + std::string(stage_name(stage));
  if (detail != nullptr && detail[0] != '\0') m += " (" + std::string(detail) + ")";
  if (err != 0) m += ": " + std::string(errno_name(err)) + " (" + strerror(err) + ")";
  return m;
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

}  // namespace

// A sandbox the daemon cannot account for does not run: without its
// cgroup there are no stats and no verified removal of its processes,
// without its layer no wipe and no file API. adopt() and attach() fail
// closed when either cannot be opened: init is killed here (its pidfd is
// the only handle on it), and the caller's cleanup by id
// (SandboxService::remove_unadopted) removes what is left.
Result<std::unique_ptr<LiveSandbox>> LiveSandbox::adopt(CreatedSandbox created,
                                                        CgroupManager& cgroups) {
  std::unique_ptr<LiveSandbox> s(new LiveSandbox());
  s->identity_ = {created.id, created.init_pid, created.init_start_time, created.host_uid_base,
                  created.cgroup};
  s->pidfd_ = std::move(created.pidfd);
  s->control_ = std::move(created.control);
  s->spawn_ = std::move(created.spawn);
  auto layer = WritableLayer::adopt(std::move(created.layer));
  if (!layer) return s->give_up("its writable layer", layer.error());
  s->layer_.emplace(std::move(*layer));
  auto cg = cgroups.open(created.cgroup);
  if (!cg) return s->give_up("its cgroup", cg.error());
  s->cgroup_ = std::move(*cg);
  return s;
}

Result<std::unique_ptr<LiveSandbox>> LiveSandbox::attach(const LiveSandboxIdentity& identity,
                                                         CgroupManager& cgroups) {
  std::unique_ptr<LiveSandbox> s(new LiveSandbox());
  s->identity_ = identity;
  UniqueFd pidfd(identity.init_pid > 0 ? sys::pidfd_open(identity.init_pid, 0) : -1);
  // The pid may have been reused since: the start time tells.
  if (!pidfd || process_start_time(identity.init_pid) != identity.init_start_time)
    return make_error(ErrorCode::kNotFound, "the init of sandbox " + identity.id + " is gone");
  s->pidfd_ = std::move(pidfd);
  auto cg = cgroups.open(identity.cgroup);
  if (!cg) return s->give_up("its cgroup", cg.error());
  s->cgroup_ = std::move(*cg);
  UniqueFd control(sys::pidfd_getfd(s->pidfd_.get(), kInitHeldControlFd, 0));
  UniqueFd spawn(sys::pidfd_getfd(s->pidfd_.get(), kInitHeldSpawnFd, 0));
  UniqueFd layer(sys::pidfd_getfd(s->pidfd_.get(), kInitHeldLayerFd, 0));
  if (!control || !spawn || !layer)
    return errno_error("pidfd_getfd(init of " + identity.id + ")", errno,
                       "the kernel refused to hand over the sandbox's channels (Yama "
                       "ptrace_scope 3?); the sandbox will be destroyed");
  s->control_ = std::move(control);
  s->spawn_ = std::move(spawn);
  auto l = WritableLayer::adopt(std::move(layer));
  if (!l) return tl::unexpected(l.error());
  s->layer_.emplace(std::move(*l));
  return s;
}

tl::unexpected<Error> LiveSandbox::give_up(const char* what, const Error& why) {
  std::string message = "sandbox " + id() + ": " + what + " cannot be opened (" + why.message +
                        "); the sandbox is destroyed";
  for (const std::string& left : destroy().residue) message += "; left: " + left;
  return tl::unexpected(Error{ErrorCode::kSystem, std::move(message), why.hint, why.sys_errno});
}

LiveSandbox::~LiveSandbox() = default;

bool LiveSandbox::init_alive() const { return pidfd_ && !readable(pidfd_.get()); }

Status LiveSandbox::wait_ready(std::chrono::milliseconds timeout, SetupFailure* failure) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      if (failure) *failure = SetupFailure{Stage::kExec, ETIMEDOUT, "sandbox setup timed out", ""};
      return make_error(ErrorCode::kTimeout, "sandbox setup did not finish within " +
                                                 std::to_string(timeout.count()) + " ms");
    }
    pollfd fds[3] = {{spawn_.get(), POLLIN, 0}, {control_.get(), POLLIN, 0},
                     {pidfd_.get(), POLLIN, 0}};
    if (poll(fds, 3, static_cast<int>(left.count())) < 0 && errno != EINTR)
      return errno_error("poll(sandbox setup)");
    if (fds[1].revents & POLLIN) {
      ControlMessage msg{};
      ssize_t n = recv(control_.get(), &msg, sizeof msg, MSG_DONTWAIT);
      if (n == sizeof msg && msg.type == ControlType::kFailure) {
        msg.detail[sizeof msg.detail - 1] = '\0';
        Stage stage = static_cast<Stage>(msg.stage);
        std::string m = describe(stage, msg.err, msg.detail);
        std::string hint(stage_hint(stage, msg.err));
        if (failure) *failure = SetupFailure{stage, msg.err, m, hint};
        Error e{ErrorCode::kSystem, m, hint, msg.err};
        return tl::unexpected(e);
      }
    }
    if (fds[0].revents & POLLIN) {
      auto reply = read_reply();
      if (!reply) return tl::unexpected(reply.error());
      if (*reply && (*reply)->reply.type == SpawnReplyType::kReady) return ok();
    }
    if ((fds[2].revents & POLLIN) && !(fds[1].revents & POLLIN)) {
      if (readable(control_.get())) continue;  // its last words first
      if (failure) *failure = SetupFailure{Stage::kClone, 0, "the sandbox's init died during setup", ""};
      return make_error(ErrorCode::kSystem, "the sandbox's init died during setup");
    }
  }
}

Status LiveSandbox::send_spawn(const SpawnRequest& request, const int stdio[3]) {
  auto bytes = encode_spawn_request(request);
  if (!bytes) return tl::unexpected(bytes.error());
  iovec iov{bytes->data(), bytes->size()};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  cmsghdr* cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(3 * sizeof(int));
  memcpy(CMSG_DATA(cm), stdio, 3 * sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(spawn_.get(), &mh, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(bytes->size()))
    return errno_error("sending a spawn request to sandbox " + id());
  return ok();
}

Status LiveSandbox::send_barrier(std::uint64_t request_id) {
  SpawnRequest request;
  request.request_id = request_id;
  request.argv = {"true"};  // never started: the message carries no fds
  auto bytes = encode_spawn_request(request);
  if (!bytes) return tl::unexpected(bytes.error());
  ssize_t n;
  do {
    // Never blocks: a zygote that reads nothing must not stop the caller.
    n = send(spawn_.get(), bytes->data(), bytes->size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(bytes->size()))
    return errno_error("sending a barrier to sandbox " + id());
  return ok();
}

Result<std::optional<ReceivedReply>> LiveSandbox::read_reply() {
  ReceivedReply r;
  iovec iov{&r.reply, sizeof r.reply};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  ssize_t n = recvmsg(spawn_.get(), &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return std::optional<ReceivedReply>();
  if (n == 0) return make_error(ErrorCode::kSystem, "the sandbox's zygote is gone");
  if (n < 0) return errno_error("reading from sandbox " + id());
  for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm), sizeof fd);
      r.pidfd = UniqueFd(fd);
    }
  }
  if (n != sizeof r.reply) return std::optional<ReceivedReply>();  // not ours: ignore
  r.reply.detail[sizeof r.reply.detail - 1] = '\0';
  return std::optional<ReceivedReply>(std::move(r));
}

void LiveSandbox::set_deadline(std::int64_t deadline_ms) {
  ControlMessage msg{};
  msg.type = ControlType::kExtend;
  msg.deadline_ms = deadline_ms;
  (void)send(control_.get(), &msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

Result<CgroupStats> LiveSandbox::stats() const {
  if (!cgroup_) return make_error(ErrorCode::kNotFound, "sandbox " + id() + " has no cgroup");
  return cgroup_->stats();
}

Result<LayerUsage> LiveSandbox::disk_usage() const {
  if (!layer_) return make_error(ErrorCode::kNotFound, "sandbox " + id() + " has no layer");
  return layer_->usage();
}

std::string LiveSandbox::root_path() const {
  return "/proc/" + std::to_string(identity_.init_pid) + "/root";
}

DestroyReport LiveSandbox::destroy() {
  DestroyReport report;
  if (cgroup_) {
    if (auto st = cgroup_->stats(); st) report.final_stats = *st;
  }
  if (pidfd_) {
    sys::pidfd_send_signal(pidfd_.get(), SIGKILL, nullptr, 0);
    pollfd p{pidfd_.get(), POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) report.residue.push_back("init of " + id() + " did not exit");
  }
  if (cgroup_) {
    if (auto st = cgroup_->destroy(); !st) report.residue.push_back(st.error().message);
  }
  // The handles stay open (the destructor closes them): see destroy() in
  // the header.
  if (layer_) {
    if (auto usage = layer_->usage(); usage) report.disk_used_bytes = usage->bytes;
    if (auto wiped = layer_->wipe(); wiped) {
      report.residue_bytes = wiped->bytes;
      if (wiped->bytes != 0)
        report.residue.push_back("writable layer still holds " + std::to_string(wiped->bytes) +
                                 " bytes after wipe");
    } else {
      report.residue.push_back(wiped.error().message);
    }
  }
  const std::string lock_path = run_dir() + "/sandboxes/" + id() + ".lock";
  if (unlink(lock_path.c_str()) != 0 && errno != ENOENT)
    report.residue.push_back("file " + lock_path);
  return report;
}

}  // namespace corral
