// The facade's process.Process service (envd's, over Connect with JSON):
// Start and Connect stream a process's events (start, data as it is
// produced, end) with keepalives; List, SendInput, SendSignal and
// CloseStdin are unary; StreamInput is a client stream. A Start is a corral background process: it
// lives on when the client goes away, and dies at Connect-Timeout-Ms (the SDK's timeoutMs) or with
// its sandbox. Output passes the sandbox's redactor.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "daemon/background_process.h"
#include "daemon/e2b_facade_internal.h"
#include "daemon/sandbox_service.h"
#include "daemon/sandbox_terminal.h"
#include "e2b/envd_messages.h"

namespace corral::daemon::e2b_internal {

namespace {

using Clock = std::chrono::steady_clock;
using e2b::ConnectCode;

// The pid the SDK sees: the process's own pid in its sandbox; for one whose
// pid could not be read (never expected), a stable stand-in from its id.
std::uint32_t e2b_pid(ProcessEntry& p) {
  std::lock_guard lock(p.mu);
  if (p.ns_pid != 0) return p.ns_pid;
  return static_cast<std::uint32_t>(p.request_id & 0x3fffffff) | 0x40000000u;
}

std::shared_ptr<ProcessEntry> find(E2bFacade& f, SandboxEntry& s, const e2b::ProcessSelector& sel) {
  for (auto& p : f.context().sandboxes.processes(s)) {
    if (sel.pid && e2b_pid(*p) == *sel.pid) return p;
    if (sel.tag && p->tag == *sel.tag) return p;
  }
  return nullptr;
}

std::string selector_text(const e2b::ProcessSelector& sel) {
  return sel.pid ? "pid " + std::to_string(*sel.pid) : "tag \"" + sel.tag.value_or("") + "\"";
}

// Sends the process's output as it comes, then its end; returns when it
// ended, or when the client went away (the process goes on).
void follow(ApiContext& ctx, ApiRequest& r, SandboxEntry& sandbox, ProcessEntry& p, bool from_end) {
  const int layer = sandbox.live->layer_root_fd();
  auto redaction = ctx.sandboxes.redaction(sandbox.id);
  auto out = OutputFollower::open(layer, p.id, "stdout", redaction, from_end);
  auto err = OutputFollower::open(layer, p.id, "stderr", redaction, from_end);
  const auto interval = keepalive_interval(r);
  auto last_sent = Clock::now();
  auto send = [&](const std::string& message) {
    last_sent = Clock::now();
    return static_cast<bool>(r.out.write(e2b::envelope(0, message)));
  };
  // A terminal's output is one stream, sent as envd sends it: data.pty.
  auto event = [&](bool is_stderr, std::string_view data) {
    return p.has_terminal ? e2b::pty_data_event_json(data) : e2b::data_event_json(is_stderr, data);
  };
  auto drain = [&](std::optional<OutputFollower>& f, bool is_stderr, bool* any) {
    if (!f) return true;
    for (int rounds = 0; rounds < 16; ++rounds) {
      std::string data = f->read_some();
      if (data.empty()) return true;
      *any = true;
      if (!send(event(is_stderr, data))) return false;
    }
    return true;
  };
  for (;;) {
    bool finished;
    {
      std::lock_guard lock(p.mu);
      finished = p.finished();
    }
    bool any = false;
    if (!drain(out, false, &any) || !drain(err, true, &any)) return;
    if (finished) {
      // A terminal's last bytes reach the output file through its pump:
      // wait for it (bounded: a child that keeps the terminal open would
      // hold it forever).
      std::shared_ptr<TerminalPump> pump;
      {
        std::lock_guard lock(p.mu);
        pump = p.terminal_pump;
      }
      for (int i = 0; pump && !pump->drained() && i < 100; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      // One more read after the end: what it wrote just before.
      do {
        any = false;
        if (!drain(out, false, &any) || !drain(err, true, &any)) return;
      } while (any);
      for (auto* f : {&out, &err}) {
        if (!*f) continue;
        std::string tail = (*f)->finish();
        if (!tail.empty() && !send(event(f == &err, tail))) return;
      }
      std::optional<int> code, sig;
      {
        std::lock_guard lock(p.mu);
        code = p.exit_code;
        sig = p.signal;
      }
      if (!send(e2b::end_event_json(e2b::process_end(code, sig)))) return;
      (void)r.out.write(e2b::end_stream_envelope(std::nullopt));
      (void)r.out.finish();
      return;
    }
    if (any) continue;
    if (r.out.peer_gone()) return;
    if (Clock::now() - last_sent >= interval && !send(e2b::keepalive_event_json())) return;
    std::unique_lock lock(p.mu);
    p.cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return p.finished(); });
  }
}

void start(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto message = read_stream_request(c.r, ctx.limits.max_json_body);
  if (!message) return;
  auto req = e2b::parse_start_request(*message);
  if (!req) return send_stream_error(c.r.out, ConnectCode::kInvalidArgument, req.error().message);
  bool timeout_ok = true;
  auto timeout = connect_timeout_ms(c.r, &timeout_ok);
  if (!timeout_ok)
    return send_stream_error(c.r.out, ConnectCode::kInvalidArgument,
                             "Connect-Timeout-Ms must be a count of milliseconds");
  // Leased with this connection: a destroy cuts the stream off.
  auto lease = ctx.sandboxes.lease(c.sandbox_id, c.r.out.fd());
  if (!lease) return send_stream_error(c.r.out, lease.error());
  const std::shared_ptr<SandboxEntry>& sandbox = lease->sandbox();
  if (!user_allowed(c.r, *sandbox)) return;
  api::ExecRequest exec;
  exec.argv.push_back(req->process.cmd);
  exec.argv.insert(exec.argv.end(), req->process.args.begin(), req->process.args.end());
  exec.env = req->process.envs;
  if (req->process.cwd) exec.cwd = sandbox_path(*sandbox, *req->process.cwd);
  // Without a deadline (the SDK's timeoutMs: 0) it may run as long as its
  // sandbox lives, not corral's default command timeout.
  std::int64_t expires;
  {
    std::lock_guard lock(sandbox->mu);
    expires = sandbox->expires_at_ms;
  }
  exec.timeout_ms = timeout.value_or(std::max<std::int64_t>(1000, expires - StateStore::now_ms()));
  if (req->pty) exec.terminal = api::TerminalSize{req->pty->cols, req->pty->rows};
  auto proc = start_background_process(ctx.sandboxes, sandbox, exec, req->tag);
  if (!proc) return send_stream_error(c.r.out, proc.error());
  ProcessEntry& p = **proc;
  std::string failure;
  {
    std::lock_guard lock(p.mu);
    // stdin: false (the SDK's default) is a stdin at its end.
    if (req->stdin != true) p.stdin_writer.reset();
    if (p.phase == ProcessEntry::Phase::kFailed) failure = p.failure;
  }
  if (!failure.empty())
    return send_stream_error(c.r.out, ConnectCode::kInvalidArgument,
                             "the command could not start: " + failure);
  if (!c.r.out.start(200, {{"content-type", "application/connect+json"}}, std::nullopt)) return;
  if (!c.r.out.write(e2b::envelope(0, e2b::start_event_json(e2b_pid(p))))) return;
  follow(ctx, c.r, *sandbox, p, false);
}

void connect(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto message = read_stream_request(c.r, ctx.limits.max_json_body);
  if (!message) return;
  auto sel = e2b::parse_selector_request(*message);
  if (!sel) return send_stream_error(c.r.out, ConnectCode::kInvalidArgument, sel.error().message);
  auto lease = ctx.sandboxes.lease(c.sandbox_id, c.r.out.fd());
  if (!lease) return send_stream_error(c.r.out, lease.error());
  const std::shared_ptr<SandboxEntry>& sandbox = lease->sandbox();
  auto p = find(c.facade, *sandbox, *sel);
  bool finished = true;
  if (p) {
    std::lock_guard lock(p->mu);
    finished = p->finished();
  }
  if (!p || finished || !p->background)
    return send_stream_error(c.r.out, ConnectCode::kNotFound,
                             "no running process with " + selector_text(*sel));
  if (!c.r.out.start(200, {{"content-type", "application/connect+json"}}, std::nullopt)) return;
  if (!c.r.out.write(e2b::envelope(0, e2b::start_event_json(e2b_pid(*p))))) return;
  // envd replays no history: what the process writes from now on.
  follow(ctx, c.r, *sandbox, *p, true);
}

void list(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  if (!read_unary(c.r, ctx.limits.max_json_body)) return;
  auto sandbox = ctx.sandboxes.live(c.sandbox_id);
  if (!sandbox) return send_connect_error(c.r.out, sandbox.error());
  std::vector<e2b::ListedProcess> listed;
  for (auto& p : ctx.sandboxes.processes(**sandbox)) {
    {
      std::lock_guard lock(p->mu);
      if (p->finished()) continue;
    }
    e2b::ListedProcess l;
    l.pid = e2b_pid(*p);
    if (!p->argv.empty()) {
      l.config.cmd = p->argv[0];
      l.config.args.assign(p->argv.begin() + 1, p->argv.end());
    }
    l.tag = p->tag;
    listed.push_back(std::move(l));
  }
  send_connect_json(c.r.out, e2b::process_list_json(listed));
}

// The running process `sel` names in the call's sandbox; nullptr with the
// reason in *why.
std::shared_ptr<ProcessEntry> find_running(EnvdCall& c, const e2b::ProcessSelector& sel,
                                           e2b::ConnectError* why) {
  auto sandbox = c.facade.context().sandboxes.live(c.sandbox_id);
  if (!sandbox) {
    *why = connect_error_of(sandbox.error());
    return nullptr;
  }
  auto p = find(c.facade, **sandbox, sel);
  bool finished = true;
  if (p) {
    std::lock_guard lock(p->mu);
    finished = p->finished();
  }
  if (!p || finished) {
    *why = {ConnectCode::kNotFound, "no running process with " + selector_text(sel)};
    return nullptr;
  }
  return p;
}

// The same for a unary call, which answers the error itself.
std::shared_ptr<ProcessEntry> running_process(EnvdCall& c, const e2b::ProcessSelector& sel) {
  e2b::ConnectError why;
  auto p = find_running(c, sel, &why);
  if (!p) send_connect_error(c.r.out, why.code, why.message);
  return p;
}

// Writes `data` to the process's stdin, waiting at most stdin_write_timeout
// for it to read; the error when it could not.
std::optional<e2b::ConnectError> write_stdin(ApiContext& ctx, ProcessEntry& p,
                                             std::string_view data, bool to_terminal) {
  // A copy of the write end, taken under the lock (a CloseStdin or the
  // process's end may close the original, and its number be reused), and
  // closed after this write: it never keeps the stdin open by itself.
  UniqueFd own;
  {
    std::lock_guard lock(p.mu);
    const UniqueFd& target = to_terminal ? p.terminal : p.stdin_writer;
    if (target) own.reset(fcntl(target.get(), F_DUPFD_CLOEXEC, 0));
  }
  if (!own && to_terminal)
    return e2b::ConnectError{ConnectCode::kFailedPrecondition,
                             "the process has no terminal (start it with pty to write to one)"};
  if (!own)
    return e2b::ConnectError{ConnectCode::kFailedPrecondition,
                             "the process's stdin is closed (start it with stdin: true to write "
                             "to it)"};
  (void)fcntl(own.get(), F_SETFL, fcntl(own.get(), F_GETFL) | O_NONBLOCK);
  std::size_t off = 0;
  const auto deadline = Clock::now() + ctx.limits.stdin_write_timeout;
  while (off < data.size()) {
    ssize_t w = write(own.get(), data.data() + off, data.size() - off);
    if (w > 0) {
      off += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EAGAIN && Clock::now() < deadline) {
      pollfd pfd{own.get(), POLLOUT, 0};
      (void)poll(&pfd, 1, 100);
      continue;
    }
    const bool stalled = errno == EAGAIN;
    return e2b::ConnectError{
        stalled ? ConnectCode::kDeadlineExceeded : ConnectCode::kFailedPrecondition,
        (stalled ? "the process does not read its stdin (" : "the process closed its stdin (") +
            std::to_string(off) + " bytes were written)"};
  }
  return std::nullopt;
}

void send_input(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto body = read_unary(c.r, ctx.limits.max_exec_body);
  if (!body) return;
  auto req = e2b::parse_send_input(*body);
  if (!req) return send_connect_error(c.r.out, ConnectCode::kInvalidArgument, req.error().message);
  auto p = running_process(c, req->process);
  if (!p) return;
  if (auto failed = write_stdin(ctx, *p, req->data, req->pty))
    return send_connect_error(c.r.out, failed->code, failed->message);
  send_connect_json(c.r.out, "{}");
}

// StreamInput, a client stream: {start: {process}} first, then {data:
// {input}} and {keepalive: {}} messages, each written to the process's
// stdin as it arrives (not when the request ends); the end of the request
// body ends the call: one {} message and the end of the stream. An error
// ends the call at once, in the end-of-stream message; what came before
// it was written.
void stream_input(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  if (!stream_content_type(c.r)) return;
  bool timeout_ok = true;
  const auto timeout = connect_timeout_ms(c.r, &timeout_ok);
  if (!timeout_ok)
    return send_connect_error(c.r.out, ConnectCode::kInvalidArgument,
                              "Connect-Timeout-Ms must be a count of milliseconds");
  const auto deadline =
      timeout ? std::optional(Clock::now() + std::chrono::milliseconds(*timeout)) : std::nullopt;
  auto fail = [&](ConnectCode code, const std::string& message) {
    send_stream_error(c.r.out, code, message);
  };
  e2b::EnvelopeReader reader;
  std::shared_ptr<ProcessEntry> p;
  std::string buf(64 * 1024, '\0');
  for (;;) {
    auto n = c.r.body.read(buf.data(), buf.size());
    if (!n) return fail(ConnectCode::kInvalidArgument, "reading the stream: " + n.error().message);
    if (deadline && Clock::now() > *deadline)
      return fail(ConnectCode::kDeadlineExceeded, "Connect-Timeout-Ms has passed");
    if (*n == 0) break;
    if (auto fed = reader.feed(std::string_view(buf.data(), *n)); !fed)
      return fail(ConnectCode::kInvalidArgument, fed.error().message);
    while (auto env = reader.next()) {
      if (env->flags != 0)
        return fail(ConnectCode::kInvalidArgument,
                    "a request message's flags must be 0 (no compression, no end-of-stream)");
      if (env->message.size() > ctx.limits.max_exec_body)
        return fail(ConnectCode::kResourceExhausted,
                    "a message of " + std::to_string(env->message.size()) + " bytes; at most " +
                        std::to_string(ctx.limits.max_exec_body));
      auto event = e2b::parse_stream_input_event(env->message);
      if (!event) return fail(ConnectCode::kInvalidArgument, event.error().message);
      using Kind = e2b::StreamInputEvent::Kind;
      if (event->kind == Kind::kStart) {
        if (p) return fail(ConnectCode::kInvalidArgument, "a second start message");
        e2b::ConnectError why;
        p = find_running(c, event->process, &why);
        if (!p) return fail(why.code, why.message);
      } else if (event->kind == Kind::kData) {
        if (!p)
          return fail(ConnectCode::kInvalidArgument,
                      "data before the start message that names the process");
        if (auto failed = write_stdin(ctx, *p, event->data, event->pty))
          return fail(failed->code, failed->message);
      }
    }
  }
  if (reader.partial())
    return fail(ConnectCode::kInvalidArgument, "the request ended inside a message");
  if (!p) return fail(ConnectCode::kInvalidArgument, "the stream had no start message");
  if (!c.r.out.start(200, {{"content-type", "application/connect+json"}}, std::nullopt)) return;
  if (!c.r.out.write(e2b::envelope(0, "{}"))) return;
  if (!c.r.out.write(e2b::end_stream_envelope(std::nullopt))) return;
  (void)c.r.out.finish();
}

// Update: a terminal's new size (the process gets SIGWINCH).
void update(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto body = read_unary(c.r, ctx.limits.max_json_body);
  if (!body) return;
  auto req = e2b::parse_update(*body);
  if (!req) return send_connect_error(c.r.out, ConnectCode::kInvalidArgument, req.error().message);
  auto p = running_process(c, req->process);
  if (!p) return;
  if (req->pty) {
    UniqueFd own;
    {
      std::lock_guard lock(p->mu);
      if (p->terminal) own.reset(fcntl(p->terminal.get(), F_DUPFD_CLOEXEC, 0));
    }
    if (!own)
      return send_connect_error(c.r.out, ConnectCode::kFailedPrecondition,
                                "the process has no terminal to resize (start it with pty)");
    if (auto st = set_terminal_size(own.get(), req->pty->cols, req->pty->rows); !st)
      return send_connect_error(c.r.out, ConnectCode::kInternal, st.error().message);
  }
  send_connect_json(c.r.out, "{}");
}

void send_signal(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto body = read_unary(c.r, ctx.limits.max_json_body);
  if (!body) return;
  auto req = e2b::parse_send_signal(*body);
  if (!req) return send_connect_error(c.r.out, ConnectCode::kInvalidArgument, req.error().message);
  auto p = running_process(c, req->process);
  if (!p) return;
  ctx.sandboxes.kill_process(*p, req->signal);
  send_connect_json(c.r.out, "{}");
}

void close_stdin(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto body = read_unary(c.r, ctx.limits.max_json_body);
  if (!body) return;
  auto sel = e2b::parse_selector_request(*body);
  if (!sel) return send_connect_error(c.r.out, ConnectCode::kInvalidArgument, sel.error().message);
  auto p = running_process(c, *sel);
  if (!p) return;
  {
    std::lock_guard lock(p->mu);
    p->stdin_writer.reset();
  }
  send_connect_json(c.r.out, "{}");
}

}  // namespace

void handle_process_service(EnvdCall& c) {
  const std::string m = c.method.substr(std::string_view("process.Process/").size());
  if (m == "Start") return start(c);
  if (m == "Connect") return connect(c);
  if (m == "List") return list(c);
  if (m == "SendInput") return send_input(c);
  if (m == "SendSignal") return send_signal(c);
  if (m == "CloseStdin") return close_stdin(c);
  if (m == "StreamInput") return stream_input(c);
  if (m == "Update") return update(c);
  send_connect_error(c.r.out, ConnectCode::kUnimplemented, "no method process.Process/" + m);
}

}  // namespace corral::daemon::e2b_internal
