// Handlers of exec (wait or stream) and of background processes. An exec's
// stdio are pipes whose other ends went to the zygote (fd passing): the
// process writes straight into the daemon. A background process writes into
// files on its sandbox's own writable layer (out of the sandbox's view, and
// counted against its disk limit), so it keeps running, and its output
// keeps its offsets, whatever happens to the request or to the daemon.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <optional>

#include "daemon/api_context.h"
#include "daemon/background_process.h"
#include "daemon/sandbox_service.h"
#include "secrets/redactor.h"

namespace corral::daemon {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kChunk = 64 * 1024;

struct Pipe {
  UniqueFd read, write;
};

// Pipes start at the kernel's default size (64 KiB): most commands write
// less, and a 1 MiB ring costs an allocation on every exec. A pipe that
// fills up is grown then (grow_pipe).
Result<Pipe> make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return errno_error("pipe2");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// Bigger pipes: fewer wakeups for chatty commands.
void grow_pipe(int fd) { (void)fcntl(fd, F_SETPIPE_SZ, 1 << 20); }

// Where to cut `data` to at most `room` bytes without splitting a UTF-8
// sequence at the end: a text output cut to its limit stays text, not
// base64 because of its last character. Other bytes are cut at `room`.
std::size_t utf8_cut(std::string_view data, std::size_t room) {
  if (room >= data.size()) return room;
  std::size_t keep = room, continuation = 0;
  while (continuation < 3 && keep > 0 &&
         (static_cast<unsigned char>(data[keep - 1]) & 0xC0) == 0x80) {
    --keep;
    ++continuation;
  }
  if (keep == 0) return room;
  const auto lead = static_cast<unsigned char>(data[keep - 1]);
  if (lead < 0xC0) return room;
  const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  return continuation + 1 < length ? keep - 1 : room;
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::string process_state_of(const ProcessEntry& p) {
  switch (p.phase) {
    case ProcessEntry::Phase::kStarting:
      return "starting";
    case ProcessEntry::Phase::kRunning:
      return "running";
    default:
      return "exited";
  }
}

api::ProcessInfo info_of(SandboxEntry& sandbox, ProcessEntry& p) {
  api::ProcessInfo info;
  info.id = p.id;
  info.sandbox_id = p.sandbox_id;
  info.argv = p.argv;
  std::lock_guard lock(p.mu);
  info.state = process_state_of(p);
  info.exit_code = p.exit_code;
  info.signal = p.signal;
  info.timed_out = p.timed_out;
  info.started_at_ms = p.started_at_ms;
  if (p.finished()) info.ended_at_ms = p.ended_at_ms;
  if (sandbox.live && p.background) {
    struct stat st;
    if (fstatat(sandbox.live->layer_root_fd(), process_output_name(p.id, "stdout").c_str(), &st, 0) == 0)
      info.stdout_bytes = static_cast<std::uint64_t>(st.st_size);
    if (fstatat(sandbox.live->layer_root_fd(), process_output_name(p.id, "stderr").c_str(), &st, 0) == 0)
      info.stderr_bytes = static_cast<std::uint64_t>(st.st_size);
  }
  return info;
}

ApiResult<std::shared_ptr<SandboxEntry>> live_or_fail(ApiContext& ctx, ApiRequest& r) {
  auto e = ctx.sandboxes.live(r.params[0]);
  if (!e) send_error(r.out, e.error());
  return e;
}

// The same, leased (sandbox_lease.h) by a request that opens files on the
// sandbox's layer; `connection` >= 0: a stream a teardown cuts off.
std::optional<SandboxLease> lease_or_fail(ApiContext& ctx, ApiRequest& r, int connection = -1) {
  auto lease = ctx.sandboxes.lease(r.params[0], connection);
  if (!lease) {
    send_error(r.out, lease.error());
    return std::nullopt;
  }
  return std::move(*lease);
}

std::shared_ptr<ProcessEntry> process_or_fail(ApiContext& ctx, ApiRequest& r, SandboxEntry& s) {
  auto p = ctx.sandboxes.find_process(s, r.params[1]);
  if (!p)
    send_error(r.out, api::make_api_error(api::ApiErrorCode::kNotFound,
                                          "no process \"" + r.params[1] + "\" in sandbox " + s.id,
                                          "", "list them with GET /v1/sandboxes/{id}/processes"));
  return p;
}

std::string sse(const std::string& json_line) { return "data: " + json_line + "\n\n"; }

}  // namespace

// ---- exec -------------------------------------------------------------------------

namespace {

// The exec's request, with its output bound to the daemon's limit; or
// answered with the error.
std::optional<api::ExecRequest> read_exec_request(ApiContext& ctx, ApiRequest& r) {
  auto body = read_json_body(r, ctx.limits.max_exec_body);
  if (!body) {
    send_error(r.out, body.error());
    return std::nullopt;
  }
  auto request = api::parse_exec(*body);
  if (!request) {
    send_error(r.out, api::to_api_error(request.error()));
    return std::nullopt;
  }
  if (request->max_output_bytes > ctx.limits.max_exec_output)
    request->max_output_bytes = ctx.limits.max_exec_output;
  return std::move(*request);
}

// "ndjson", "sse", or "" (one JSON answer at the end): the request's
// `stream`, else what the client accepts.
std::string stream_mode(const api::ExecRequest& request, const ApiRequest& r) {
  std::string mode = request.stream;
  if (mode.empty()) {
    auto accept = r.head.header("accept").value_or("");
    if (accept.find("application/x-ndjson") != std::string_view::npos) mode = "ndjson";
    if (accept.find("text/event-stream") != std::string_view::npos) mode = "sse";
  }
  return mode;
}

// One exec after its spawn: its output read as it comes, redacted, kept
// (or streamed), its stdin written, until it ends and its pipes close;
// then the answer. It lives only as long as its request.
class ExecRun {
 public:
  ExecRun(ApiContext& ctx, ApiRequest& r, const api::ExecRequest& request, std::string mode,
          ProcessEntry& p, UniqueFd out, UniqueFd err, UniqueFd stdin_w,
          std::shared_ptr<const secrets::RedactionSet> redaction)
      : ctx_(ctx),
        r_(r),
        request_(request),
        mode_(std::move(mode)),
        streaming_(!mode_.empty()),
        p_(p),
        out_(std::move(out)),
        err_(std::move(err)),
        stdin_w_(std::move(stdin_w)) {
    result_.process_id = p.id;
    // Every byte of output passes the sandbox's redactor (S3) before it is
    // kept or sent: one stream per output, so a secret split across reads,
    // or written half now and half later, is still found.
    if (redaction) {
      redact_out_.emplace(redaction);
      redact_err_.emplace(redaction);
    }
  }

  void run() {
    set_nonblocking(out_.get());
    set_nonblocking(err_.get());
    if (stdin_w_) set_nonblocking(stdin_w_.get());
    if (streaming_) {
      http::Headers h = {
          {"content-type", mode_ == "sse" ? "text/event-stream" : "application/x-ndjson"},
          {"cache-control", "no-store"}};
      (void)r_.out.start(200, h, std::nullopt);
    }
    pump();
    wait_for_exit();
    if (client_gone_) return;
    flush_redactors();
    answer();
  }

 private:
  void emit_raw(api::ExecEvent::Kind kind, std::string_view data) {
    if (data.empty()) return;
    if (!streaming_) {
      std::string& dst =
          kind == api::ExecEvent::kStdout ? result_.stdout_data : result_.stderr_data;
      bool& cut =
          kind == api::ExecEvent::kStdout ? result_.stdout_truncated : result_.stderr_truncated;
      std::size_t room =
          request_.max_output_bytes > dst.size() ? request_.max_output_bytes - dst.size() : 0;
      if (data.size() > room) {
        cut = true;
        room = utf8_cut(data, room);
      }
      dst.append(data.substr(0, std::min(room, data.size())));
      return;
    }
    std::string line = api::exec_output_json(kind, data);
    if (mode_ == "sse") {
      line = sse(line);
    } else {
      line += '\n';
    }
    if (!r_.out.write(line)) client_gone_ = true;
  }

  void emit(api::ExecEvent::Kind kind, std::string_view data) {
    auto& stream = kind == api::ExecEvent::kStdout ? redact_out_ : redact_err_;
    if (!stream) return emit_raw(kind, data);
    clean_.clear();
    stream->feed(data, clean_);
    emit_raw(kind, clean_);
  }

  // End of output: what the redactors still hold (a prefix that turned out
  // not to be a secret, or a redacted tail).
  void flush_redactors() {
    for (auto kind : {api::ExecEvent::kStdout, api::ExecEvent::kStderr}) {
      auto& stream = kind == api::ExecEvent::kStdout ? redact_out_ : redact_err_;
      if (!stream) continue;
      clean_.clear();
      stream->finish(clean_);
      emit_raw(kind, clean_);
    }
  }

  // Until the process has ended and its pipes are closed (or drained for a
  // moment), or the client is gone (then the process is killed).
  void pump() {
    for (;;) {
      bool finished;
      {
        std::lock_guard lock(p_.mu);
        finished = p_.finished();
      }
      if (finished && !out_open_ && !err_open_) break;
      if (finished && !drain_until_) drain_until_ = Clock::now() + std::chrono::milliseconds(200);
      // A finished command's pipes may stay open in a detached grandchild:
      // give them a moment, then stop listening.
      if (drain_until_ && Clock::now() >= *drain_until_) break;
      pollfd fds[5] = {{out_open_ ? out_.get() : -1, POLLIN, 0},
                       {err_open_ ? err_.get() : -1, POLLIN, 0},
                       {p_.event.get(), POLLIN, 0},
                       {r_.out.fd(), POLLRDHUP, 0},
                       {stdin_w_ ? stdin_w_.get() : -1, POLLOUT, 0}};
      int timeout = drain_until_ ? 20 : 1000;
      if (poll(fds, 5, timeout) < 0 && errno != EINTR) break;
      if (fds[2].revents & POLLIN) {
        std::uint64_t v;
        (void)!read(p_.event.get(), &v, sizeof v);
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP)) read_output(i);
      }
      if (stdin_w_ && (fds[4].revents & (POLLOUT | POLLERR | POLLHUP))) write_stdin();
      if ((fds[3].revents & (POLLRDHUP | POLLHUP | POLLERR)) || client_gone_) {
        // The client went away: an exec lives only as long as its request.
        client_gone_ = true;
        ctx_.sandboxes.kill_process(p_, SIGKILL);
        break;
      }
    }
  }

  // Output `i` (0 stdout, 1 stderr) is readable: read what is there.
  void read_output(int i) {
    int fd = i == 0 ? out_.get() : err_.get();
    for (;;) {
      ssize_t n = read(fd, buf_.get(), kChunk);
      if (n > 0) {
        emit(i == 0 ? api::ExecEvent::kStdout : api::ExecEvent::kStderr,
             std::string_view(buf_.get(), static_cast<size_t>(n)));
        if (static_cast<size_t>(n) < kChunk) break;
        if (!grown_[i]) {
          grown_[i] = true;  // it filled the default pipe: a chatty one
          grow_pipe(fd);
        }
        continue;
      }
      if (n == 0) (i == 0 ? out_open_ : err_open_) = false;
      break;
    }
  }

  void write_stdin() {
    ssize_t n = write(stdin_w_.get(), request_.stdin_data.data() + stdin_off_,
                      request_.stdin_data.size() - stdin_off_);
    if (n > 0) stdin_off_ += static_cast<size_t>(n);
    if (n < 0 && errno != EAGAIN) stdin_w_.reset();
    if (stdin_off_ >= request_.stdin_data.size()) stdin_w_.reset();
  }

  // Wait for the exit report (the kill above, or the end of the command).
  void wait_for_exit() {
    std::unique_lock lock(p_.mu);
    p_.cv.wait_for(lock, std::chrono::seconds(10), [&] { return p_.finished(); });
    result_.exit_code = p_.exit_code;
    result_.signal = p_.signal;
    result_.timed_out = p_.timed_out;
    if (p_.phase == ProcessEntry::Phase::kFailed && !p_.failure.empty())
      result_.stderr_data += "corral: " + p_.failure + "\n";
    result_.duration_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - p_.started).count();
  }

  void answer() {
    if (streaming_) {
      api::ExecEvent ev;
      ev.kind = api::ExecEvent::kExit;
      ev.result = result_;
      if (p_.phase == ProcessEntry::Phase::kFailed && !p_.failure.empty())
        emit_raw(api::ExecEvent::kStderr, "corral: " + p_.failure + "\n");
      std::string line = api::to_json(ev);
      (void)r_.out.write(mode_ == "sse" ? "event: exit\n" + sse(line) : line + "\n");
      (void)r_.out.finish();
      return;
    }
    send_json(r_.out, 200, api::to_json(result_));
  }

  ApiContext& ctx_;
  ApiRequest& r_;
  const api::ExecRequest& request_;
  const std::string mode_;
  const bool streaming_;
  ProcessEntry& p_;
  UniqueFd out_, err_, stdin_w_;  // the daemon's ends of the pipes
  api::ExecResult result_;
  std::size_t stdin_off_ = 0;
  bool out_open_ = true, err_open_ = true, client_gone_ = false;
  std::optional<Clock::time_point> drain_until_;
  bool grown_[2] = {false, false};
  std::unique_ptr<char[]> buf_{new char[kChunk]};  // not zeroed: read() fills it
  std::optional<secrets::RedactStream> redact_out_, redact_err_;
  std::string clean_;
};

}  // namespace

void handle_exec(ApiContext& ctx, ApiRequest& r) {
  auto request = read_exec_request(ctx, r);
  if (!request) return;
  std::string mode = stream_mode(*request, r);
  auto sandbox = live_or_fail(ctx, r);
  if (!sandbox) return;

  auto out = make_pipe();
  auto err = make_pipe();
  auto in = make_pipe();
  if (!out || !err || !in)
    return send_error(r.out, api::make_api_error(api::ApiErrorCode::kInternal,
                                                 "could not make pipes for the process"));
  UniqueFd stdio[3] = {std::move(in->read), std::move(out->write), std::move(err->write)};
  UniqueFd stdin_w = std::move(in->write);
  if (request->stdin_data.empty()) stdin_w.reset();  // EOF at once
  auto proc = ctx.sandboxes.spawn(*sandbox, *request, false, stdio);
  if (!proc) return send_error(r.out, proc.error());
  ExecRun(ctx, r, *request, std::move(mode), **proc, std::move(out->read), std::move(err->read),
          std::move(stdin_w), ctx.sandboxes.redaction((*sandbox)->id))
      .run();
}

// ---- background processes ---------------------------------------------------------

void handle_start_process(ApiContext& ctx, ApiRequest& r) {
  auto body = read_json_body(r, ctx.limits.max_exec_body);
  if (!body) return send_error(r.out, body.error());
  auto request = api::parse_exec(*body);
  if (!request) return send_error(r.out, api::to_api_error(request.error()));
  // Held while the output files are open here (a teardown waits).
  auto lease = lease_or_fail(ctx, r);
  if (!lease) return;
  auto proc = start_background_process(ctx.sandboxes, lease->sandbox(), *request);
  if (!proc) return send_error(r.out, proc.error());
  send_json(r.out, 201, api::to_json(info_of(*lease->sandbox(), **proc)));
}

void handle_list_processes(ApiContext& ctx, ApiRequest& r) {
  auto sandbox = live_or_fail(ctx, r);
  if (!sandbox) return;
  std::vector<api::ProcessInfo> list;
  for (auto& p : ctx.sandboxes.processes(**sandbox)) list.push_back(info_of(**sandbox, *p));
  send_json(r.out, 200, api::to_json(list));
}

void handle_get_process(ApiContext& ctx, ApiRequest& r) {
  auto sandbox = live_or_fail(ctx, r);
  if (!sandbox) return;
  auto p = process_or_fail(ctx, r, **sandbox);
  if (!p) return;
  send_json(r.out, 200, api::to_json(info_of(**sandbox, *p)));
}

void handle_process_output(ApiContext& ctx, ApiRequest& r) {
  // Its output file is on the sandbox's layer: a teardown cuts the stream
  // off and waits for the file to be closed.
  auto lease = lease_or_fail(ctx, r, r.out.fd());
  if (!lease) return;
  const std::shared_ptr<SandboxEntry>& sandbox = lease->sandbox();
  auto p = process_or_fail(ctx, r, *sandbox);
  if (!p) return;
  std::string stream = r.query_value("stream").value_or("stdout");
  if (stream != "stdout" && stream != "stderr")
    return send_error(r.out, api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                                 "stream must be stdout or stderr", "stream"));
  std::uint64_t offset = 0;
  if (auto o = r.query_value("offset"); o) {
    char* end = nullptr;
    offset = std::strtoull(o->c_str(), &end, 10);
    if (o->empty() || !std::isdigit(static_cast<unsigned char>(o->front())) || *end != '\0')
      return send_error(r.out, api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                                   "offset must be a byte count", "offset"));
  }
  const bool follow = query_flag(r, "follow");
  if (!p->background)
    return send_error(r.out,
                      api::make_api_error(
                          api::ApiErrorCode::kConflict,
                          "process " + p->id + " is an exec: its output goes to its own request"));
  UniqueFd file(openat(sandbox->live->layer_root_fd(), process_output_name(p->id, stream).c_str(),
                       O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!file)
    return send_error(r.out, api::make_api_error(api::ApiErrorCode::kNotFound,
                                                 "no output recorded for " + p->id));
  (void)r.out.start(200,
                    {{"content-type", "application/octet-stream"}, {"cache-control", "no-store"}},
                    std::nullopt);
  if (r.head.method == "HEAD") return;  // the head is the whole answer: no waiting, no reading
  // The output is redacted as it is read (S3), from its first byte: a
  // secret that straddles `offset` is still found. `offset` counts bytes
  // of the redacted output, the only output a client ever sees.
  auto redaction = ctx.sandboxes.redaction(sandbox->id);
  std::optional<secrets::RedactStream> redactor;
  if (redaction) redactor.emplace(redaction);
  // Without secrets the file is the output: start at `offset` itself.
  std::uint64_t skip = redactor ? offset : 0;
  std::string clean;
  auto send = [&](std::string_view data, bool end) -> bool {
    std::string_view out = data;
    if (redactor) {
      clean.clear();
      if (end)
        redactor->finish(clean);
      else
        redactor->feed(data, clean);
      out = clean;
    }
    const auto drop = static_cast<std::size_t>(std::min<std::uint64_t>(skip, out.size()));
    out.remove_prefix(drop);
    skip -= drop;
    return out.empty() || r.out.write(out);
  };
  std::string buf(256 * 1024, '\0');
  std::uint64_t pos = redactor ? 0 : offset;  // in the raw file
  auto read_some = [&]() -> ssize_t {
    ssize_t n = pread(file.get(), buf.data(), buf.size(), static_cast<off_t>(pos));
    if (n > 0) pos += static_cast<std::uint64_t>(n);
    return n;
  };
  for (;;) {
    ssize_t n = read_some();
    if (n > 0) {
      if (!send(std::string_view(buf.data(), static_cast<size_t>(n)), false)) return;
      continue;
    }
    if (n < 0 || !follow) break;
    bool finished;
    {
      std::unique_lock lock(p->mu);
      finished = p->finished();
      if (!finished) p->cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    if (r.out.peer_gone()) return;
    if (finished) break;
  }
  // What the redactor still holds (the start of what may be a secret) is
  // given out only once the process has ended, after one last read of
  // what it wrote just before: a read of a running process must not show
  // a prefix that a later read, with the rest of the secret, redacts. Its
  // offsets would not agree with the next read's either.
  bool ended;
  {
    std::lock_guard lock(p->mu);
    ended = p->finished();
  }
  if (ended) {
    ssize_t m;
    while ((m = read_some()) > 0) {
      if (!send(std::string_view(buf.data(), static_cast<size_t>(m)), false)) return;
    }
    if (!send({}, true)) return;
  }
  (void)r.out.finish();
}

void handle_process_stdin(ApiContext& ctx, ApiRequest& r) {
  auto sandbox = live_or_fail(ctx, r);
  if (!sandbox) return;
  auto p = process_or_fail(ctx, r, **sandbox);
  if (!p) return;
  if (!p->background)
    return send_error(
        r.out,
        api::make_api_error(api::ApiErrorCode::kConflict,
                            "process " + p->id + " is an exec: its stdin came with its request"));
  // A copy of the write end, taken under the lock: a concurrent
  // "?close=true" (or the process's end) may close the original, and its
  // number may be reused at once by another socket or file.
  UniqueFd own;
  bool ended;
  {
    std::lock_guard lock(p->mu);
    ended = p->finished();
    if (!ended && p->stdin_writer) own.reset(fcntl(p->stdin_writer.get(), F_DUPFD_CLOEXEC, 0));
  }
  // Ended (before or after a daemon restart): nothing reads its stdin.
  if (ended)
    return send_error(r.out, api::make_api_error(api::ApiErrorCode::kConflict,
                                                 "process " + p->id +
                                                     " has ended: its stdin is closed",
                                                 "", "start a new process to give it input"));
  const int fd = own ? own.get() : -1;
  if (fd < 0 && p->reattached)
    return send_error(
        r.out, api::make_api_error(api::ApiErrorCode::kConflict,
                                   "the stdin of " + p->id +
                                       " is closed: the process was started by an earlier daemon "
                                       "run, and the write end of its stdin ended with that daemon",
                                   "", "start a new process to give it input"));
  if (fd < 0)
    return send_error(r.out, api::make_api_error(api::ApiErrorCode::kConflict,
                                                 "the stdin of " + p->id + " is closed"));
  set_nonblocking(fd);
  std::uint64_t written = 0;
  std::string buf(64 * 1024, '\0');
  for (;;) {
    auto n = r.body.read(buf.data(), buf.size());
    if (!n) return send_error(r.out, api::to_api_error(n.error()));
    if (*n == 0) break;
    std::size_t off = 0;
    const auto deadline = Clock::now() + ctx.limits.stdin_write_timeout;
    while (off < *n) {
      ssize_t w = write(fd, buf.data() + off, *n - off);
      if (w > 0) {
        off += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno == EAGAIN && Clock::now() < deadline) {
        pollfd pfd{fd, POLLOUT, 0};
        poll(&pfd, 1, 100);
        continue;
      }
      const bool stalled = errno == EAGAIN;
      const std::string sent =
          " (" + std::to_string(written + off) + " bytes of this request were written)";
      return send_error(r.out, api::make_api_error(stalled ? api::ApiErrorCode::kRequestTimeout
                                                           : api::ApiErrorCode::kConflict,
                                                   (stalled ? "the process does not read its stdin"
                                                            : "the process closed its stdin") +
                                                       sent,
                                                   "", "send only the bytes after those"));
    }
    written += *n;
  }
  if (query_flag(r, "close")) {
    std::lock_guard lock(p->mu);
    p->stdin_writer.reset();
  }
  send_json(r.out, 200, "{\"written\":" + std::to_string(written) + "}");
}

void handle_process_signal(ApiContext& ctx, ApiRequest& r) {
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (!body) return send_error(r.out, body.error());
  auto sig = api::parse_signal_request(*body);
  if (!sig) return send_error(r.out, api::to_api_error(sig.error()));
  auto sandbox = live_or_fail(ctx, r);
  if (!sandbox) return;
  auto p = process_or_fail(ctx, r, **sandbox);
  if (!p) return;
  {
    std::lock_guard lock(p->mu);
    // Only a re-attached process whose host pid was never recorded (by a
    // daemon older than schema 3) has no pidfd once running.
    if (!p->finished() && !p->pidfd && p->phase == ProcessEntry::Phase::kRunning)
      return send_error(r.out,
                        api::make_api_error(api::ApiErrorCode::kConflict,
                                            "process " + p->id +
                                                " was started by an earlier daemon run that did "
                                                "not record its host pid; it can be waited for, "
                                                "or ended with its sandbox"));
  }
  ctx.sandboxes.kill_process(*p, *sig);
  send_json(r.out, 200, api::to_json(info_of(**sandbox, *p)));
}

void handle_process_wait(ApiContext& ctx, ApiRequest& r) {
  auto sandbox = live_or_fail(ctx, r);
  if (!sandbox) return;
  auto p = process_or_fail(ctx, r, **sandbox);
  if (!p) return;
  std::chrono::milliseconds timeout(30000);
  if (auto t = r.query_value("timeout"); t) {
    char* end = nullptr;
    double secs = std::strtod(t->c_str(), &end);
    if (t->empty() || *end != '\0' || !(secs >= 0 && secs <= 3600))
      return send_error(r.out, api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                                   "timeout is seconds, 0 to 3600", "timeout"));
    timeout = std::chrono::milliseconds(static_cast<std::int64_t>(secs * 1000));
  }
  bool done;
  {
    std::unique_lock lock(p->mu);
    done = p->cv.wait_for(lock, timeout, [&] { return p->finished(); });
  }
  if (!done)
    return send_error(r.out, api::make_api_error(api::ApiErrorCode::kRequestTimeout,
                                                 "process " + p->id + " is still running after " +
                                                     std::to_string(timeout.count()) + " ms",
                                                 "", "wait again, or signal it"));
  send_json(r.out, 200, api::to_json(info_of(**sandbox, *p)));
}

}  // namespace corral::daemon
