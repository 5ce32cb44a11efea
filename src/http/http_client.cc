#include "http/http_client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/unique_fd.h"
#include "http/char_class.h"
#include "http/http_parser.h"
#include "http/listen_socket.h"
#include "http/socket_io.h"

namespace corral::http {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t kReadBufferBytes = 256 * 1024;
constexpr std::size_t kSendBufferBytes = 1024 * 1024;
constexpr std::size_t kDirectReadMin = 64 * 1024;
constexpr std::size_t kMaxResponseHead = 64 * 1024;
// How long to wait for "100 Continue" before sending the body anyway
// (RFC 9110 10.1.1: a client need not wait forever).
constexpr milliseconds kContinueWait{1000};

constexpr std::string_view kEndpointForms =
    "use unix:/path/to/corral.sock, http://127.0.0.1:7070 or http://[::1]:7070";

tl::unexpected<Error> bad_endpoint(std::string_view url, std::string why,
                                   std::string hint = std::string(kEndpointForms)) {
  return make_error(ErrorCode::kInvalidArgument, "endpoint " + chars::quote(url, 200) + ": " + why,
                    std::move(hint));
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && chars::iequals(s.substr(0, prefix.size()), prefix);
}

Result<UniqueFd> connect_to(const Endpoint& ep, milliseconds timeout) {
  auto addr = ep.is_unix ? unix_address(ep.unix_path) : numeric_address(ep.host, ep.port);
  if (!addr) return tl::unexpected(addr.error());
  int family = addr->storage.ss_family;
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return errno_error("socket");
  io::Timeouts t{milliseconds(0), io::Clock::now() + timeout};
  const auto* sa = reinterpret_cast<const sockaddr*>(&addr->storage);
  while (true) {
    if (::connect(fd.get(), sa, addr->len) == 0) break;
    int err = errno;
    if (err == EINPROGRESS || (err == EINTR && !ep.is_unix)) {
      // TCP connects in the background: wait, then read the outcome.
      CORRAL_TRY(io::wait(fd.get(), POLLOUT, t));
      socklen_t len = sizeof(err);
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err == 0) break;
    } else if (err == EAGAIN || err == EINTR) {
      // A unix listener's backlog is full: retry until the deadline.
      if (io::Clock::now() >= t.deadline) {
        return make_error(ErrorCode::kTimeout, "the server accepts no connection (backlog full)");
      }
      ::poll(nullptr, 0, 5);
      continue;
    }
    std::string hint;
    if (err == ENOENT || err == ECONNREFUSED) hint = "is the corral daemon running?";
    return errno_error("connect", err, hint);
  }
  if (!ep.is_unix) {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

}  // namespace

// --- Endpoint ---

Result<Endpoint> Endpoint::parse(std::string_view url) {
  Endpoint ep;
  if (starts_with_nocase(url, "unix:")) {
    std::string_view path = url.substr(5);
    if (path.starts_with("//")) path.remove_prefix(2);  // unix:///run/x.sock
    if (path.empty() || path.front() != '/') {
      return bad_endpoint(url, "the unix socket path must be absolute");
    }
    ep.is_unix = true;
    ep.unix_path.assign(path);
    auto addr = unix_address(ep.unix_path);
    if (!addr) return bad_endpoint(url, addr.error().message, "");
    return ep;
  }
  if (starts_with_nocase(url, "https://")) {
    return bad_endpoint(url, "https is not supported: corral speaks plain HTTP",
                        "use the unix socket, or http:// to a loopback address (a TLS "
                        "terminator in front of the daemon ends TLS for remote clients)");
  }
  if (!starts_with_nocase(url, "http://")) return bad_endpoint(url, "unknown scheme");
  std::string_view rest = url.substr(7);
  if (rest.ends_with("/")) rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos) {
    return bad_endpoint(url, "only scheme, host and port are allowed (no path, query or user)");
  }
  std::string_view host;
  std::string_view port;
  bool has_port = false;
  if (rest.starts_with("[")) {
    std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad_endpoint(url, "unterminated '[' in host");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad_endpoint(url, "garbage after ']'");
      port = after.substr(1);
      has_port = true;
    }
    if (host.find(':') == std::string_view::npos) {
      return bad_endpoint(url, "brackets are for IPv6 addresses only");
    }
  } else {
    std::size_t colon = rest.find(':');
    host = rest.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      has_port = true;
    }
  }
  if (host.empty()) return bad_endpoint(url, "no host");
  ep.port = 80;
  if (has_port) {
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return bad_endpoint(url, "the port must be a number from 1 to 65535");
    }
    unsigned n = 0;
    for (char c : port) n = n * 10 + static_cast<unsigned>(c - '0');
    if (n == 0 || n > 65535) return bad_endpoint(url, "the port must be a number from 1 to 65535");
    ep.port = static_cast<std::uint16_t>(n);
  }
  ep.host.assign(host);
  auto addr = numeric_address(ep.host, ep.port);
  if (!addr) return bad_endpoint(url, addr.error().message, addr.error().hint);
  return ep;
}

std::string Endpoint::host_header() const {
  if (is_unix) return "localhost";
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != 80) h += ":" + std::to_string(port);
  return h;
}

// --- Client ---

struct Client::Impl {
  Endpoint endpoint;
  milliseconds connect_timeout{0};
  milliseconds io_timeout{0};
  int hangup_fd = -1;
  UniqueFd fd;
  std::unique_ptr<char[]> buf{new char[kReadBufferBytes]};
  std::size_t begin = 0;
  std::size_t end = 0;
  std::unique_ptr<char[]> send_buf;  // streaming requests only

  // The current response body.
  enum class Body { kNone, kLength, kChunked, kUntilClose };
  Body body = Body::kNone;
  std::uint64_t remaining = 0;
  ChunkedDecoder decoder;
  bool reusable = false;  // the connection may carry the next request
  // The request in flight is a HEAD: its answer ends with the head,
  // whatever framing fields it has (RFC 9112 6.3).
  bool head_request = false;

  io::Timeouts timeouts() const {
    return io::Timeouts{io_timeout, io::Clock::time_point::max(), hangup_fd};
  }
  std::string_view buffered() const { return std::string_view(buf.get() + begin, end - begin); }
  void consume(std::size_t n) {
    begin += n;
    if (begin == end) begin = end = 0;
  }
  void drop_connection() {
    fd.reset();
    begin = end = 0;
    body = Body::kNone;
    reusable = false;
  }

  Status ensure_connected();
  Result<std::size_t> fill();
  Result<std::string> build_head(std::string_view method, std::string_view target,
                                 const Headers& headers, std::optional<std::uint64_t> length,
                                 bool chunked, bool& expect, bool& close);
  Result<ResponseHead> read_response(bool request_close);
  Result<std::optional<ResponseHead>> await_continue(bool request_close);
  Result<ResponseHead> after_write_error(Error e, bool request_close);
  Status send_bytes(struct iovec* iov, int n);
  Result<std::size_t> read_body(char* out, std::size_t cap);
  void body_finished() {
    body = Body::kNone;
    if (!reusable) drop_connection();
  }
};

Status Client::Impl::ensure_connected() {
  if (fd && reusable && body == Body::kNone && begin == end) {
    // A keep-alive connection the server closed meanwhile (idle timeout)
    // reads as ready: replace it rather than fail the request on it.
    struct pollfd p = {fd.get(), POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 0) return ok();
  }
  drop_connection();
  auto c = connect_to(endpoint, connect_timeout);
  if (!c) {
    std::string where =
        endpoint.is_unix ? "unix:" + endpoint.unix_path : "http://" + endpoint.host_header();
    return tl::unexpected(std::move(c).error().wrap("connecting to " + where));
  }
  fd = std::move(*c);
  reusable = true;
  return ok();
}

Result<std::size_t> Client::Impl::fill() {
  if (begin > 0) {
    std::memmove(buf.get(), buf.get() + begin, end - begin);
    end -= begin;
    begin = 0;
  }
  if (end == kReadBufferBytes) return make_error(ErrorCode::kInternal, "client buffer full");
  auto n = io::recv_some(fd.get(), buf.get() + end, kReadBufferBytes - end, timeouts());
  if (n) end += *n;
  return n;
}

Result<std::string> Client::Impl::build_head(std::string_view method, std::string_view target,
                                             const Headers& headers,
                                             std::optional<std::uint64_t> length, bool chunked,
                                             bool& expect, bool& close) {
  if (!chars::is_token(method)) {
    return make_error(ErrorCode::kInvalidArgument, "invalid method " + chars::quote(method));
  }
  if (target.empty() || target.front() != '/' ||
      !std::all_of(target.begin(), target.end(),
                   [](char c) { return chars::is_target_char(static_cast<unsigned char>(c)); })) {
    return make_error(ErrorCode::kInvalidArgument, "invalid request target " + chars::quote(target),
                      "percent-encode the path and query (http::percent_encode)");
  }
  std::string head;
  head.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  bool has_host = false;
  for (const auto& h : headers) {
    if (!chars::is_token(h.name) || !chars::is_field_value(h.value)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "invalid request header " + chars::quote(h.name));
    }
    if (chars::iequals(h.name, "content-length") || chars::iequals(h.name, "transfer-encoding")) {
      return make_error(ErrorCode::kInvalidArgument,
                        "request header " + h.name + " is set by the client itself");
    }
    if (chars::iequals(h.name, "host")) has_host = true;
    if (chars::iequals(h.name, "expect") && chars::iequals(h.value, "100-continue")) expect = true;
    if (chars::iequals(h.name, "connection") && chars::list_has_token(h.value, "close"))
      close = true;
    head.append(h.name).append(": ").append(h.value).append("\r\n");
  }
  if (!has_host) head.append("Host: ").append(endpoint.host_header()).append("\r\n");
  if (chunked) {
    head.append("Transfer-Encoding: chunked\r\n");
  } else if (length) {
    head.append("Content-Length: ").append(std::to_string(*length)).append("\r\n");
  }
  head.append("\r\n");
  return head;
}

Status Client::Impl::send_bytes(struct iovec* iov, int n) {
  return io::send_all(fd.get(), iov, n, timeouts());
}

Result<ResponseHead> Client::Impl::read_response(bool request_close) {
  while (true) {
    HeadBuffer hb(kMaxResponseHead);
    while (true) {
      std::string_view have = buffered();
      if (!have.empty()) {
        auto complete = hb.feed(have);
        consume(have.size());
        if (!complete) return tl::unexpected(complete.error().wrap("reading response"));
        if (*complete) break;
      }
      auto n = fill();
      if (!n) return tl::unexpected(std::move(n).error().wrap("reading response"));
      if (*n == 0) {
        return make_error(ErrorCode::kSystem,
                          "the server closed the connection without a response");
      }
    }
    std::string_view rest = hb.leftover();
    std::memcpy(buf.get(), rest.data(), rest.size());
    begin = 0;
    end = rest.size();
    auto resp = parse_response_head(hb.head());
    if (!resp) return tl::unexpected(std::move(resp).error().wrap("parsing response"));
    if (resp->status == 101) {
      return make_error(ErrorCode::kSystem, "the server switched protocols (101), not supported");
    }
    if (resp->status < 200) continue;  // interim (100 Continue, 103): the final one follows
    reusable = resp->keep_alive && !request_close;
    decoder = ChunkedDecoder();
    if (head_request) {
      body = Body::kNone;
    } else if (resp->chunked) {
      body = Body::kChunked;
    } else if (resp->content_length) {
      body = *resp->content_length > 0 ? Body::kLength : Body::kNone;
      remaining = *resp->content_length;
    } else {
      body = Body::kUntilClose;
    }
    if (body == Body::kNone) body_finished();
    return std::move(*resp);
  }
}

// After a head with "Expect: 100-continue": a final response before the
// body was sent means the server does not want it.
Result<std::optional<ResponseHead>> Client::Impl::await_continue(bool request_close) {
  milliseconds wait = io_timeout.count() > 0 ? std::min(io_timeout, kContinueWait) : kContinueWait;
  while (true) {
    if (begin == end) {
      struct pollfd p = {fd.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) {
        return std::optional<ResponseHead>();  // no answer in time: send the body
      }
    }
    // Peek at the next head without consuming it: a final response is
    // then read again, with its body framing, by read_response.
    HeadBuffer hb(kMaxResponseHead);
    while (true) {
      auto complete = hb.feed(buffered());
      if (!complete) return tl::unexpected(complete.error().wrap("reading response"));
      if (*complete) break;
      hb.clear();
      auto n = fill();
      if (!n) return tl::unexpected(std::move(n).error().wrap("reading response"));
      if (*n == 0) return make_error(ErrorCode::kSystem, "the server closed the connection");
    }
    auto resp = parse_response_head(hb.head());
    if (!resp) return tl::unexpected(std::move(resp).error().wrap("parsing response"));
    if (resp->status == 100) {
      consume(hb.head().size());
      return std::optional<ResponseHead>();
    }
    if (resp->status > 101 && resp->status < 200) {
      consume(hb.head().size());  // another interim response (103): keep waiting
      continue;
    }
    auto final_resp = read_response(request_close);
    if (!final_resp) return tl::unexpected(final_resp.error());
    reusable = false;  // the body we announced was never sent
    if (body == Body::kNone) drop_connection();
    return std::optional<ResponseHead>(std::move(*final_resp));
  }
}

// The server may answer and close before it read the whole body (an error
// status, say): the write then fails, but the answer is worth more.
Result<ResponseHead> Client::Impl::after_write_error(Error e, bool request_close) {
  if (e.sys_errno == EPIPE || e.sys_errno == ECONNRESET) {
    auto resp = read_response(request_close);
    if (resp) {
      reusable = false;
      if (body == Body::kNone) drop_connection();
      return resp;
    }
  }
  drop_connection();
  return tl::unexpected(std::move(e).wrap("sending request"));
}

Result<std::size_t> Client::Impl::read_body(char* out, std::size_t cap) {
  if (body == Body::kNone || cap == 0) return 0;
  switch (body) {
    case Body::kNone:
      return 0;
    case Body::kLength: {
      std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(cap, remaining));
      std::size_t n = 0;
      std::string_view have = buffered();
      if (!have.empty()) {
        n = std::min(want, have.size());
        std::memcpy(out, have.data(), n);
        consume(n);
      } else if (want >= kDirectReadMin) {
        auto got = io::recv_some(fd.get(), out, want, timeouts());
        if (!got) return tl::unexpected(got.error());
        n = *got;
      } else {
        auto got = fill();
        if (!got) return tl::unexpected(got.error());
        if (*got > 0) return read_body(out, cap);
      }
      if (n == 0) {
        return make_error(ErrorCode::kSystem, "connection closed " + std::to_string(remaining) +
                                                  " bytes before the end of the response body");
      }
      remaining -= n;
      if (remaining == 0) body_finished();
      return n;
    }
    case Body::kChunked:
      while (true) {
        std::string_view have = buffered();
        if (!have.empty()) {
          std::size_t produced = 0;
          auto used = decoder.decode(have, out, cap, produced);
          if (!used) return tl::unexpected(used.error());
          consume(*used);
          if (decoder.done()) body_finished();
          if (produced > 0 || body == Body::kNone) return produced;
        }
        auto got = fill();
        if (!got) return tl::unexpected(got.error());
        if (*got == 0) {
          return make_error(ErrorCode::kSystem,
                            "connection closed before the end of the chunked response body");
        }
      }
    case Body::kUntilClose: {
      std::string_view have = buffered();
      if (!have.empty()) {
        std::size_t n = std::min(cap, have.size());
        std::memcpy(out, have.data(), n);
        consume(n);
        return n;
      }
      auto got = io::recv_some(fd.get(), out, cap, timeouts());
      if (!got) return tl::unexpected(got.error());
      if (*got == 0) body_finished();
      return *got;
    }
  }
  return 0;
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

Result<Client> Client::connect(const Endpoint& endpoint, std::chrono::milliseconds timeout) {
  auto impl = std::make_unique<Impl>();
  impl->endpoint = endpoint;
  impl->connect_timeout = timeout;
  impl->io_timeout = timeout;
  CORRAL_TRY(impl->ensure_connected());
  return Client(std::move(impl));
}

void Client::set_io_timeout(std::chrono::milliseconds timeout) { impl_->io_timeout = timeout; }

void Client::end_when_gone(int fd) { impl_->hangup_fd = fd; }

Result<ResponseHead> Client::send(std::string_view method, std::string_view target,
                                  const Headers& headers, std::string_view body) {
  Impl& s = *impl_;
  bool expect = false;
  bool close = false;
  // No Content-Length on a bodiless GET and the like (RFC 9110 8.6).
  bool announce = !body.empty() || method == "POST" || method == "PUT" || method == "PATCH";
  s.head_request = method == "HEAD";
  auto head = s.build_head(method, target, headers,
                           announce ? std::optional<std::uint64_t>(body.size()) : std::nullopt,
                           false, expect, close);
  if (!head) return tl::unexpected(head.error());
  CORRAL_TRY(s.ensure_connected());
  if (expect && !body.empty()) {
    struct iovec iov = {head->data(), head->size()};
    if (auto st = s.send_bytes(&iov, 1); !st) return s.after_write_error(st.error(), close);
    auto early = s.await_continue(close);
    if (!early) {
      s.drop_connection();
      return tl::unexpected(early.error());
    }
    if (*early) return std::move(**early);
    head->clear();
  }
  struct iovec iov[2] = {{head->data(), head->size()},
                         {const_cast<char*>(body.data()), body.size()}};
  if (auto st = s.send_bytes(iov, 2); !st) return s.after_write_error(st.error(), close);
  auto resp = s.read_response(close);
  if (!resp) s.drop_connection();
  return resp;
}

Result<ResponseHead> Client::send_streaming(std::string_view method, std::string_view target,
                                            const Headers& headers, const BodySource& source,
                                            std::optional<std::uint64_t> source_length) {
  Impl& s = *impl_;
  bool expect = false;
  bool close = false;
  s.head_request = method == "HEAD";
  auto head = s.build_head(method, target, headers, source_length, !source_length, expect, close);
  if (!head) return tl::unexpected(head.error());
  CORRAL_TRY(s.ensure_connected());
  struct iovec hiov = {head->data(), head->size()};
  if (auto st = s.send_bytes(&hiov, 1); !st) return s.after_write_error(st.error(), close);
  if (expect && source_length.value_or(1) > 0) {
    auto early = s.await_continue(close);
    if (!early) {
      s.drop_connection();
      return tl::unexpected(early.error());
    }
    if (*early) return std::move(**early);
  }
  if (!s.send_buf) s.send_buf.reset(new char[kSendBufferBytes]);
  std::uint64_t total = 0;
  while (true) {
    auto n = source(s.send_buf.get(), kSendBufferBytes);
    if (!n || *n > kSendBufferBytes) {
      // The server got part of a body: this connection cannot be reused.
      s.drop_connection();
      if (!n) return tl::unexpected(std::move(n).error().wrap("request body source"));
      return make_error(ErrorCode::kInternal, "request body source overfilled its buffer");
    }
    if (*n == 0) break;
    if (source_length && *n > *source_length - total) {
      s.drop_connection();
      return make_error(ErrorCode::kInvalidArgument,
                        "request body source produced more than the declared " +
                            std::to_string(*source_length) + " bytes");
    }
    total += *n;
    Status st;
    if (source_length) {
      struct iovec iov = {s.send_buf.get(), *n};
      st = s.send_bytes(&iov, 1);
    } else {
      // One chunk per source read.
      char line[24];
      int len = std::snprintf(line, sizeof(line), "%zx\r\n", *n);
      struct iovec iov[3] = {{line, static_cast<std::size_t>(len)},
                             {s.send_buf.get(), *n},
                             {const_cast<char*>("\r\n"), 2}};
      st = s.send_bytes(iov, 3);
    }
    if (!st) return s.after_write_error(st.error(), close);
  }
  if (source_length && total < *source_length) {
    s.drop_connection();
    return make_error(ErrorCode::kInvalidArgument, "request body source ended " +
                                                       std::to_string(*source_length - total) +
                                                       " bytes short of the declared length");
  }
  if (!source_length) {
    struct iovec iov = {const_cast<char*>("0\r\n\r\n"), 5};
    if (auto st = s.send_bytes(&iov, 1); !st) return s.after_write_error(st.error(), close);
  }
  auto resp = s.read_response(close);
  if (!resp) s.drop_connection();
  return resp;
}

Result<std::size_t> Client::read_body(char* buf, std::size_t cap) {
  auto n = impl_->read_body(buf, cap);
  if (!n) {
    impl_->drop_connection();
    return tl::unexpected(std::move(n).error().wrap("reading response body"));
  }
  return n;
}

Result<std::string> Client::read_all(std::size_t limit) {
  std::string out;
  while (true) {
    std::size_t old = out.size();
    std::size_t want = std::min<std::size_t>(256 * 1024, limit + 1 - old);
    out.resize(old + want);
    auto n = read_body(out.data() + old, want);
    if (!n) return tl::unexpected(n.error());
    out.resize(old + *n);
    if (*n == 0) return out;
    if (out.size() > limit) {
      impl_->drop_connection();
      return make_error(ErrorCode::kResourceExhausted,
                        "response body exceeds the limit of " + std::to_string(limit) + " bytes");
    }
  }
}

}  // namespace corral::http
