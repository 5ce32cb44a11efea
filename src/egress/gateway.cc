#include "egress/gateway.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

#include "base/unique_fd.h"
#include "http/http_message.h"
#include "egress/gateway_token.h"
#include "netns/host_name.h"
#include "egress/proxy_request.h"
#include "egress/scrubbed_response.h"
#include "egress/socket_wait.h"
#include "egress/tls_stream.h"
#include "secrets/reflection_guard.h"
#include "secrets/secret_value.h"

namespace corral::net {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kChunk = 64 * 1024;
constexpr milliseconds kLingerOnRefusal{200};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && lower(a) == lower(b);
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  while (true) {
    std::size_t p = s.find(sep);
    out.push_back(trim(s.substr(0, p)));
    if (p == std::string_view::npos) break;
    s.remove_prefix(p + 1);
  }
  return out;
}

tl::unexpected<Error> invalid(std::string message, std::string hint = "") {
  return make_error(ErrorCode::kInvalidArgument, std::move(message), std::move(hint));
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u >= 0x7f) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

int status_of(GatewayRefusal r) {
  switch (r) {
    case GatewayRefusal::kMalformed:
    case GatewayRefusal::kPath:
      return 400;
    case GatewayRefusal::kNoToken:
    case GatewayRefusal::kBadToken:
      return 401;
    case GatewayRefusal::kUnknownService:
      return 404;
    case GatewayRefusal::kNotGranted:
    case GatewayRefusal::kMethod:
    case GatewayRefusal::kPathNotAllowed:
    case GatewayRefusal::kSecretRefused:
      return 403;
    case GatewayRefusal::kRateLimited:
      return 429;
    case GatewayRefusal::kLengthRequired:
      return 411;
    case GatewayRefusal::kUpstreamFailed:
    case GatewayRefusal::kUpstreamTls:
      return 502;
    case GatewayRefusal::kUpstreamTimeout:
      return 504;
    case GatewayRefusal::kTimeout:
      return 408;
    case GatewayRefusal::kNone:
    case GatewayRefusal::kCount:
      break;
  }
  return 500;
}

// A status line "HTTP/1.x NNN ...": its code, or 0.
int response_status(std::string_view bytes) {
  if (bytes.size() < 12 || bytes.substr(0, 7) != "HTTP/1." || bytes[8] != ' ') return 0;
  int code = 0;
  for (std::size_t i = 9; i < 12; ++i) {
    if (bytes[i] < '0' || bytes[i] > '9') return 0;
    code = code * 10 + (bytes[i] - '0');
  }
  return code;
}

// Fields never forwarded: hop-by-hop ones, our own, and Host (replaced).
bool dropped_field(std::string_view name) {
  static constexpr std::string_view kDropped[] = {"host",
                                                  "connection",
                                                  "keep-alive",
                                                  "proxy-connection",
                                                  "proxy-authorization",
                                                  "te",
                                                  "trailer",
                                                  "upgrade",
                                                  "x-corral-gateway-token",
                                                  "x-corral-sandbox",
                                                  "x-corral-service",
                                                  "transfer-encoding"};
  return std::find(std::begin(kDropped), std::end(kDropped), name) != std::end(kDropped);
}

std::optional<IpAddress> local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
  auto a = IpAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&ss));
  if (!a) return std::nullopt;
  return a->unmapped();
}

}  // namespace

// --- Declarations -----------------------------------------------------------

bool is_valid_gateway_service_name(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && i > 0 && i + 1 < name.size())) return false;
  }
  return true;
}

Result<GatewayUrl> parse_gateway_url(std::string_view url) {
  const std::string shown = "\"" + one_line(url) + "\"";
  const char* form =
      "write it as http://host:port/base or https://host:port/base (the base path "
      "is optional)";
  const bool tls = url.size() >= 8 && lower(url.substr(0, 8)) == "https://";
  if (!tls && (url.size() < 7 || lower(url.substr(0, 7)) != "http://"))
    return invalid("internal URL " + shown + " is not an http:// or https:// URL", form);
  std::string_view rest = url.substr(tls ? 8 : 7);
  std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.empty()) return invalid("internal URL " + shown + " has no host", form);
  if (authority.find('@') != std::string_view::npos)
    return invalid("internal URL " + shown + " has user information", form);
  if (rest.find_first_of("?#") != std::string_view::npos)
    return invalid("internal URL " + shown + " has a query or fragment", form);
  GatewayUrl out;
  std::optional<std::uint16_t> port;
  if (!split_host_port(authority, out.host, port) || out.host.empty())
    return invalid("internal URL " + shown + ": bad host or port", form);
  if (port && *port == 0) return invalid("internal URL " + shown + ": port 0", form);
  out.tls = tls;
  out.port = port.value_or(tls ? 443 : 80);
  for (char c : path) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '\\' || c == '%')
      return invalid("internal URL " + shown + ": the base path may hold only plain characters",
                     form);
  }
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path == "/") path = {};
  for (const auto& seg : split(path.empty() ? "" : path.substr(1), '/')) {
    if (!path.empty() && (seg.empty() || seg == "." || seg == ".."))
      return invalid("internal URL " + shown + ": the base path is not normalised", form);
  }
  out.base_path = std::string(path);
  return out;
}

Result<RateLimit> parse_gateway_rate(std::string_view text) {
  const std::string shown = "\"" + one_line(text) + "\"";
  const char* form = "write N/s or N/min, optionally with ,burst=M (0 or unlimited: no limit)";
  std::string t = lower(trim(text));
  if (t == "0" || t == "unlimited") return RateLimit{0, 0};
  std::string_view v = t;
  std::optional<double> burst;
  if (auto comma = v.find(','); comma != std::string_view::npos) {
    std::string b = trim(v.substr(comma + 1));
    v = v.substr(0, comma);
    if (b.rfind("burst=", 0) != 0) return invalid("rate " + shown + ": unknown part", form);
    double x = 0;
    auto [end, ec] = std::from_chars(b.data() + 6, b.data() + b.size(), x);
    if (ec != std::errc() || end != b.data() + b.size() || !(x >= 1) || x > 1e6)
      return invalid("rate " + shown + ": the burst must be a number from 1 to 1000000", form);
    burst = x;
  }
  std::size_t slash = v.find('/');
  if (slash == std::string_view::npos) return invalid("rate " + shown + " has no unit", form);
  std::string_view num = v.substr(0, slash), unit = v.substr(slash + 1);
  double n = 0;
  auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
  if (ec != std::errc() || end != num.data() + num.size() || !(n > 0) || n > 1e6)
    return invalid("rate " + shown + ": the count must be a positive number", form);
  double per_second = 0;
  if (unit == "s" || unit == "sec" || unit == "second")
    per_second = n;
  else if (unit == "min" || unit == "m" || unit == "minute")
    per_second = n / 60.0;
  else
    return invalid("rate " + shown + ": unknown unit \"" + std::string(unit) + "\"", form);
  return RateLimit{per_second, burst.value_or(std::max(1.0, 2 * per_second))};
}

Result<GatewayService> parse_gateway_service(std::string_view name, std::string_view url,
                                             const std::vector<std::string>& methods,
                                             const std::vector<std::string>& path_prefixes,
                                             std::optional<RateLimit> rate) {
  const std::string who = "gateway service \"" + one_line(name) + "\"";
  if (!is_valid_gateway_service_name(name))
    return invalid(who + ": not a valid name",
                   "use lower-case letters, digits and '-' (at most 63): it is the first path "
                   "segment of http://gateway.corral.internal/<service>/");
  GatewayService s;
  s.name = std::string(name);
  s.url = std::string(url);
  auto u = parse_gateway_url(url);
  if (!u) return tl::unexpected(u.error().wrap(who));
  s.host = u->host;
  s.port = u->port;
  s.tls = u->tls;
  s.base_path = u->base_path;
  if (!methods.empty()) {
    s.methods.clear();
    for (const auto& m : methods) {
      std::string up = m;
      for (char& c : up)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      bool token = !up.empty() && up.size() <= 20 &&
                   std::all_of(up.begin(), up.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
      if (!token || up == "CONNECT")
        return invalid(who + ": \"" + one_line(m) + "\" is not a method the gateway forwards",
                       "name HTTP methods such as GET, HEAD, POST, PUT, PATCH, DELETE");
      if (std::find(s.methods.begin(), s.methods.end(), up) == s.methods.end())
        s.methods.push_back(up);
    }
  }
  if (!path_prefixes.empty()) {
    s.path_prefixes.clear();
    for (const auto& p : path_prefixes) {
      auto checked = split_gateway_target("/x" + p);
      if (p.empty() || p.front() != '/' || p.find_first_of("?%#") != std::string::npos ||
          !checked || (p.size() > 1 && p.find("//") != std::string::npos))
        return invalid(who + ": path prefix \"" + one_line(p) + "\" is not a normalised path",
                       "write prefixes such as /v1/ or /health: they start with '/', without "
                       "'..', '//', '%', '?'");
      s.path_prefixes.push_back(p);
    }
  }
  if (rate) {
    if (rate->per_second < 0 || rate->burst < 0)
      return invalid(who + ": the rate limit cannot be negative");
    s.rate = *rate;
  }
  return s;
}

Result<GatewayService> parse_gateway_service_flag(std::string_view text) {
  const char* form = "NAME=URL[;methods=GET,POST][;paths=/v1/,/health][;rate=10/s]";
  std::size_t eq = text.find('=');
  if (eq == std::string_view::npos)
    return invalid("gateway service \"" + one_line(text) + "\" has no =URL", form);
  std::string name = trim(text.substr(0, eq));
  auto parts = split(text.substr(eq + 1), ';');
  std::string url = parts.front();
  std::vector<std::string> methods, paths;
  std::optional<RateLimit> rate;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    std::size_t e = p.find('=');
    std::string key = lower(trim(p.substr(0, e)));
    std::string value = e == std::string::npos ? "" : trim(p.substr(e + 1));
    if (e == std::string::npos || value.empty())
      return invalid("gateway service \"" + name + "\": \"" + one_line(p) + "\" has no value",
                     form);
    if (key == "methods") {
      for (auto& m : split(value, ',')) methods.push_back(m);
    } else if (key == "paths") {
      for (auto& m : split(value, ',')) paths.push_back(m);
    } else if (key == "rate") {
      auto r = parse_gateway_rate(value);
      if (!r) return tl::unexpected(r.error().wrap("gateway service \"" + name + "\""));
      rate = *r;
    } else {
      return invalid("gateway service \"" + name + "\": unknown option \"" + key + "\"", form);
    }
  }
  return parse_gateway_service(name, url, methods, paths, rate);
}

Result<GatewayTarget> split_gateway_target(std::string_view target) {
  const char* hint =
      "send the normalised path: http://gateway.corral.internal/<service>/<path>, without "
      "'.' or '..' segments, '//', or encoded '/' or '\\'";
  if (target.empty() || target.front() != '/') return invalid("the path must start with '/'", hint);
  GatewayTarget t;
  std::string_view path = target;
  if (auto q = target.find('?'); q != std::string_view::npos) {
    path = target.substr(0, q);
    t.query = std::string(target.substr(q + 1));
  }
  // Check every raw segment, and every decoded one.
  std::string decoded;
  for (std::size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u >= 0x7f || c == '\\') return invalid("the path has a forbidden byte", hint);
    if (c == '%') {
      if (i + 2 >= path.size() || !std::isxdigit(static_cast<unsigned char>(path[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(path[i + 2])))
        return invalid("the path has a bad percent escape", hint);
      int v = std::stoi(std::string(path.substr(i + 1, 2)), nullptr, 16);
      if (v == '/' || v == '\\' || v < 0x20 || v == 0x7f)
        return invalid("the path has an encoded '/', '\\' or control byte", hint);
      decoded += static_cast<char>(v);
      i += 2;
    } else {
      decoded += c;
    }
  }
  for (std::size_t i = 0; i < t.query.size(); ++i) {
    auto u = static_cast<unsigned char>(t.query[i]);
    if (u < 0x21 || u >= 0x7f) return invalid("the query has a forbidden byte", hint);
  }
  // Segments of the decoded path (same boundaries as the raw one: no
  // encoded '/').
  std::vector<std::string> segs;
  {
    std::string_view d = decoded;
    d.remove_prefix(1);
    while (true) {
      std::size_t s = d.find('/');
      segs.emplace_back(d.substr(0, s));
      if (s == std::string_view::npos) break;
      d.remove_prefix(s + 1);
    }
  }
  if (segs.front().empty()) return invalid("no service named: the path is /<service>/...", hint);
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const std::string& s = segs[i];
    if (s == "." || s == "..") return invalid("the path has a '" + s + "' segment", hint);
    // An empty segment: "//" anywhere; only the very last may be empty
    // (a trailing '/').
    if (s.empty() && i + 1 != segs.size())
      return invalid("the path has an empty segment ('//')", hint);
  }
  t.service = segs.front();
  std::size_t raw_slash = path.find('/', 1);
  t.rest = raw_slash == std::string_view::npos ? "/" : std::string(path.substr(raw_slash));
  std::size_t dec_slash = decoded.find('/', 1);
  t.decoded_rest = dec_slash == std::string::npos ? "/" : decoded.substr(dec_slash);
  return t;
}

bool gateway_path_allowed(const GatewayService& service, std::string_view rest) {
  for (const auto& p : service.path_prefixes) {
    if (p == "/") return true;
    if (rest.substr(0, p.size()) != p) continue;
    if (p.back() == '/' || rest.size() == p.size() || rest[p.size()] == '/') return true;
  }
  return false;
}

std::string_view gateway_refusal_name(GatewayRefusal r) {
  switch (r) {
    case GatewayRefusal::kNone:
      return "none";
    case GatewayRefusal::kMalformed:
      return "malformed";
    case GatewayRefusal::kPath:
      return "path";
    case GatewayRefusal::kNoToken:
      return "no_token";
    case GatewayRefusal::kBadToken:
      return "bad_token";
    case GatewayRefusal::kUnknownService:
      return "unknown_service";
    case GatewayRefusal::kNotGranted:
      return "not_granted";
    case GatewayRefusal::kMethod:
      return "method";
    case GatewayRefusal::kPathNotAllowed:
      return "path_not_allowed";
    case GatewayRefusal::kRateLimited:
      return "rate_limited";
    case GatewayRefusal::kLengthRequired:
      return "length_required";
    case GatewayRefusal::kUpstreamFailed:
      return "upstream_failed";
    case GatewayRefusal::kUpstreamTimeout:
      return "upstream_timeout";
    case GatewayRefusal::kTimeout:
      return "timeout";
    case GatewayRefusal::kSecretRefused:
      return "secret_refused";
    case GatewayRefusal::kUpstreamTls:
      return "upstream_tls";
    case GatewayRefusal::kCount:
      break;
  }
  return "?";
}

// --- The gateway ---------------------------------------------------------------

Result<std::unique_ptr<Gateway>> Gateway::create(std::vector<GatewayService> services,
                                                 std::string secret,
                                                 std::shared_ptr<Resolver> resolver,
                                                 GatewayAuditSink audit, GatewayOptions options) {
  if (secret.empty())
    return make_error(ErrorCode::kInvalidArgument, "the gateway needs a token secret");
  for (std::size_t i = 0; i < services.size(); ++i) {
    if (!is_valid_gateway_service_name(services[i].name))
      return invalid("gateway service \"" + services[i].name + "\": not a valid name");
    for (std::size_t j = 0; j < i; ++j)
      if (services[j].name == services[i].name)
        return invalid("gateway service \"" + services[i].name + "\" is declared twice");
  }
  std::unique_ptr<Gateway> g(new Gateway());
  if (std::any_of(services.begin(), services.end(),
                  [](const GatewayService& s) { return s.tls; })) {
    auto ctx = make_upstream_tls_context(options.ca_file);
    if (!ctx) return tl::unexpected(ctx.error().wrap("the gateway's https services"));
    g->tls_ = std::move(*ctx);
  }
  g->services_ = std::move(services);
  g->secret_ = std::move(secret);
  g->resolver_ = std::move(resolver);
  g->audit_ = std::move(audit);
  g->options_ = options;
  return g;
}

std::string Gateway::token(const std::string& sandbox_id, std::int64_t expires_at_unix) const {
  return mint_gateway_token(secret_, sandbox_id, expires_at_unix);
}

void Gateway::forget(const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  const std::string prefix = sandbox_id + "\n";
  for (auto it = buckets_.lower_bound(prefix);
       it != buckets_.end() && it->first.compare(0, prefix.size(), prefix) == 0;)
    it = buckets_.erase(it);
}

GatewayMetrics Gateway::metrics() const {
  std::lock_guard lock(mu_);
  return metrics_;
}

bool Gateway::take(const std::string& sandbox, const GatewayService& service) {
  const RateLimit& rate = service.rate;
  if (rate.per_second <= 0) return true;
  std::lock_guard lock(mu_);
  Bucket& b = buckets_[sandbox + "\n" + service.name];
  const auto now = Clock::now();
  const double burst = std::max(1.0, rate.burst);
  if (b.tokens < 0) {
    b.tokens = burst;
  } else {
    double elapsed = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(burst, b.tokens + elapsed * rate.per_second);
  }
  b.last = now;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

void Gateway::finish(GatewayEvent& ev, Clock::time_point start) {
  ev.duration_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
  {
    std::lock_guard lock(mu_);
    ++metrics_.requests;
    if (ev.allowed) ++metrics_.forwarded;
    if (ev.refusal != GatewayRefusal::kNone)
      ++metrics_.refused[static_cast<std::size_t>(ev.refusal)];
  }
  if (audit_) audit_(ev);
}

namespace {

// One request, from its first byte to its audit event.
class GatewaySession {
 public:
  GatewaySession(const GatewayOptions& options, const GatewayConnection& conn, GatewayEvent& ev)
      : options_(options), conn_(conn), ev_(ev), client_(conn.client) {}

  // Answers the client with our refusal (if it may still get one).
  void refuse(GatewayRefusal why, std::string reason, std::string fix) {
    ev_.allowed = false;
    ev_.refusal = why;
    ev_.reason = one_line(reason);
    if (answered_) return;
    answered_ = true;
    const int status = status_of(why);
    ev_.status = status;
    std::string body = "{\"error\":\"" + std::string(gateway_refusal_name(why)) +
                       "\",\"message\":\"" + json_escape(ev_.reason) + "\",\"fix\":\"" +
                       json_escape(one_line(fix)) + "\"}\n";
    std::string msg =
        "HTTP/1.1 " + std::to_string(status) + " " + std::string(http::status_reason(status)) +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nX-Corral-Refusal: " + std::string(gateway_refusal_name(why)) +
        (status == 401 ? "\r\nWWW-Authenticate: Bearer realm=\"corral-gateway\"" : "") +
        "\r\nConnection: close\r\n\r\n" + body;
    auto deadline = Clock::now() + kLingerOnRefusal;
    if (!send_all(client_, msg, deadline, -1)) return;
    ev_.bytes_down += msg.size();
    // A lingering close, so that unread request bytes do not reset the
    // connection before the client has read the answer.
    ::shutdown(client_, SHUT_WR);
    char scratch[4096];
    std::size_t dropped = 0;
    while (dropped < 256 * 1024 && wait_fd(client_, POLLIN, deadline, -1) == 1) {
      ssize_t n = ::recv(client_, scratch, sizeof scratch, MSG_DONTWAIT);
      if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) break;
      if (n > 0) dropped += static_cast<std::size_t>(n);
    }
  }

  // Answers the client with a body of ours (the runtime secret read).
  void answer(int status, std::string_view content_type, std::string& body) {
    answered_ = true;
    ev_.status = status;
    std::string msg = "HTTP/1.1 " + std::to_string(status) + " " +
                      std::string(http::status_reason(status)) +
                      "\r\nContent-Type: " + std::string(content_type) +
                      "\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n";
    msg += body;
    secrets::wipe(body);
    if (send_all(client_, msg, Clock::now() + kLingerOnRefusal, -1)) ev_.bytes_down += msg.size();
    secrets::wipe(msg);
    ::shutdown(client_, SHUT_WR);
  }

  // Reads the head: true with buf_ holding it (and maybe more).
  bool read_head() {
    buf_ = conn_.already_read;
    const auto deadline = Clock::now() + options_.head_timeout;
    const std::size_t limit = std::min(options_.max_head_bytes, kMaxProxyHeadBytes);
    for (;;) {
      std::size_t end = std::string_view(buf_).substr(0, limit).find("\r\n\r\n");
      if (end != std::string::npos) {
        head_end_ = end + 4;
        return true;
      }
      if (buf_.size() >= limit) {
        refuse(GatewayRefusal::kMalformed,
               "request head longer than " + std::to_string(limit) + " bytes",
               "send a smaller request head");
        return false;
      }
      if (!buf_.empty() && classify_http_start(buf_) == HttpStart::kNotHttp) {
        refuse(GatewayRefusal::kMalformed, "not an HTTP/1 request",
               "speak plain HTTP/1.1 to http://gateway.corral.internal/<service>/");
        return false;
      }
      int w = wait_fd(client_, POLLIN, deadline, -1);
      if (w != 1) {
        refuse(GatewayRefusal::kTimeout,
               w == 0 ? "no complete request head within " +
                            std::to_string(options_.head_timeout.count()) + " ms"
                      : std::string("the client went away"),
               "send the whole request head at once");
        return false;
      }
      char tmp[4096];
      ssize_t n = ::recv(client_, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        answered_ = n < 0;  // a reset client gets no answer
        refuse(GatewayRefusal::kMalformed, "the client closed before a complete request head",
               "send a complete request");
        return false;
      }
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }

  const std::string& buf() const { return buf_; }
  std::size_t head_end() const { return head_end_; }
  bool answered() const { return answered_; }
  void set_answered() { answered_ = true; }

 private:
  const GatewayOptions& options_;
  const GatewayConnection& conn_;
  GatewayEvent& ev_;
  int client_;
  std::string buf_;
  std::size_t head_end_ = 0;
  bool answered_ = false;
};

}  // namespace

void Gateway::serve(const GatewayConnection& conn) {
  const auto start = Clock::now();
  GatewayEvent ev;
  ev.sandbox = conn.sandbox;
  GatewaySession s(options_, conn, ev);
  auto done = [&] { finish(ev, start); };
  if (!s.read_head()) return done();

  auto req = parse_proxy_request(std::string_view(s.buf()).substr(0, s.head_end()));
  if (!req) {
    s.refuse(GatewayRefusal::kMalformed, req.error().message,
             "send a well-formed HTTP/1.1 request");
    return done();
  }
  ev.method = req->method;
  ev.path = req->head.target;
  if (req->form == ProxyRequest::kConnect) {
    s.refuse(GatewayRefusal::kMalformed, "CONNECT is not served by the gateway",
             "send plain requests to http://gateway.corral.internal/<service>/");
    return done();
  }
  // Where the client thinks it is: the gateway's name (or its address).
  {
    std::string host =
        req->form == ProxyRequest::kAbsolute ? req->target_host : req->host_header.value_or("");
    auto port = req->form == ProxyRequest::kAbsolute ? std::optional(req->target_port)
                                                     : req->host_header_port;
    auto here = local_address(conn.client);
    bool ok_host = host == kGatewayHost || (here && host == here->str());
    if (!ok_host || (port && *port != 80) ||
        (req->form == ProxyRequest::kAbsolute && req->host_header &&
         *req->host_header != req->target_host)) {
      s.refuse(GatewayRefusal::kMalformed,
               "the request is for \"" + host + "\", not " + std::string(kGatewayHost) + ":80",
               "use http://gateway.corral.internal/<service>/<path>");
      return done();
    }
  }

  // The runtime endpoint (issue 5, S1 "runtime API"): the value of the
  // secret behind the broker token in Authorization, for a tier that
  // allows it. The broker token is the credential; no gateway token.
  if (req->head.target == kSecretReadPath) {
    ev.service = "_secret";
    if (!options_.swapper) {
      s.refuse(GatewayRefusal::kUnknownService, "this gateway serves no secrets",
               "ask the owner to run the daemon with a secret store");
      return done();
    }
    std::string bearer;
    if (auto a = req->head.header("authorization");
        a && a->size() > 7 && iequals(a->substr(0, 7), "bearer "))
      bearer = trim(a->substr(7));
    if (req->method != "GET" || bearer.rfind(secrets::kTokenPrefix, 0) != 0) {
      s.refuse(GatewayRefusal::kNoToken, "a runtime secret read is GET with a broker token",
               "send GET /_secret with Authorization: Bearer $YOUR_SECRET_TOKEN");
      return done();
    }
    auto value = options_.swapper->read_value(bearer, conn.sandbox);
    secrets::wipe(bearer);
    if (!value) {
      s.refuse(GatewayRefusal::kSecretRefused, value.error().message,
               "only a live token of this sandbox for a low or medium secret can be read");
      return done();
    }
    ev.allowed = true;
    std::string body(value->view());
    s.answer(200, "application/octet-stream", body);
    return done();
  }

  // The token: X-Corral-Gateway-Token, else Authorization: Bearer.
  std::optional<std::string> token;
  bool token_in_authorization = false;
  if (auto t = req->head.header("x-corral-gateway-token")) {
    token = std::string(*t);
  } else if (auto a = req->head.header("authorization")) {
    std::string_view v = *a;
    // A broker token (issue 5) is for the swapper, never a gateway token.
    if (v.size() > 7 && iequals(v.substr(0, 7), "bearer ") &&
        trim(v.substr(7)).rfind(secrets::kTokenPrefix, 0) != 0) {
      token = trim(v.substr(7));
      token_in_authorization = true;
    }
  }
  if (!token || token->empty()) {
    s.refuse(GatewayRefusal::kNoToken, "no gateway token in the request",
             "send Authorization: Bearer $CORRAL_GATEWAY_TOKEN (or X-Corral-Gateway-Token)");
    return done();
  }
  TokenCheck tc = verify_gateway_token(secret_, *token, conn.sandbox,
                                       static_cast<std::int64_t>(std::time(nullptr)));
  if (!tc.ok()) {
    s.refuse(GatewayRefusal::kBadToken,
             tc.reason + " (" + std::string(token_error_name(tc.error)) + ")",
             "send this sandbox's own CORRAL_GATEWAY_TOKEN");
    return done();
  }

  auto target = split_gateway_target(req->head.target);
  if (!target) {
    s.refuse(GatewayRefusal::kPath, target.error().message, target.error().hint);
    return done();
  }
  ev.service = target->service;
  auto it = std::find_if(services_.begin(), services_.end(),
                         [&](const GatewayService& g) { return g.name == target->service; });
  if (it == services_.end()) {
    s.refuse(GatewayRefusal::kUnknownService,
             "no gateway service named \"" + target->service + "\"",
             "the first path segment names the service; ask the owner which are declared");
    return done();
  }
  const GatewayService& svc = *it;
  const auto& grants = conn.policy ? conn.policy->gateway_services : std::vector<std::string>{};
  if (std::find(grants.begin(), grants.end(), svc.name) == grants.end()) {
    s.refuse(GatewayRefusal::kNotGranted,
             "this sandbox's policy does not grant gateway service \"" + svc.name + "\"",
             "grant it in the spec (network.gateway) or with corral run --gateway " + svc.name);
    return done();
  }
  if (std::find(svc.methods.begin(), svc.methods.end(), req->method) == svc.methods.end()) {
    std::string allowed;
    for (const auto& m : svc.methods) allowed += (allowed.empty() ? "" : ", ") + m;
    s.refuse(GatewayRefusal::kMethod,
             "method " + req->method + " is not allowed for gateway service \"" + svc.name + "\"",
             "use one of: " + allowed);
    return done();
  }
  if (!gateway_path_allowed(svc, target->decoded_rest)) {
    std::string allowed;
    for (const auto& p : svc.path_prefixes) allowed += (allowed.empty() ? "" : ", ") + p;
    s.refuse(GatewayRefusal::kPathNotAllowed,
             "path " + one_line(target->decoded_rest) + " is not allowed for gateway service \"" +
                 svc.name + "\"",
             "paths must start with one of: " + allowed);
    return done();
  }
  if (req->head.chunked) {
    s.refuse(GatewayRefusal::kLengthRequired, "a chunked request body is not forwarded",
             "send the body with a Content-Length");
    return done();
  }
  if (!take(conn.sandbox, svc)) {
    s.refuse(GatewayRefusal::kRateLimited,
             "over the rate limit of gateway service \"" + svc.name + "\"",
             "send fewer requests per second (" + std::to_string(svc.rate.per_second) + "/s)");
    return done();
  }

  // The upstream request.
  const bool v6_host = svc.host.find(':') != std::string::npos;
  const std::string host_port =
      (v6_host ? "[" + svc.host + "]" : svc.host) + ":" + std::to_string(svc.port);
  ev.upstream = host_port;
  std::string head =
      req->method + " " + svc.base_path + target->rest +
      (target->query.empty() && req->head.target.find('?') == std::string::npos
           ? ""
           : "?" + target->query) +
      " HTTP/1.1\r\nHost: " +
      (svc.port == (svc.tls ? 443 : 80) ? (v6_host ? "[" + svc.host + "]" : svc.host) : host_port) +
      "\r\n";
  const std::vector<std::string> listed = connection_options(req->head.headers);
  for (const auto& h : req->head.headers) {
    if (dropped_field(h.name)) continue;
    if (token_in_authorization && h.name == "authorization") continue;
    if (std::find(listed.begin(), listed.end(), h.name) != listed.end() &&
        h.name != "content-length")
      continue;
    head += h.name + ": " + h.value + "\r\n";
  }
  head += "X-Corral-Sandbox: " + conn.sandbox + "\r\nConnection: close\r\n\r\n";

  // Connect (resolution included) within connect_timeout.
  const auto connect_deadline = Clock::now() + options_.connect_timeout;
  std::vector<IpAddress> addrs;
  if (auto lit = IpAddress::parse(svc.host)) {
    addrs.push_back(*lit);
  } else if (resolver_) {
    auto r = resolver_->resolve(svc.host, options_.connect_timeout);
    if (r) addrs = *r;
    if (addrs.empty()) {
      s.refuse(GatewayRefusal::kUpstreamFailed,
               "cannot resolve " + svc.host + (r ? "" : ": " + r.error().to_string()),
               "the internal service is unavailable: tell the owner");
      return done();
    }
  } else {
    s.refuse(GatewayRefusal::kUpstreamFailed, "no resolver for " + svc.host,
             "the internal service is unavailable: tell the owner");
    return done();
  }
  UniqueFd up;
  std::string last_error = "no address";
  bool timed_out = false;
  for (const auto& raw : addrs) {
    IpAddress a = raw.unmapped();
    UniqueFd fd(::socket(a.v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         IPPROTO_TCP));
    if (!fd) {
      last_error = "socket: " + std::string(errno_name(errno));
      continue;
    }
    const ConnectResult c = connect_until(fd.get(), a, svc.port, connect_deadline, conn.client);
    const int err = c.err;
    timed_out = timed_out || c.timed_out;
    if (err == 0) {
      up = std::move(fd);
      break;
    }
    last_error = "connect to " + a.str() + ":" + std::to_string(svc.port) + ": " +
                 std::string(errno_name(err));
    if (timed_out || Clock::now() >= connect_deadline) {
      timed_out = true;
      break;
    }
  }
  if (!up) {
    if (timed_out)
      s.refuse(GatewayRefusal::kUpstreamTimeout, "connect timed out (" + last_error + ")",
               "the internal service does not answer: tell the owner");
    else
      s.refuse(GatewayRefusal::kUpstreamFailed, last_error,
               "the internal service is unavailable: tell the owner");
    return done();
  }
  int one = 1;
  (void)::setsockopt(up.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  (void)::setsockopt(conn.client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const auto idle = options_.idle_timeout;

  // https: TLS to the service (SNI = its host), chain and name verified.
  std::unique_ptr<TlsStream> tls;
  if (svc.tls) {
    tls = std::make_unique<TlsStream>(tls_ ? new_upstream_ssl(tls_.get(), svc.host) : nullptr,
                                      up.get());
    if (!tls->handshake(Clock::now() + options_.connect_timeout, conn.client)) {
      s.refuse(GatewayRefusal::kUpstreamTls, "TLS to " + host_port + " failed: " + tls->error(),
               "the internal service's certificate is not trusted: tell the owner");
      return done();
    }
  }
  auto up_send = [&](std::string_view data) {
    return tls ? tls->write_all(data, Clock::now() + idle, conn.client)
               : send_all(up.get(), data, Clock::now() + idle, conn.client);
  };
  // > 0 bytes, 0 end of stream, -1 failed (or the client went away), -2 idle.
  auto up_recv = [&](char* buf, std::size_t n) -> long {
    if (tls) return tls->read(buf, n, Clock::now() + idle, conn.client);
    for (;;) {
      int w = wait_fd(up.get(), POLLIN, Clock::now() + idle, conn.client);
      if (w == 0) return -2;
      if (w < 0) return -1;
      ssize_t n_read = ::recv(up.get(), buf, n, MSG_DONTWAIT);
      if (n_read < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return n_read < 0 ? -1 : static_cast<long>(n_read);
    }
  };

  // Broker mode: tokens in the head become the secrets' values (or refuse
  // the request) once the service is connected (and, https,
  // verified), before anything is sent.
  bool secret_head = false;
  std::shared_ptr<const secrets::RedactionSet> reflection;
  if (options_.swapper) {
    secrets::OutboundRequest out{conn.sandbox, svc.host, svc.port, "gateway"};
    secrets::SwapResult sr = options_.swapper->swap(out, head);
    ev.secrets = sr.secrets;
    if (sr.outcome == secrets::SwapOutcome::kRefused) {
      std::string names;
      for (const auto& n : sr.secrets) names += (names.empty() ? "" : ", ") + n;
      s.refuse(GatewayRefusal::kSecretRefused,
               "the token of secret " + names + " may not be sent to gateway service \"" +
                   svc.name + "\" (" + svc.host + ")" + (sr.reason.empty() ? "" : ": " + sr.reason),
               "a broker token goes only to the hosts its secret names");
      secrets::wipe(head);
      return done();
    }
    secret_head = sr.outcome == secrets::SwapOutcome::kSwapped;
    if (secret_head) {
      // The answer is scanned for what went in (scrubbed_response.h): it
      // must come uncompressed, and without a guard nothing is sent.
      auto set = secrets::reflection_set(sr.swapped);
      if (!set) {
        secrets::wipe(head);
        s.refuse(GatewayRefusal::kUpstreamFailed,
                 "the answer could not be checked for the secret: " + set.error().message,
                 "tell the owner");
        return done();
      }
      reflection = std::move(*set);
      if (reflection) secrets::ask_identity_encoding(head);
    }
  }
  struct WipeHead {
    std::string& h;
    bool on;
    ~WipeHead() {
      if (on) secrets::wipe(h);
    }
  } wipe_head{head, secret_head};

  // Request: the head, then exactly Content-Length body bytes.
  std::uint64_t body_left = req->head.content_length.value_or(0);
  std::string_view first_body = std::string_view(s.buf()).substr(s.head_end());
  if (first_body.size() > body_left) first_body = first_body.substr(0, body_left);
  body_left -= first_body.size();
  auto upstream_failed = [&](const std::string& what) {
    s.refuse(GatewayRefusal::kUpstreamFailed, what, "the internal service failed: tell the owner");
    done();
  };
  const bool head_sent = up_send(head);
  const std::size_t head_size = head.size();
  if (secret_head) secrets::wipe(head);
  if (!head_sent || !up_send(first_body))
    return upstream_failed("sending the request to " + host_port + " failed");
  ev.bytes_up += head_size + first_body.size();
  std::string chunk(kChunk, '\0');
  while (body_left > 0) {
    int w = wait_fd(conn.client, POLLIN, Clock::now() + idle, -1);
    if (w != 1) {
      s.set_answered();
      s.refuse(GatewayRefusal::kTimeout, "the request body stalled or the client went away", "");
      return done();
    }
    ssize_t n =
        ::recv(conn.client, chunk.data(),
               static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, body_left)), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      s.set_answered();
      s.refuse(GatewayRefusal::kTimeout, "the client closed before the end of its request body",
               "");
      return done();
    }
    if (!up_send(std::string_view(chunk.data(), static_cast<std::size_t>(n))))
      return upstream_failed("sending the request body to " + host_port + " failed");
    ev.bytes_up += static_cast<std::uint64_t>(n);
    body_left -= static_cast<std::uint64_t>(n);
  }

  if (reflection) {
    // The answer to a swapped request: what went in is written back as
    // the token, head and body, reframed (scrubbed_response.h).
    ScrubbedResponse response(reflection, {req->method == "HEAD", req->head.version_minor >= 1});
    ScrubIo io;
    io.read = up_recv;
    io.write = [&](std::string_view data) {
      return send_all(conn.client, data, Clock::now() + idle, -1);
    };
    ScrubRelayResult sr = relay_scrubbed(response, io);
    ev.status = sr.status;
    ev.bytes_down += sr.bytes_down;
    if (!sr.answered) {
      if (sr.refused)
        s.refuse(GatewayRefusal::kUpstreamFailed, sr.end,
                 "a service must answer a request that carried a secret uncompressed");
      else if (sr.end == "idle timeout")
        s.refuse(GatewayRefusal::kUpstreamTimeout,
                 host_port + " sent no answer within " + std::to_string(idle.count()) + " ms",
                 "the internal service does not answer: tell the owner");
      else
        s.refuse(GatewayRefusal::kUpstreamFailed, host_port + ": " + sr.end,
                 "the internal service failed: tell the owner");
      if (tls) tls->close(Clock::now() + milliseconds(200));
      return done();
    }
    s.set_answered();
    ev.allowed = true;
    ev.reason = sr.end == "closed"
                    ? "forwarded to " + host_port + (svc.tls ? " (TLS)" : "") +
                          (sr.replaced > 0 ? "; the secret reflected in the answer was replaced by "
                                             "its token " +
                                                 std::to_string(sr.replaced) + " times"
                                           : "")
                    : sr.end;
    if (tls) tls->close(Clock::now() + milliseconds(200));
    ::shutdown(conn.client, SHUT_WR);
    return done();
  }

  // Response: streamed back as it comes, until the service closes.
  bool any = false;
  std::string status_bytes;
  for (;;) {
    long n = up_recv(chunk.data(), kChunk);
    if (n == -2 && !any) {
      s.refuse(GatewayRefusal::kUpstreamTimeout,
               host_port + " sent no answer within " + std::to_string(idle.count()) + " ms",
               "the internal service does not answer: tell the owner");
      return done();
    }
    if (n == -2 || (n < 0 && any)) {
      ev.reason = n == -2 ? "idle timeout" : "the client went away";
      break;
    }
    if (n <= 0) {
      if (!any) return upstream_failed(host_port + " closed without an answer");
      break;
    }
    if (!any) s.set_answered();
    any = true;
    if (status_bytes.size() < 12) {
      status_bytes.append(chunk.data(), std::min<std::size_t>(static_cast<std::size_t>(n), 12));
      ev.status = response_status(status_bytes);
    }
    if (!send_all(conn.client, std::string_view(chunk.data(), static_cast<std::size_t>(n)),
                  Clock::now() + idle, -1)) {
      ev.reason = "the client stopped reading";
      break;
    }
    ev.bytes_down += static_cast<std::uint64_t>(n);
  }
  ev.allowed = true;
  if (ev.reason.empty()) ev.reason = "forwarded to " + host_port + (svc.tls ? " (TLS)" : "");
  if (tls) tls->close(Clock::now() + milliseconds(200));
  ::shutdown(conn.client, SHUT_WR);
  done();
}

}  // namespace corral::net
