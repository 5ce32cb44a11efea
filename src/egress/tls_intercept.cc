#include "egress/tls_intercept.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <string_view>

#include "http/http_parser.h"
#include "base/strings.h"
#include "egress/proxy_request.h"
#include "egress/scrubbed_response.h"
#include "egress/tls_stream.h"
#include "secrets/reflection_guard.h"
#include "secrets/secret_value.h"
#include "secrets/token_swapper.h"

namespace corral::net {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kChunk = 16 * 1024;
constexpr std::size_t kMaxResponseHead = 64 * 1024;
constexpr std::chrono::milliseconds kCloseGrace{200};

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The proxy's own answer, over the sandbox's TLS connection.
void answer(TlsStream& client, InterceptResult& r, int status, const std::string& text) {
  std::string body = "corral egress proxy: " + one_line(text, 300) + "\n";
  std::string msg = "HTTP/1.1 " + std::to_string(status) + " " +
                    std::string(http::status_reason(status)) +
                    "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  r.status = status;
  (void)client.write_all(msg, Clock::now() + kCloseGrace);
}

// The final response head as the sandbox gets it: the status line and the
// fields as sent, minus the hop-by-hop ones, plus Connection: close.
std::string rewrite_response_head(std::string_view raw, const http::ResponseHead& parsed) {
  const std::vector<std::string> listed = connection_options(parsed.headers);
  std::string out;
  std::size_t eol = raw.find("\r\n");
  out.append(raw.substr(0, eol + 2));
  std::size_t at = eol + 2;
  while (at < raw.size()) {
    std::size_t end = raw.find("\r\n", at);
    if (end == std::string_view::npos || end == at) break;
    std::string_view line = raw.substr(at, end - at);
    at = end + 2;
    std::string name = ascii_lower(line.substr(0, line.find(':')));
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    if (name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
        (std::find(listed.begin(), listed.end(), name) != listed.end() &&
         name != "content-length" && name != "transfer-encoding"))
      continue;
    out.append(line).append("\r\n");
  }
  out.append("Connection: close\r\n\r\n");
  return out;
}

// Feeds the chunked bytes of `in` to `d`: how many belong to the body.
bool chunked_prefix(http::ChunkedDecoder& d, std::string_view in, std::size_t& used) {
  used = 0;
  char scratch[kChunk];
  while (used < in.size() && !d.done()) {
    std::size_t produced = 0;
    auto r = d.decode(in.substr(used), scratch, sizeof scratch, produced);
    if (!r) return false;
    if (*r == 0 && produced == 0) break;
    used += *r;
  }
  return true;
}

class Relay {
 public:
  explicit Relay(InterceptSpec& spec) : s_(spec) {}
  InterceptResult run();

 private:
  Clock::time_point idle() const { return Clock::now() + s_.idle_timeout; }
  bool read_request_head(TlsStream& client, std::string& buf, std::size_t& head_end);
  bool forward_body(TlsStream& client, TlsStream& up, const http::RequestHead& head,
                    std::string_view first);
  void stream_response(TlsStream& client, TlsStream& up, bool head_request);
  // The answer to a swapped request: the swap's texts written back as
  // their tokens (scrubbed_response.h).
  void stream_scrubbed(TlsStream& client, TlsStream& up, ScrubbedResponse& response);

  InterceptSpec& s_;
  InterceptResult r_;
};

bool Relay::read_request_head(TlsStream& client, std::string& buf, std::size_t& head_end) {
  const auto deadline = Clock::now() + s_.head_timeout;
  char tmp[kChunk];
  for (;;) {
    std::size_t limit = std::min(buf.size(), kMaxProxyHeadBytes);
    std::size_t end = std::string_view(buf.data(), limit).find("\r\n\r\n");
    if (end != std::string_view::npos) {
      head_end = end + 4;
      return true;
    }
    if (buf.size() >= kMaxProxyHeadBytes) {
      r_.outcome = InterceptOutcome::kMalformed;
      r_.reason = "request head longer than " + std::to_string(kMaxProxyHeadBytes) + " bytes";
      answer(client, r_, 431, r_.reason);
      return false;
    }
    if (!buf.empty() && classify_http_start(buf) == HttpStart::kNotHttp) {
      r_.outcome = InterceptOutcome::kMalformed;
      r_.reason = "not an HTTP/1.1 request inside TLS to " + s_.host;
      answer(client, r_, 400, r_.reason);
      return false;
    }
    long n = client.read(tmp, sizeof tmp, deadline, s_.upstream);
    if (n > 0) {
      buf.append(tmp, static_cast<std::size_t>(n));
      continue;
    }
    if (n == -2 && !buf.empty()) {
      r_.outcome = InterceptOutcome::kTimeout;
      r_.reason =
          "no complete request head within " + std::to_string(s_.head_timeout.count()) + " ms";
      answer(client, r_, 408, r_.reason);
      return false;
    }
    r_.outcome = InterceptOutcome::kNoRequest;
    r_.reason = n == 0    ? "the client closed before a request"
                : n == -2 ? "the client sent no request in time"
                          : "the client connection failed before a request: " + client.error();
    return false;
  }
}

bool Relay::forward_body(TlsStream& client, TlsStream& up, const http::RequestHead& head,
                         std::string_view first) {
  char tmp[kChunk];
  if (head.chunked) {
    http::ChunkedDecoder d;
    std::string_view piece = first;
    for (;;) {
      std::size_t used = 0;
      if (!chunked_prefix(d, piece, used)) {
        r_.end = "malformed chunked request body";
        return false;
      }
      if (used > 0 && !up.write_all(piece.substr(0, used), idle(), s_.client)) {
        r_.end = "sending the request body failed: " + up.error();
        return false;
      }
      if (d.done()) return true;
      long n = client.read(tmp, sizeof tmp, idle(), s_.upstream);
      if (n <= 0) {
        r_.end = "the client ended before the end of its request body";
        return false;
      }
      piece = std::string_view(tmp, static_cast<std::size_t>(n));
    }
  }
  std::uint64_t left = head.content_length.value_or(0);
  std::string_view piece =
      first.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(left, first.size())));
  for (;;) {
    if (!piece.empty() && !up.write_all(piece, idle(), s_.client)) {
      r_.end = "sending the request body failed: " + up.error();
      return false;
    }
    left -= piece.size();
    if (left == 0) return true;
    long n = client.read(tmp, static_cast<std::size_t>(std::min<std::uint64_t>(left, sizeof tmp)),
                         idle(), s_.upstream);
    if (n <= 0) {
      r_.end = "the client ended before the end of its request body";
      return false;
    }
    piece = std::string_view(tmp, static_cast<std::size_t>(n));
  }
}

void Relay::stream_response(TlsStream& client, TlsStream& up, bool head_request) {
  char tmp[kChunk];
  http::HeadBuffer hb(kMaxResponseHead);
  std::string rest;  // bytes after the final head
  http::ResponseHead final_head;
  bool any = false;
  bool have_final = false;
  while (!have_final) {
    long n = up.read(tmp, sizeof tmp, idle(), s_.client);
    if (n <= 0) {
      if (!any) {
        r_.end = n == -2 ? "the upstream sent no answer in time"
                         : "the upstream closed without an answer";
        answer(client, r_, n == -2 ? 504 : 502, r_.end + " (" + s_.host + ")");
      } else {
        r_.end = "the upstream ended inside a response head";
      }
      return;
    }
    any = true;
    auto complete = hb.feed(std::string_view(tmp, static_cast<std::size_t>(n)));
    if (!complete) {
      r_.end = "response head too large";
      answer(client, r_, 502, r_.end);
      return;
    }
    while (*complete && !have_final) {
      http::HeadLimits limits;
      limits.max_head_bytes = kMaxResponseHead;
      limits.max_headers = 256;
      auto parsed = http::parse_response_head(hb.head(), limits);
      if (!parsed) {
        r_.end = "malformed response head: " + parsed.error().message;
        answer(client, r_, 502, r_.end);
        return;
      }
      std::string after(hb.leftover());
      if (parsed->status >= 100 && parsed->status < 200 && parsed->status != 101) {
        if (!client.write_all(hb.head(), idle(), s_.upstream)) {
          r_.end = "the client stopped reading";
          return;
        }
        hb.clear();
        complete = hb.feed(after);
        if (!complete) {
          r_.end = "response head too large";
          return;
        }
        continue;
      }
      final_head = std::move(*parsed);
      r_.status = final_head.status;
      std::string rewritten = rewrite_response_head(hb.head(), final_head);
      if (!client.write_all(rewritten, idle(), s_.upstream)) {
        r_.end = "the client stopped reading";
        return;
      }
      rest = std::move(after);
      have_final = true;
    }
  }
  const bool no_body = head_request || final_head.status == 204 || final_head.status == 304 ||
                       final_head.status == 101;
  if (no_body) {
    r_.end = "closed";
    return;
  }
  http::ChunkedDecoder d;
  std::uint64_t left = final_head.content_length.value_or(0);
  const bool until_close = !final_head.chunked && !final_head.content_length;
  std::string_view piece = rest;
  for (;;) {
    std::string_view send = piece;
    bool done = false;
    if (final_head.chunked) {
      std::size_t used = 0;
      if (!chunked_prefix(d, piece, used)) {
        r_.end = "malformed chunked response body";
        return;
      }
      send = piece.substr(0, used);
      done = d.done();
    } else if (!until_close) {
      send = piece.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(left, piece.size())));
      left -= send.size();
      done = left == 0;
    }
    if (!send.empty() && !client.write_all(send, idle(), s_.upstream)) {
      r_.end = "the client stopped reading";
      return;
    }
    if (done) {
      r_.end = "closed";
      return;
    }
    long n = up.read(tmp, sizeof tmp, idle(), s_.client);
    if (n == 0 && until_close) {
      r_.end = "closed";
      return;
    }
    if (n <= 0) {
      r_.end = n == -2 ? "idle timeout (" + std::to_string(s_.idle_timeout.count()) + " ms)"
                       : "the upstream ended inside the response body";
      return;
    }
    piece = std::string_view(tmp, static_cast<std::size_t>(n));
  }
}

void Relay::stream_scrubbed(TlsStream& client, TlsStream& up, ScrubbedResponse& response) {
  ScrubIo io;
  io.read = [&](char* buf, std::size_t n) { return up.read(buf, n, idle(), s_.client); };
  io.write = [&](std::string_view data) { return client.write_all(data, idle(), s_.upstream); };
  ScrubRelayResult sr = relay_scrubbed(response, io);
  r_.status = sr.status;
  r_.end = sr.end;
  if (sr.refused) {
    // An answer corral could not check for the secret (compressed): audited
    // as a refusal, and a 502 if the sandbox has had nothing yet.
    r_.outcome = InterceptOutcome::kSecretRefused;
    r_.reason = sr.end;
  }
  if (sr.refused && !sr.answered) {
    answer(client, r_, 502, sr.end);
  } else if (!sr.answered && sr.end != "closed") {
    answer(client, r_, sr.end == "idle timeout" ? 504 : 502,
           "the upstream sent no answer (" + s_.host + "): " + sr.end);
  }
}

InterceptResult Relay::run() {
  // 1. The sandbox's handshake, from the ClientHello already read.
  TlsStream client(s_.leaf ? SSL_new(s_.leaf.get()) : nullptr, s_.client, s_.client_hello);
  if (client.ssl() != nullptr) SSL_set_accept_state(client.ssl());
  auto finish = [&](TlsStream* up) {
    r_.bytes_down = client.bytes_sent();
    if (up != nullptr) {
      up->close(Clock::now() + kCloseGrace);
      r_.bytes_up = up->bytes_sent();
    }
    client.close(Clock::now() + kCloseGrace);
    r_.bytes_down = client.bytes_sent();
    ::shutdown(s_.client, SHUT_WR);
    return r_;
  };
  if (!client.handshake(Clock::now() + s_.head_timeout, s_.upstream)) {
    r_.outcome = InterceptOutcome::kClientTls;
    r_.reason = "the sandbox's TLS handshake failed (does it trust corral's CA?): " +
                one_line(client.error(), 300);
    r_.bytes_down = client.bytes_sent();
    return r_;
  }
  // 2. The upstream's, verified.
  TlsStream up(s_.upstream_ctx ? new_upstream_ssl(s_.upstream_ctx, s_.host) : nullptr, s_.upstream);
  if (!up.handshake(Clock::now() + s_.idle_timeout, s_.client)) {
    r_.outcome = InterceptOutcome::kUpstreamTls;
    r_.reason = "TLS to " + s_.host + ":" + std::to_string(s_.port) +
                " refused: " + one_line(up.error(), 300);
    answer(client, r_, 502, r_.reason);
    r_.bytes_up = up.bytes_sent();
    return finish(nullptr);
  }
  // 3. The request head.
  std::string buf;
  std::size_t head_end = 0;
  if (!read_request_head(client, buf, head_end)) return finish(&up);
  auto req = parse_proxy_request(std::string_view(buf).substr(0, head_end));
  if (!req || req->form == ProxyRequest::kConnect) {
    r_.outcome = InterceptOutcome::kMalformed;
    r_.reason = req ? std::string("CONNECT inside TLS") : req.error().message;
    answer(client, r_, 400, r_.reason);
    return finish(&up);
  }
  r_.method = req->method;
  r_.target = req->head.target;
  if ((req->form == ProxyRequest::kAbsolute && req->target_host != s_.host) ||
      (req->host_header && *req->host_header != s_.host) ||
      (req->form == ProxyRequest::kOrigin && !req->host_header)) {
    r_.outcome = InterceptOutcome::kMismatch;
    r_.reason = "HTTP Host " + (req->host_header ? *req->host_header : std::string("(none)")) +
                " is not the TLS host " + s_.host;
    answer(client, r_, 403, r_.reason);
    return finish(&up);
  }
  std::string head = std::move(req->upstream_head);
  std::shared_ptr<const secrets::RedactionSet> reflection;
  if (s_.swapper != nullptr) {
    secrets::OutboundRequest out{s_.sandbox, s_.host, s_.port, "tls-intercept"};
    secrets::SwapResult sr = s_.swapper->swap(out, head);
    r_.secrets = sr.secrets;
    if (sr.outcome == secrets::SwapOutcome::kRefused) {
      r_.outcome = InterceptOutcome::kSecretRefused;
      r_.reason = "a broker token (" + joined(sr.secrets) + ") may not be sent to " + s_.host +
                  (sr.reason.empty() ? "" : ": " + sr.reason);
      std::string stale =
          secrets::stale_token_refusal(sr, s_.host + ":" + std::to_string(s_.port));
      answer(client, r_, 403,
             !stale.empty() ? stale
                            : "the token of secret " + joined(sr.secrets) +
                                  " may not be sent to this host (" + s_.host + ")" +
                                  (sr.reason.empty() ? "" : ": " + sr.reason));
      secrets::wipe(head);
      return finish(&up);
    }
    if (sr.outcome == secrets::SwapOutcome::kSwapped) {
      // The answer is scanned for what went in: it must come uncompressed,
      // and a guard that cannot be built sends nothing.
      auto set = secrets::reflection_set(sr.swapped);
      if (!set) {
        secrets::wipe(head);
        r_.outcome = InterceptOutcome::kMalformed;
        r_.reason = "the answer could not be checked for the secret: " + set.error().message;
        answer(client, r_, 502, r_.reason);
        return finish(&up);
      }
      reflection = std::move(*set);
      if (reflection) secrets::ask_identity_encoding(head);
    }
  }
  if (req->head.expect_continue && (req->head.chunked || req->head.content_length.value_or(0) > 0))
    (void)client.write_all("HTTP/1.1 100 Continue\r\n\r\n", idle(), s_.upstream);
  // 4. Forward: the head (wiped once sent), the body, then the answer.
  const bool sent = up.write_all(head, idle(), s_.client);
  secrets::wipe(head);
  r_.outcome = InterceptOutcome::kRelayed;
  if (!sent) {
    r_.end = "sending the request failed: " + up.error();
    answer(client, r_, 502, r_.end);
    return finish(&up);
  }
  (void)forward_body(client, up, req->head, std::string_view(buf).substr(head_end));
  // An upstream may answer before the whole body (an early 413): the
  // answer is relayed either way.
  if (reflection) {
    ScrubbedResponse response(reflection, {req->method == "HEAD", req->head.version_minor >= 1});
    stream_scrubbed(client, up, response);
  } else {
    stream_response(client, up, req->method == "HEAD");
  }
  return finish(&up);
}

}  // namespace

InterceptResult relay_intercepted(InterceptSpec spec) {
  Relay relay(spec);
  InterceptResult r = relay.run();
  ERR_clear_error();
  return r;
}

}  // namespace corral::net
