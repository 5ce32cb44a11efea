#include "runtime/sandbox_factory.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/api_model.h"
#include "base/environment.h"
#include "base/json_text.h"
#include "image/image_store.h"
#include "jail/cgroup.h"
#include "jail/launch.h"
#include "jail/sandbox_planner.h"

namespace corral {

namespace {

using nlohmann::json;

constexpr std::uint32_t kMaxFrame = 64u << 20;
constexpr int kReplyFds = 4;  // pidfd, control, spawn, layer

Status write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return errno_error("factory socket write");
    p += w;
    n -= static_cast<size_t>(w);
  }
  return ok();
}

Status read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return make_error(ErrorCode::kSystem, "the sandbox factory closed its socket");
    if (r < 0) return errno_error("factory socket read");
    p += r;
    n -= static_cast<size_t>(r);
  }
  return ok();
}

// One frame: u32 length, then the bytes; `fds` ride with the length.
Status send_frame(int sock, const std::string& body, const int* fds, int nfds) {
  std::uint32_t len = static_cast<std::uint32_t>(body.size());
  iovec iov{&len, sizeof len};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(kReplyFds * sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (nfds > 0) {
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE(static_cast<size_t>(nfds) * sizeof(int));
    cmsghdr* cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(static_cast<size_t>(nfds) * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, static_cast<size_t>(nfds) * sizeof(int));
  }
  ssize_t w;
  do {
    w = sendmsg(sock, &mh, MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  if (w != sizeof len) return errno_error("factory socket write");
  return write_all(sock, body.data(), body.size());
}

Result<std::string> recv_frame(int sock, std::vector<UniqueFd>* fds) {
  std::uint32_t len = 0;
  iovec iov{&len, sizeof len};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(kReplyFds * sizeof(int))];
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  ssize_t r;
  do {
    r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return make_error(ErrorCode::kSystem, "the sandbox factory closed its socket");
  if (r != sizeof len) return errno_error("factory socket read");
  for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      if (fds != nullptr)
        fds->emplace_back(fd);
      else
        close(fd);
    }
  }
  if (len > kMaxFrame) return make_error(ErrorCode::kResourceExhausted, "factory frame too large");
  std::string body(len, '\0');
  CORRAL_TRY(read_all(sock, body.data(), len));
  return body;
}

json options_to_json(const RunOptions& o) {
  return json{
      {"rootfs", o.base.rootfs},      {"env", o.base.env}, {"passwd_source", o.base.passwd_source},
      {"mount_roots", o.mount_roots}, {"cwd", o.cwd},      {"sandbox_id", o.sandbox_id},
      {"reserve_net_slot", o.network.reserve_slot}};
}

// The daemon's network settings, fixed when the factory is forked.
NetworkOptions& factory_network() {
  static NetworkOptions options;
  return options;
}

RunOptions options_from_json(const json& j) {
  RunOptions o;
  o.network = factory_network();
  o.base.rootfs = j.value("rootfs", "");
  o.base.env = j.value("env", std::vector<std::string>{});
  o.base.passwd_source = j.value("passwd_source", "");
  o.mount_roots = j.value("mount_roots", std::vector<std::string>{});
  o.cwd = j.value("cwd", "");
  o.sandbox_id = j.value("sandbox_id", "");
  o.network.reserve_slot = j.value("reserve_net_slot", false);
  o.long_lived = true;
  return o;
}

json failure_json(Stage stage, const Error& e) {
  return json{{"ok", false},
              {"stage", static_cast<int>(stage)},
              {"errno", e.sys_errno},
              {"message", e.message},
              {"hint", e.hint}};
}

// The factory's side of one request. Everything it opens is closed when
// this returns; init keeps its own copies of what the sandbox needs.
void serve_one(int sock, CgroupManager* manager, const std::string& request) {
  json req = json::parse(request, nullptr, false);
  auto spec_or = req.is_object() && req.contains("spec")
                     ? api::spec_from_json(json_text(req["spec"]))
                     : Result<SandboxSpec>(make_error(ErrorCode::kInternal, "bad factory request"));
  if (!spec_or) {
    (void)send_frame(sock, json_text(failure_json(Stage::kPlan, spec_or.error())), nullptr, 0);
    return;
  }
  RunOptions options = options_from_json(req.value("options", json::object()));
  Stage failed_stage = Stage::kPlan;
  auto prepared_or = prepare_sandbox(*spec_or, options, failed_stage);
  if (!prepared_or) {
    (void)send_frame(sock, json_text(failure_json(failed_stage, prepared_or.error())), nullptr, 0);
    return;
  }
  PreparedSandbox& prepared = **prepared_or;
  SandboxPlan& plan = prepared.plan;
  auto fail = [&](Stage stage, const Error& e) {
    (void)send_frame(sock, json_text(failure_json(stage, e)), nullptr, 0);
  };
  if (manager == nullptr) {
    return fail(Stage::kCgroup, Error{ErrorCode::kUnavailable, "no usable cgroup hierarchy",
                                      "run `corral doctor`", 0});
  }
  const SandboxSpec& spec = *spec_or;
  // The sandbox's stdio: its processes get theirs from the daemon.
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) return fail(Stage::kClone, Error{ErrorCode::kSystem, "open /dev/null", "", errno});
  for (int& fd : plan.stdio) fd = devnull.get();
  // An image in use cannot be removed (`corral image rm`): init holds its lock.
  UniqueFd image_lock;
  if (!spec.image.empty()) {
    auto lock = ImageStore(ImageStore::default_dir()).lock_shared(spec.image);
    if (!lock) return fail(Stage::kBaseLayer, lock.error());
    image_lock = std::move(*lock);
  }
  plan.deadline_ms = req.value("deadline_ms", std::int64_t{0});

  // The launcher sequence (jail/launch.h). The alive-lock is held by init
  // for the sandbox's whole life (`corral run`'s stale-cgroup reaper
  // leaves a locked sandbox alone). A failure leaves nothing behind; what
  // its undo could not remove, the daemon's teardown of the failed create
  // finds again by the sandbox's id (remove_unadopted), so it is not
  // reported from here.
  LaunchOptions launch_options;
  launch_options.cgroups = manager;
  launch_options.close_in_init = {sock};
  launch_options.image_lock_fd = image_lock.get();
  auto launched = launch_init(spec, prepared, launch_options);
  if (!launched) return fail(launched.error().stage, launched.error().error);
  LaunchedInit& init = *launched;
  const pid_t child = init.pid;
  Cgroup& cgroup = *init.cgroup;

  std::vector<std::string> env;
  for (char* const* e = plan.envp.data(); e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  json reply{
      {"ok", true},
      {"env", env},
      {"id", prepared.id},
      {"init_pid", child},
      {"init_start_time", process_start_time(child)},
      {"host_uid_base", prepared.uids->host_base()},
      {"cgroup", cgroup.name()},
      {"net_slot", prepared.network.slot ? static_cast<std::int64_t>(prepared.network.slot->index())
                                         : std::int64_t{-1}},
      {"reserved_net_slot", prepared.network.reserved
                                ? static_cast<std::int64_t>(prepared.network.reserved->index())
                                : std::int64_t{-1}},
      {"notices", prepared.notices}};
  UniqueFd layer_dup(fcntl(prepared.layer->mount_fd(), F_DUPFD_CLOEXEC, 3));
  const int fds[kReplyFds] = {init.pidfd.get(), init.control.get(), init.spawn.get(),
                              layer_dup.get()};
  if (auto st = send_frame(sock, json_text(reply), fds, kReplyFds); !st) {
    // The daemon is gone: nobody owns this sandbox, so it must not live.
    (void)undo_launch(init);
  }
}

[[noreturn]] void factory_main(int sock, pid_t daemon) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != daemon) _exit(0);
  prctl(PR_SET_NAME, "corral-factory");
  // The daemon's environment may hold secrets (serve.secrets.env): the
  // factory keeps only what it reads itself, and each init it clones wipes
  // the rest (run_init), so no sandbox process carries a copy.
  static constexpr std::string_view kFactoryEnv[] = {"CORRAL_RUN_DIR", "CORRAL_DATA_DIR", "PATH",
                                                     "TERM"};
  scrub_environment(kFactoryEnv, std::size(kFactoryEnv));
  // Inits are our children but the daemon watches them (pidfds): let the
  // kernel reap them.
  signal(SIGCHLD, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const int keep[] = {sock};
  close_fds_except(keep, 1);
  auto manager = CgroupManager::detect();
  for (;;) {
    auto request = recv_frame(sock, nullptr);
    if (!request) _exit(0);
    serve_one(sock, manager ? manager->get() : nullptr, *request);
    malloc_trim(0);  // inits forked later share a small heap
  }
}

}  // namespace

std::uint64_t process_start_time(pid_t pid) {
  // Plain read(2), not an istream: a process that has just exited makes the
  // read fail with ESRCH, which a filebuf turns into an exception that the
  // monitor thread does not catch (the daemon aborted). Unknown is 0.
  UniqueFd fd(open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return 0;
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(fd.get(), buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return 0;
  std::string text(buf, static_cast<std::size_t>(n));
  auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream rest(text.substr(close_paren + 2));
  std::string field;
  // Fields after "(comm)" start at 3 (state); start time is field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return 0;
  }
  return std::strtoull(field.c_str(), nullptr, 10);
}

Result<std::unique_ptr<SandboxFactory>> SandboxFactory::start(const NetworkOptions& network) {
  // Copied into the factory by the fork: templates included.
  static std::vector<net::NetworkTemplate> templates;
  templates = network.templates != nullptr ? *network.templates : net::default_network_templates();
  factory_network() = network;
  factory_network().templates = &templates;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return errno_error("socketpair(factory)");
  const pid_t daemon = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(sv[0]);
    close(sv[1]);
    return errno_error("fork(factory)", e);
  }
  if (pid == 0) {
    close(sv[0]);
    factory_main(sv[1], daemon);
  }
  close(sv[1]);
  return std::unique_ptr<SandboxFactory>(new SandboxFactory(UniqueFd(sv[0]), pid));
}

SandboxFactory::~SandboxFactory() {
  sock_.reset();  // the factory sees EOF and exits
  int status;
  waitpid(pid_, &status, 0);
}

Result<CreatedSandbox> SandboxFactory::create(const SandboxSpec& spec, const RunOptions& options,
                                              std::int64_t deadline_ms, SetupFailure* failure,
                                              std::chrono::milliseconds timeout) {
  json request{{"spec", json::parse(api::spec_to_json(spec))},
               {"options", options_to_json(options)},
               {"deadline_ms", deadline_ms}};
  std::vector<UniqueFd> fds;
  Result<std::string> reply_text = [&]() -> Result<std::string> {
    std::lock_guard lock(mu_);
    if (broken_)
      return make_error(ErrorCode::kUnavailable,
                        "the sandbox factory was stopped after it hung; no sandbox can be created",
                        "restart the daemon (its sandboxes are re-attached)");
    CORRAL_TRY(send_frame(sock_.get(), json_text(request), nullptr, 0));
    if (timeout.count() > 0) {
      pollfd p{sock_.get(), POLLIN, 0};
      int n;
      do {
        n = poll(&p, 1, static_cast<int>(std::min<std::int64_t>(timeout.count(), INT32_MAX)));
      } while (n < 0 && errno == EINTR);
      if (n == 0) {
        // Hung (a mount or a cgroup write that never returns): it cannot be
        // trusted with the next request, nor be re-forked from a daemon
        // with threads. Kill it; its half-made sandbox's init sees EOF on
        // its channel and ends.
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        sock_.reset();
        broken_ = true;
        return make_error(ErrorCode::kTimeout,
                          "the sandbox factory did not answer within " +
                              std::to_string(timeout.count()) + " ms, and was stopped",
                          "restart the daemon (its sandboxes are re-attached); raise "
                          "serve.setup_timeout if the host is just slow");
      }
    }
    return recv_frame(sock_.get(), &fds);
  }();
  if (!reply_text) {
    if (failure != nullptr)
      *failure = SetupFailure{Stage::kPlan, 0, reply_text.error().message, ""};
    return tl::unexpected(reply_text.error());
  }
  json reply = json::parse(*reply_text, nullptr, false);
  if (!reply.is_object())
    return make_error(ErrorCode::kInternal, "the sandbox factory sent a malformed reply");
  if (!reply.value("ok", false)) {
    Stage stage = static_cast<Stage>(reply.value("stage", 1));
    int err = reply.value("errno", 0);
    std::string message = reply.value("message", "");
    std::string hint = reply.value("hint", "");
    if (failure != nullptr) *failure = SetupFailure{stage, err, message, hint};
    Error e{ErrorCode::kSystem, message, hint, err};
    if (stage == Stage::kPlan) e.code = ErrorCode::kInvalidArgument;
    return tl::unexpected(e);
  }
  if (fds.size() != kReplyFds)
    return make_error(ErrorCode::kInternal, "the sandbox factory sent no channels");
  CreatedSandbox c;
  c.id = reply.value("id", "");
  c.init_pid = reply.value("init_pid", -1);
  c.init_start_time = reply.value("init_start_time", std::uint64_t{0});
  c.host_uid_base = reply.value("host_uid_base", 0u);
  c.cgroup = reply.value("cgroup", "");
  c.net_slot = reply.value("net_slot", std::int64_t{-1});
  c.reserved_net_slot = reply.value("reserved_net_slot", std::int64_t{-1});
  c.notices = reply.value("notices", std::vector<std::string>{});
  c.env = reply.value("env", std::vector<std::string>{});
  c.pidfd = std::move(fds[0]);
  c.control = std::move(fds[1]);
  c.spawn = std::move(fds[2]);
  c.layer = std::move(fds[3]);
  return c;
}

}  // namespace corral
