#include "http/server_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>

#include "base/json_string.h"
#include "http/char_class.h"
#include "http/http_parser.h"

namespace corral::http {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t kBufferBytes = 256 * 1024;
// A request body the handler left unread is discarded up to this much to
// keep the connection; beyond, closing is cheaper than reading.
constexpr std::uint64_t kDrainLimit = 1024 * 1024;
// How long a closing connection keeps reading what the client still sends,
// so that the client sees our response rather than a reset.
constexpr milliseconds kLingerTime{1000};
constexpr std::size_t kDirectReadMin = 64 * 1024;

class Connection;
class RequestBody;

// IMF-fixdate, by hand: strftime's day and month names follow the locale.
std::string http_date() {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::time_t now = std::time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char text[40];
  int n = std::snprintf(text, sizeof(text), "%s, %02d %s %04d %02d:%02d:%02d GMT",
                        kDays[tm.tm_wday % 7], tm.tm_mday, kMonths[tm.tm_mon % 12],
                        tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return std::string(text, static_cast<std::size_t>(std::max(n, 0)));
}

class Response final : public ResponseWriter {
 public:
  Response(Connection& conn, const RequestHead& req)
      : conn_(conn), req_(req), head_only_(req.method == "HEAD") {}
  void set_body(const RequestBody* body) { body_ = body; }

  Status send(int status, const Headers& headers, std::string_view body) override;
  Status start(int status, const Headers& headers, std::optional<std::uint64_t> length) override;
  Status write(std::string_view data) override;
  Status finish() override;
  bool started() const override { return state_ != State::kIdle; }
  bool peer_gone() override;
  int fd() const override;

  bool finished() const { return state_ == State::kFinished; }
  // The connection cannot carry another request after this response.
  bool closing() const { return close_ || failed_; }

 private:
  enum class State { kIdle, kStarted, kFinished };
  enum class Mode { kLength, kChunked, kUntilClose, kNoBody };

  Status begin(int status, const Headers& headers, std::optional<std::uint64_t> length);
  Status transmit(struct iovec* iov, int n);
  Status fail(Error e) {
    failed_ = true;
    return tl::unexpected(std::move(e));
  }

  Connection& conn_;
  const RequestHead& req_;
  // RFC 9110 9.3.2: the answer to HEAD is the GET answer's status and
  // fields without a byte of its body, whatever the handler writes, so the
  // next response on the connection starts where the client expects it.
  const bool head_only_;
  const RequestBody* body_ = nullptr;
  State state_ = State::kIdle;
  Mode mode_ = Mode::kLength;
  std::uint64_t length_ = 0;
  std::uint64_t written_ = 0;
  bool close_ = false;
  bool failed_ = false;
  std::string head_;
};

class RequestBody final : public BodyReader {
 public:
  RequestBody(Connection& conn, const RequestHead& req, const Response& resp);
  Result<std::size_t> read(char* buf, std::size_t cap) override;
  std::optional<std::uint64_t> declared_length() const override { return req_.content_length; }

  bool done() const { return done_; }
  // The client waits for "100 Continue" that was never sent: it may or may
  // not send the body, so the connection's framing is unknown.
  bool continue_pending() const { return req_.expect_continue && !continue_sent_ && !done_; }
  // Bytes still to come when the length is known.
  std::optional<std::uint64_t> remaining() const {
    if (req_.chunked) return std::nullopt;
    return remaining_;
  }

 private:
  Result<std::size_t> read_length(char* buf, std::size_t cap);
  Result<std::size_t> read_chunked(char* buf, std::size_t cap);

  Connection& conn_;
  const RequestHead& req_;
  const Response& resp_;
  std::uint64_t remaining_ = 0;
  ChunkedDecoder decoder_;
  bool done_ = false;
  bool continue_sent_ = false;
  bool failed_ = false;
};

class Connection {
 public:
  Connection(int fd, const Peer& peer, const ConnectionEnv& env)
      : fd_(fd), peer_(peer), env_(env), buf_(new char[kBufferBytes]) {}

  void serve(io::Clock::time_point accepted);

  int fd() const { return fd_; }
  io::Timeouts io_timeouts() const {
    return io::Timeouts{env_.options.io_timeout, io::Clock::time_point::max()};
  }
  bool stopping() const { return env_.stopping.load(std::memory_order_relaxed); }

  std::string_view buffered() const { return std::string_view(buf_.get() + begin_, end_ - begin_); }
  void consume(std::size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  // Reads more bytes into the buffer; 0 at end of stream.
  Result<std::size_t> fill(const io::Timeouts& t);
  Status send(struct iovec* iov, int n) { return io::send_all(fd_, iov, n, io_timeouts()); }

  // The request's framing is broken (bad chunk, lost bytes): after this
  // response the connection ends.
  void mark_broken() { broken_ = true; }
  bool must_close(const RequestHead& req, const RequestBody& body) const;

 private:
  enum class HeadResult { kOk, kClose };
  HeadResult read_head(HeadBuffer& hb, io::Clock::time_point deadline);
  bool handle(const RequestHead& req);
  bool drain(RequestBody& body);
  // `head_only`: the request was a HEAD, so the answer has no body.
  void reply_error(int status, std::string_view code, std::string_view message,
                   bool head_only = false);
  void linger_close();

  int fd_;
  const Peer& peer_;
  const ConnectionEnv& env_;
  std::unique_ptr<char[]> buf_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  bool broken_ = false;
};

// --- Response ---

Status Response::begin(int status, const Headers& headers, std::optional<std::uint64_t> length) {
  if (state_ != State::kIdle) {
    return make_error(ErrorCode::kInternal, "response already started");
  }
  if (status < 200 || status > 599) {
    return make_error(ErrorCode::kInternal, "handler status " + std::to_string(status) +
                                                " is not a final status (200-599)");
  }
  head_.clear();
  head_.append("HTTP/1.1 ").append(std::to_string(status)).append(" ");
  head_.append(status_reason(status)).append("\r\nDate: ").append(http_date()).append("\r\n");
  for (const auto& h : headers) {
    // Writers refuse what the parser would refuse: a CR or LF in a value
    // from user data would otherwise split the response.
    if (!chars::is_token(h.name) || !chars::is_field_value(h.value)) {
      return make_error(ErrorCode::kInternal, "invalid response header " + chars::quote(h.name));
    }
    if (chars::iequals(h.name, "content-length") || chars::iequals(h.name, "transfer-encoding")) {
      return make_error(ErrorCode::kInternal,
                        "handlers must not set " + h.name + ": the server frames the body");
    }
    if (chars::iequals(h.name, "connection")) {
      // Honoured ("close"), then written by us below.
      if (chars::list_has_token(h.value, "close")) close_ = true;
      continue;
    }
    head_.append(h.name).append(": ").append(h.value).append("\r\n");
  }
  if (status == 204 || status == 304) {
    mode_ = Mode::kNoBody;  // RFC 9110: no body, no Content-Length on 204
    if (length.value_or(0) != 0) {
      return make_error(ErrorCode::kInternal, "status " + std::to_string(status) + " has no body");
    }
    length_ = 0;
  } else if (length) {
    mode_ = head_only_ ? Mode::kNoBody : Mode::kLength;
    length_ = *length;
    head_.append("Content-Length: ").append(std::to_string(*length)).append("\r\n");
  } else if (head_only_) {
    // The length is known only once the body is made: say how GET would
    // frame it (RFC 9112 6.1 allows this on a HEAD answer), send none.
    mode_ = Mode::kNoBody;
    if (req_.version_minor == 1) head_.append("Transfer-Encoding: chunked\r\n");
  } else if (req_.version_minor == 0) {
    mode_ = Mode::kUntilClose;  // HTTP/1.0 has no chunked coding
    close_ = true;
  } else {
    mode_ = Mode::kChunked;
    head_.append("Transfer-Encoding: chunked\r\n");
  }
  if (!close_) close_ = conn_.must_close(req_, *body_);
  if (close_) {
    head_.append("Connection: close\r\n");
  } else if (req_.version_minor == 0) {
    head_.append("Connection: keep-alive\r\n");
  }
  head_.append("\r\n");
  state_ = State::kStarted;
  return ok();
}

Status Response::transmit(struct iovec* iov, int n) {
  if (failed_) return make_error(ErrorCode::kSystem, "connection failed earlier");
  auto s = conn_.send(iov, n);
  if (!s) return fail(std::move(s).error().wrap("sending response"));
  return ok();
}

Status Response::send(int status, const Headers& headers, std::string_view body) {
  CORRAL_TRY(begin(status, headers, body.size()));
  if (mode_ == Mode::kNoBody) body = {};
  struct iovec iov[2] = {{head_.data(), head_.size()},
                         {const_cast<char*>(body.data()), body.size()}};
  CORRAL_TRY(transmit(iov, 2));
  written_ = body.size();
  state_ = State::kFinished;
  return ok();
}

Status Response::start(int status, const Headers& headers, std::optional<std::uint64_t> length) {
  CORRAL_TRY(begin(status, headers, length));
  // The head goes out now: a streaming handler may wait long for its first
  // bytes, and the client should see the status meanwhile.
  struct iovec iov = {head_.data(), head_.size()};
  return transmit(&iov, 1);
}

Status Response::write(std::string_view data) {
  if (state_ != State::kStarted) {
    return make_error(ErrorCode::kInternal, "write() outside a started response");
  }
  if (data.empty()) return ok();  // an empty chunk would end the body
  switch (mode_) {
    case Mode::kNoBody:
      if (head_only_) break;  // the GET body, which HEAD does not send
      return make_error(ErrorCode::kInternal, "this status has no body");
    case Mode::kLength: {
      if (data.size() > length_ - written_) {
        return make_error(ErrorCode::kInternal, "response body longer than its Content-Length");
      }
      struct iovec iov = {const_cast<char*>(data.data()), data.size()};
      CORRAL_TRY(transmit(&iov, 1));
      break;
    }
    case Mode::kUntilClose: {
      struct iovec iov = {const_cast<char*>(data.data()), data.size()};
      CORRAL_TRY(transmit(&iov, 1));
      break;
    }
    case Mode::kChunked: {
      // One chunk per write: size line, data, CRLF in one sendmsg.
      char line[24];
      int n = std::snprintf(line, sizeof(line), "%zx\r\n", data.size());
      struct iovec iov[3] = {{line, static_cast<std::size_t>(n)},
                             {const_cast<char*>(data.data()), data.size()},
                             {const_cast<char*>("\r\n"), 2}};
      CORRAL_TRY(transmit(iov, 3));
      break;
    }
  }
  written_ += data.size();
  return ok();
}

Status Response::finish() {
  if (state_ == State::kFinished) return ok();
  if (state_ == State::kIdle) return make_error(ErrorCode::kInternal, "finish() before start()");
  state_ = State::kFinished;
  if (mode_ == Mode::kChunked) {
    struct iovec iov = {const_cast<char*>("0\r\n\r\n"), 5};
    return transmit(&iov, 1);
  }
  if (mode_ == Mode::kLength && written_ < length_) {
    // The client waits for bytes that never come: only closing ends that.
    return fail(Error{ErrorCode::kInternal,
                      "response body ended " + std::to_string(length_ - written_) +
                          " bytes short of its Content-Length",
                      "", 0});
  }
  return ok();
}

bool Response::peer_gone() { return io::peer_closed(conn_.fd()); }

int Response::fd() const { return conn_.fd(); }

// --- RequestBody ---

RequestBody::RequestBody(Connection& conn, const RequestHead& req, const Response& resp)
    : conn_(conn), req_(req), resp_(resp) {
  remaining_ = req.content_length.value_or(0);
  done_ = !req.chunked && remaining_ == 0;
}

Result<std::size_t> RequestBody::read(char* buf, std::size_t cap) {
  if (done_ || cap == 0) return 0;
  if (failed_) return make_error(ErrorCode::kSystem, "request body: connection failed earlier");
  if (req_.expect_continue && !continue_sent_) {
    continue_sent_ = true;
    // Once a final response started, the client learns from it instead.
    if (!resp_.started()) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      struct iovec iov = {const_cast<char*>(kContinue.data()), kContinue.size()};
      auto s = conn_.send(&iov, 1);
      if (!s) {
        failed_ = true;
        conn_.mark_broken();
        return tl::unexpected(std::move(s).error().wrap("sending 100 Continue"));
      }
    }
  }
  auto r = req_.chunked ? read_chunked(buf, cap) : read_length(buf, cap);
  if (!r) {
    failed_ = true;
    conn_.mark_broken();
  }
  return r;
}

Result<std::size_t> RequestBody::read_length(char* buf, std::size_t cap) {
  std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(cap, remaining_));
  std::size_t n = 0;
  std::string_view have = conn_.buffered();
  if (!have.empty()) {
    n = std::min(want, have.size());
    std::memcpy(buf, have.data(), n);
    conn_.consume(n);
  } else if (want >= kDirectReadMin) {
    // Large reads go straight to the caller's buffer: no copy.
    auto got = io::recv_some(conn_.fd(), buf, want, conn_.io_timeouts());
    if (!got) return tl::unexpected(std::move(got).error().wrap("reading request body"));
    n = *got;
  } else {
    auto got = conn_.fill(conn_.io_timeouts());
    if (!got) return tl::unexpected(std::move(got).error().wrap("reading request body"));
    if (*got > 0) return read_length(buf, cap);
  }
  if (n == 0) {
    return make_error(ErrorCode::kSystem, "connection closed " + std::to_string(remaining_) +
                                              " bytes before the end of the request body");
  }
  remaining_ -= n;
  if (remaining_ == 0) done_ = true;
  return n;
}

Result<std::size_t> RequestBody::read_chunked(char* buf, std::size_t cap) {
  while (true) {
    std::string_view have = conn_.buffered();
    if (!have.empty()) {
      std::size_t produced = 0;
      auto used = decoder_.decode(have, buf, cap, produced);
      if (!used) return tl::unexpected(used.error());
      conn_.consume(*used);
      if (decoder_.done()) done_ = true;
      if (produced > 0 || done_) return produced;
    }
    auto got = conn_.fill(conn_.io_timeouts());
    if (!got) return tl::unexpected(std::move(got).error().wrap("reading request body"));
    if (*got == 0) {
      return make_error(ErrorCode::kSystem,
                        "connection closed before the end of the chunked request body");
    }
  }
}

// --- Connection ---

Result<std::size_t> Connection::fill(const io::Timeouts& t) {
  if (begin_ > 0) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == kBufferBytes) return make_error(ErrorCode::kInternal, "connection buffer full");
  auto n = io::recv_some(fd_, buf_.get() + end_, kBufferBytes - end_, t);
  if (n) end_ += *n;
  return n;
}

bool Connection::must_close(const RequestHead& req, const RequestBody& body) const {
  if (!req.keep_alive || broken_ || stopping()) return true;
  if (body.done()) return false;
  if (body.continue_pending()) return true;
  auto left = body.remaining();
  return left && *left > kDrainLimit;
}

Connection::HeadResult Connection::read_head(HeadBuffer& hb, io::Clock::time_point deadline) {
  bool any_bytes = false;
  while (true) {
    std::string_view have = buffered();
    if (!have.empty()) {
      any_bytes = true;
      auto complete = hb.feed(have);
      consume(have.size());
      if (!complete) {
        reply_error(431, "head_too_large", complete.error().message);
        return HeadResult::kClose;
      }
      if (*complete) {
        // Bytes after the head (body, or a pipelined request) go back; they
        // came from the last fill, so they fit.
        std::string_view rest = hb.leftover();
        std::memcpy(buf_.get(), rest.data(), rest.size());
        begin_ = 0;
        end_ = rest.size();
        return HeadResult::kOk;
      }
    }
    auto got = fill(io::Timeouts{milliseconds(0), deadline});
    if (!got) {
      // Silence is not worth an answer; a head cut short is.
      if (got.error().code == ErrorCode::kTimeout && any_bytes) {
        reply_error(408, "request_timeout", "the request head did not arrive in time");
      }
      return HeadResult::kClose;
    }
    if (*got == 0) return HeadResult::kClose;
  }
}

void Connection::serve(io::Clock::time_point accepted) {
  const ServerOptions& opt = env_.options;
  bool first = true;
  while (!stopping()) {
    // Until one of its requests authenticates, a TCP connection gets the
    // short unauthenticated head timeout for each head, counted from the
    // accept or the end of its previous response (idle wait included): it
    // cannot hold its slot longer without proving itself (issue 14).
    io::Clock::time_point since = first ? accepted : io::Clock::now();
    io::Clock::time_point proof_by = io::Clock::time_point::max();
    if (!env_.table.authenticated(env_.slot))
      proof_by = since + opt.connections.unauthenticated_head_timeout;
    io::Clock::time_point deadline = std::min(accepted + opt.head_timeout, proof_by);
    if (!first) {
      // Keep-alive: wait for the next request's first byte, then give its
      // head the full head timeout.
      if (begin_ == end_ &&
          !io::wait(fd_, POLLIN,
                    io::Timeouts{milliseconds(0),
                                 std::min(io::Clock::now() + opt.idle_timeout, proof_by)})) {
        return;
      }
      if (stopping()) return;
      deadline = std::min(io::Clock::now() + opt.head_timeout, proof_by);
    }
    first = false;
    HeadBuffer hb(opt.head_limits.max_head_bytes);
    if (read_head(hb, deadline) == HeadResult::kClose) return linger_close();
    auto req = parse_request_head(hb.head(), opt.head_limits);
    if (!req) {
      const bool head_only = hb.head().starts_with("HEAD ");
      if (req.error().code == ErrorCode::kResourceExhausted) {
        reply_error(431, "head_too_large", req.error().message, head_only);
      } else {
        reply_error(400, "bad_request", req.error().message, head_only);
      }
      return linger_close();
    }
    bool authenticated = env_.table.authenticated(env_.slot) ||
                         (opt.authenticate && opt.authenticate(peer_, *req));
    // False: the table closed this connection to make room meanwhile.
    if (!env_.table.begin_request(env_.slot, authenticated)) return;
    bool keep = handle(*req);
    env_.table.end_request(env_.slot);
    if (!keep) return linger_close();
  }
}

// Runs the handler, then makes sure the response is complete and the
// request body consumed. False: the connection must close.
bool Connection::handle(const RequestHead& req) {
  Response resp(*this, req);
  RequestBody body(*this, req, resp);
  resp.set_body(&body);
  try {
    env_.handler(peer_, req, body, resp);
  } catch (...) {
    // A throwing handler is a bug in it. The client still gets an answer,
    // or, mid-stream, a cut connection rather than a body that looks whole.
    broken_ = true;
    if (resp.started()) return false;
  }
  if (!resp.started()) {
    auto s = resp.send(500, {{"Content-Type", "application/json"}},
                       json_error("internal", "the request handler sent no response"));
    if (!s) return false;
  } else if (!resp.finished()) {
    if (!resp.finish()) return false;
  }
  if (resp.closing() || broken_) return false;
  return body.done() || drain(body);
}

// Reads and drops what the handler left of the request body, if little is
// left, so the connection can carry the next request.
bool Connection::drain(RequestBody& body) {
  char scratch[16 * 1024];
  std::uint64_t dropped = 0;
  while (!body.done()) {
    auto n = body.read(scratch, sizeof(scratch));
    if (!n || *n == 0) return body.done();
    dropped += *n;
    if (dropped > kDrainLimit) return false;
  }
  return true;
}

void Connection::reply_error(int status, std::string_view code, std::string_view message,
                             bool head_only) {
  std::string body = json_error(code, message);
  std::string head =
      "HTTP/1.1 " + std::to_string(status) + " " + std::string(status_reason(status)) +
      "\r\nDate: " + http_date() +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n";
  struct iovec iov[2] = {{head.data(), head.size()}, {body.data(), head_only ? 0 : body.size()}};
  (void)send(iov, 2);  // best effort: the connection closes either way
}

// Closes politely: after our FIN, whatever the client still sends is read
// and dropped for a moment, because closing with unread data makes the
// kernel send a reset that can destroy our response in flight.
void Connection::linger_close() {
  ::shutdown(fd_, SHUT_WR);
  io::Timeouts t{milliseconds(0), io::Clock::now() + kLingerTime};
  while (true) {
    auto n = io::recv_some(fd_, buf_.get(), kBufferBytes, t);
    if (!n || *n == 0) return;
  }
}

}  // namespace

// The codes are literals: the HTTP layer may not depend on src/api. A code
// that is also the daemon API's (request_timeout, internal) must be spelt as
// in api_error.h's table (api::error_codes()); the others (bad_request,
// head_too_large, overloaded) are this layer's own, in docs/api.md's second
// table.
std::string json_error(std::string_view code, std::string_view message) {
  std::string out = "{\"error\":{\"code\":";
  append_json_string_lossy(out, code);
  out.append(",\"message\":");
  append_json_string_lossy(out, message);
  out.append("}}");
  return out;
}

void serve_connection(int fd, const Peer& peer, const ConnectionEnv& env,
                      io::Clock::time_point accepted) {
  Connection conn(fd, peer, env);
  conn.serve(accepted);
}

void reject_overloaded(int fd, std::string_view message) {
  std::string body = json_error("overloaded", message);
  std::string msg =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
  // Never blocks the accept loop: the socket is non-blocking and a fresh
  // socket's send buffer holds this small response.
  (void)::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  // Drop what the client already sent (a reset could destroy the 503),
  // bounded so a flooding client cannot hold the accept loop.
  char scratch[4096];
  for (int i = 0; i < 16 && ::recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT) > 0; ++i) {
  }
}

}  // namespace corral::http
