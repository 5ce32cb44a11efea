// LocalProvider: the daemon's SandboxService, wired as daemon_main.cc wires
// it, called directly. exec and the file transfers follow the daemon's
// handlers (daemon/exec_api.cc handle_exec, daemon/file_api.cc
// handle_file_upload / handle_file_download) step for step: same pipes and
// drain rule, limits, and (from daemon/file_ops.h, shared) the same confined
// root, file owner, error mapping and audit records. The transfer loops are
// copies; the daemon's are bound to an HTTP request and response.
#include "sdk/local_provider.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/paths.h"
#include "base/sha256.h"
#include "daemon/daemon_config.h"
#include "daemon/file_ops.h"
#include "daemon/metrics.h"
#include "daemon/sandbox_service.h"
#include "fs/confined_root.h"
#include "jail/cgroup.h"
#include "jail/fs_util.h"
#include "runtime/sandbox_factory.h"
#include "store/audit_log.h"
#include "store/state_store.h"

namespace corral::sdk {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr std::size_t kChunk = 64 * 1024;     // exec_api.cc
constexpr std::size_t kFileBuffer = 1 << 20;  // file_api.cc

struct Pipe {
  UniqueFd read, write;
};

Result<Pipe> make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return errno_error("pipe2");
  Pipe p{UniqueFd(fds[0]), UniqueFd(fds[1])};
  (void)fcntl(p.read.get(), F_SETPIPE_SZ, 1 << 20);
  return p;
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

tl::unexpected<Error> api_error(const api::ApiError& e) {
  return tl::unexpected(error_from_api(e));
}

tl::unexpected<Error> api_error(api::ApiErrorCode code, std::string message,
                                std::string hint = {}) {
  return api_error(api::make_api_error(code, std::move(message), {}, std::move(hint)));
}

// Threads of this process, from /proc/self/status (0 if unknown).
int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return 0;
}

}  // namespace

struct LocalProvider::State {
  LocalOptions options;
  std::unique_ptr<SandboxFactory> factory;
  std::optional<StateStore> store;
  std::optional<AuditLog> audit;
  std::unique_ptr<CgroupManager> cgroups;
  MetricsRegistry metrics;
  std::uint64_t max_exec_output = 0;
  // Last: stopped and destroyed before what it uses.
  std::unique_ptr<daemon::SandboxService> service;
};

LocalProvider::LocalProvider(std::unique_ptr<State> state) : state_(std::move(state)) {}

LocalProvider::~LocalProvider() {
  if (!state_ || !state_->service) return;
  if (state_->options.destroy_on_close) {
    if (auto list = state_->service->list(); list) {
      for (const auto& info : *list) {
        if (info.state != "cleaned")
          (void)state_->service->destroy(info.id, "LocalProvider closed");
      }
    }
  }
  state_->service->stop();
}

daemon::SandboxService& LocalProvider::service() { return *state_->service; }
const std::string& LocalProvider::data_dir() const { return state_->options.data_dir; }

Result<std::unique_ptr<LocalProvider>> LocalProvider::open(LocalOptions options) {
  if (geteuid() != 0)
    return make_error(ErrorCode::kPermissionDenied, "LocalProvider must run as root",
                      "it creates namespaces, cgroups and mounts; or use RemoteProvider with a "
                      "corral serve daemon");
  if (options.data_dir.empty() || options.data_dir[0] != '/')
    return make_error(ErrorCode::kInvalidArgument,
                      "LocalProvider needs an absolute data_dir, not \"" + options.data_dir + "\"",
                      "give it a private directory (state, audit log, images)");
  if (int n = thread_count(); n > 1)
    return make_error(
        ErrorCode::kInvalidArgument,
        "LocalProvider::open() was called with " + std::to_string(n) + " threads running",
        "call it first thing in main(), before anything starts a thread: it forks "
        "the sandbox factory");

  DaemonConfig config = default_daemon_config();
  config.data_dir = options.data_dir;
  config.max_sandboxes = options.max_sandboxes;
  config.max_memory_bytes = options.max_memory_bytes;
  config.max_disk_bytes = options.max_disk_bytes;
  config.max_exec_output_bytes = options.max_exec_output_bytes;
  CORRAL_TRY(resolve_capacity(config));

  // As corral serve: data_dir() is the one source of truth for images and
  // the host base, in this process and in the factory forked below.
  setenv("CORRAL_DATA_DIR", config.data_dir.c_str(), 1);
  CORRAL_TRY(mkdir_p(config.data_dir, 0700));
  CORRAL_TRY(mkdir_p(run_dir(), 0700));
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);

  auto state = std::make_unique<State>();
  state->options = options;
  state->max_exec_output = config.max_exec_output_bytes;
  auto factory = SandboxFactory::start();
  if (!factory)
    return tl::unexpected(std::move(factory).error().wrap("starting the sandbox factory"));
  state->factory = std::move(*factory);
  auto store = StateStore::open(config.data_dir + "/state.db");
  if (!store) return tl::unexpected(std::move(store).error());
  state->store.emplace(std::move(*store));
  auto audit = AuditLog::open(config.data_dir + "/audit.log");
  if (!audit) return tl::unexpected(std::move(audit).error());
  state->audit.emplace(std::move(*audit));
  auto cgroups = CgroupManager::detect();
  if (!cgroups) return tl::unexpected(std::move(cgroups).error());
  state->cgroups = std::move(*cgroups);

  daemon::ServiceLimits limits;
  limits.max_sandboxes = config.max_sandboxes;
  limits.max_memory_bytes = config.max_memory_bytes;
  limits.max_disk_bytes = config.max_disk_bytes;
  state->service = std::make_unique<daemon::SandboxService>(
      limits, config.default_spec, *state->store, *state->audit, *state->factory, *state->cgroups,
      state->metrics);
  daemon::SandboxService* service = state->service.get();
  state->metrics.gauge_fn("corral_sandboxes_live", "Sandboxes alive now",
                          [service] { return static_cast<double>(service->live_count()); });
  (void)state->service->start();
  return std::unique_ptr<LocalProvider>(new LocalProvider(std::move(state)));
}

// ---- sandboxes --------------------------------------------------------------------

Result<api::SandboxInfo> LocalProvider::create_sandbox(const api::CreateSandboxRequest& request,
                                                       std::optional<std::string> idempotency_key) {
  if (idempotency_key && (idempotency_key->empty() || idempotency_key->size() > 200))
    return api_error(api::ApiErrorCode::kInvalidValue,
                     "Idempotency-Key must be 1 to 200 characters");
  // Through the API codec, as the daemon's handler does with a request body.
  auto parsed = api::parse_create_sandbox(api::to_json(request));
  if (!parsed) return api_error(api::to_api_error(parsed.error()));
  auto created = state_->service->create(*parsed, std::move(idempotency_key));
  if (!created) return api_error(created.error());
  return created->info;
}

Result<api::SandboxInfo> LocalProvider::inspect(std::string_view id) {
  auto info = state_->service->get(id);
  if (!info) return api_error(info.error());
  return *info;
}

Result<std::vector<api::SandboxInfo>> LocalProvider::list(bool include_cleaned) {
  auto list = state_->service->list();
  if (!list) return api_error(list.error());
  std::vector<api::SandboxInfo> shown;
  for (auto& info : *list) {
    if (include_cleaned || info.state != "cleaned") shown.push_back(std::move(info));
  }
  return shown;
}

Result<api::SandboxInfo> LocalProvider::destroy_sandbox(std::string_view id) {
  auto info = state_->service->destroy(id, "destroyed through the SDK");
  if (!info) return api_error(info.error());
  return *info;
}

// ---- exec (as daemon/exec_api.cc handle_exec) ------------------------------------

Result<api::ExecResult> LocalProvider::exec(std::string_view id, const api::ExecRequest& request) {
  return run_exec(id, request, nullptr);
}

Result<api::ExecResult> LocalProvider::exec_stream(std::string_view id,
                                                   const api::ExecRequest& request,
                                                   const OutputSink& sink) {
  return run_exec(id, request, &sink);
}

Result<api::ExecResult> LocalProvider::run_exec(std::string_view id,
                                                const api::ExecRequest& request_in,
                                                const OutputSink* sink) {
  // Through the API codec, so a request is checked exactly as the daemon
  // checks one that came over HTTP (names, bounds, argv or cmd).
  auto parsed = api::parse_exec(api::to_json(request_in));
  if (!parsed) return api_error(api::to_api_error(parsed.error()));
  api::ExecRequest request = std::move(*parsed);
  if (request.max_output_bytes > state_->max_exec_output)
    request.max_output_bytes = state_->max_exec_output;
  daemon::SandboxService& service = *state_->service;
  auto sandbox = service.live(id);
  if (!sandbox) return api_error(sandbox.error());

  auto out = make_pipe();
  auto err = make_pipe();
  auto in = make_pipe();
  if (!out || !err || !in)
    return api_error(api::ApiErrorCode::kInternal, "could not make pipes for the process");
  UniqueFd stdio[3] = {std::move(in->read), std::move(out->write), std::move(err->write)};
  UniqueFd stdin_w = std::move(in->write);
  if (request.stdin_data.empty()) stdin_w.reset();  // EOF at once
  auto proc = service.spawn(*sandbox, request, false, stdio);
  if (!proc) return api_error(proc.error());
  daemon::ProcessEntry& p = **proc;

  set_nonblocking(out->read.get());
  set_nonblocking(err->read.get());
  if (stdin_w) set_nonblocking(stdin_w.get());

  api::ExecResult result;
  result.process_id = p.id;
  std::size_t stdin_off = 0;
  bool out_open = true, err_open = true;
  std::optional<Clock::time_point> drain_until;
  std::string buf(kChunk, '\0');

  auto emit = [&](api::ExecEvent::Kind kind, std::string_view data) {
    if (sink != nullptr) {
      if (*sink) (*sink)(kind, data);
      return;
    }
    std::string& dst = kind == api::ExecEvent::kStdout ? result.stdout_data : result.stderr_data;
    bool& cut = kind == api::ExecEvent::kStdout ? result.stdout_truncated : result.stderr_truncated;
    std::size_t room =
        request.max_output_bytes > dst.size() ? request.max_output_bytes - dst.size() : 0;
    if (data.size() > room) cut = true;
    dst.append(data.substr(0, std::min(room, data.size())));
  };

  for (;;) {
    bool finished;
    {
      std::lock_guard lock(p.mu);
      finished = p.finished();
    }
    if (finished && !out_open && !err_open) break;
    if (finished && !drain_until) drain_until = Clock::now() + std::chrono::milliseconds(200);
    // A finished command's pipes may stay open in a detached grandchild:
    // give them a moment, then stop listening.
    if (drain_until && Clock::now() >= *drain_until) break;
    pollfd fds[4] = {{out_open ? out->read.get() : -1, POLLIN, 0},
                     {err_open ? err->read.get() : -1, POLLIN, 0},
                     {p.event.get(), POLLIN, 0},
                     {stdin_w ? stdin_w.get() : -1, POLLOUT, 0}};
    int timeout = drain_until ? 20 : 1000;
    if (poll(fds, 4, timeout) < 0 && errno != EINTR) break;
    if (fds[2].revents & POLLIN) {
      std::uint64_t v;
      (void)!read(p.event.get(), &v, sizeof v);
    }
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
      int fd = i == 0 ? out->read.get() : err->read.get();
      for (;;) {
        ssize_t n = read(fd, buf.data(), buf.size());
        if (n > 0) {
          emit(i == 0 ? api::ExecEvent::kStdout : api::ExecEvent::kStderr,
               std::string_view(buf.data(), static_cast<size_t>(n)));
          if (static_cast<size_t>(n) < buf.size()) break;
          continue;
        }
        if (n == 0) (i == 0 ? out_open : err_open) = false;
        break;
      }
    }
    if (stdin_w && (fds[3].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = write(stdin_w.get(), request.stdin_data.data() + stdin_off,
                        request.stdin_data.size() - stdin_off);
      if (n > 0) stdin_off += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN) stdin_w.reset();
      if (stdin_off >= request.stdin_data.size()) stdin_w.reset();
    }
  }
  {
    std::unique_lock lock(p.mu);
    p.cv.wait_for(lock, std::chrono::seconds(10), [&] { return p.finished(); });
    result.exit_code = p.exit_code;
    result.signal = p.signal;
    result.timed_out = p.timed_out;
    if (p.phase == daemon::ProcessEntry::Phase::kFailed && !p.failure.empty()) {
      if (sink != nullptr) {
        if (*sink) (*sink)(api::ExecEvent::kStderr, "corral: " + p.failure + "\n");
      } else {
        result.stderr_data += "corral: " + p.failure + "\n";
      }
    }
    result.duration_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - p.started).count();
  }
  return result;
}

// ---- files (as daemon/file_api.cc) -------------------------------------------------

namespace {

// Leased, as the daemon's handlers are: a destroy waits for the root and
// the files opened in it to be closed (daemon/sandbox_lease.h).
struct Target {
  daemon::SandboxLease lease;
  std::shared_ptr<daemon::SandboxEntry> sandbox;
  std::optional<ConfinedRoot> root;
};

Result<Target> open_target(daemon::SandboxService& service, std::string_view id) {
  auto lease = service.lease(id);
  if (!lease) return api_error(lease.error());
  Target t{std::move(*lease), nullptr, std::nullopt};
  t.sandbox = t.lease.sandbox();
  auto root = daemon::open_sandbox_root(service, *t.sandbox);
  if (!root) return api_error(root.error());
  t.root.emplace(std::move(*root));
  return t;
}

// Audits a refused operation, then returns its error (through the
// sandbox's redactor, as the daemon answers it).
tl::unexpected<Error> refused(daemon::SandboxService& service, const Target& t, std::string_view op,
                              std::string_view path, const api::ApiError& e,
                              json extra = json::object()) {
  daemon::audit_refused(service, t.sandbox->id, op, path, e, std::move(extra));
  return api_error(daemon::FileRedactor(service, t.sandbox->id).error(e));
}

}  // namespace

Result<api::UploadResult> LocalProvider::put_file_from(std::string_view id, std::string_view path,
                                                       const ByteSource& source,
                                                       std::optional<std::uint64_t> length,
                                                       std::uint32_t mode) {
  if (path.empty())
    return api_error(api::ApiErrorCode::kInvalidValue, "the path is required",
                     "e.g. /workspace/file.txt");
  if (mode > 0777)
    return api_error(api::ApiErrorCode::kInvalidValue, "mode must be octal, 0 to 0777");
  daemon::SandboxService& service = *state_->service;
  auto t = open_target(service, id);
  if (!t) return tl::unexpected(std::move(t).error());
  WriteOptions options;
  options.mode = static_cast<mode_t>(mode);
  auto fd = t->root->open_write(path, options);
  if (!fd)
    return refused(service, *t, "write", path, daemon::file_error(fd.error()), {{"bytes", 0}});
  const uid_t uid = daemon::file_owner(*t->sandbox);
  if (fchown(fd->get(), uid, uid) != 0)
    return refused(service, *t, "write", path,
                   api::make_api_error(api::ApiErrorCode::kInternal,
                                       "fchown: " + std::string(strerror(errno))),
                   {{"bytes", 0}});
  Sha256 hash;
  std::uint64_t total = 0;
  std::string buf(kFileBuffer, '\0');
  for (;;) {
    auto n = source(buf.data(), buf.size());
    if (!n) {
      (void)ftruncate(fd->get(), 0);
      Error why = std::move(n).error().wrap("upload source");
      daemon::audit_refused(service, t->sandbox->id, "write", path, api::to_api_error(why),
                            {{"bytes", total}});
      return tl::unexpected(std::move(why));
    }
    if (*n == 0) break;
    if (length && *n > *length - total) {
      (void)ftruncate(fd->get(), 0);
      return refused(service, *t, "write", path,
                     api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                         "upload source produced more than the declared " +
                                             std::to_string(*length) + " bytes"),
                     {{"bytes", total}});
    }
    hash.update(buf.data(), *n);
    if (auto err = daemon::write_upload_chunk(fd->get(), std::string_view(buf.data(), *n), total)) {
      (void)ftruncate(fd->get(), 0);  // give the space back
      return refused(service, *t, "write", path, *err, {{"bytes", total}});
    }
  }
  if (length && total != *length) {
    (void)ftruncate(fd->get(), 0);
    return refused(service, *t, "write", path,
                   api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                       "upload source ended " + std::to_string(*length - total) +
                                           " bytes short of the declared length"),
                   {{"bytes", total}});
  }
  api::UploadResult result;
  result.path = daemon::FileRedactor(service, t->sandbox->id).text(path);
  result.bytes = total;
  result.sha256 = Sha256::hex(hash.final());
  daemon::audit_file(service, t->sandbox->id, "write", path,
                     {{"bytes", total}, {"sha256", result.sha256}});
  return result;
}

Result<std::uint64_t> LocalProvider::get_file_to(std::string_view id, std::string_view path,
                                                 const ByteSink& sink) {
  if (path.empty())
    return api_error(api::ApiErrorCode::kInvalidValue, "the path is required",
                     "e.g. /workspace/file.txt");
  daemon::SandboxService& service = *state_->service;
  auto t = open_target(service, id);
  if (!t) return tl::unexpected(std::move(t).error());
  auto fd = t->root->open_read(path);
  if (!fd) return refused(service, *t, "read", path, daemon::file_error(fd.error()));
  struct stat st;
  if (fstat(fd->get(), &st) != 0)
    return refused(service, *t, "read", path,
                   api::make_api_error(api::ApiErrorCode::kInternal, "fstat failed"));
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  Sha256 hash;
  std::uint64_t sent = 0;
  std::string buf(kFileBuffer, '\0');
  Status sink_status;
  // Exactly the size it had when opened: a file that grows meanwhile is cut there.
  while (sent < size) {
    ssize_t n = read(fd->get(), buf.data(), std::min<std::uint64_t>(buf.size(), size - sent));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    hash.update(buf.data(), static_cast<size_t>(n));
    sink_status = sink(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!sink_status) break;
    sent += static_cast<std::uint64_t>(n);
  }
  daemon::audit_file(
      service, t->sandbox->id, "read", path,
      {{"bytes", sent}, {"sha256", Sha256::hex(hash.final())}, {"complete", sent == size}});
  if (!sink_status) return tl::unexpected(sink_status.error());
  if (sent != size)
    return make_error(ErrorCode::kSystem,
                      "reading " + std::string(path) + " ended after " + std::to_string(sent) +
                          " of " + std::to_string(size) + " bytes",
                      "the file shrank while it was read");
  return sent;
}

}  // namespace corral::sdk
