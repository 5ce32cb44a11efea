#include "egress/gateway_config.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "netns/host_name.h"
#include "base/strings.h"
#include "egress/proxy_request.h"

namespace corral::net {

namespace {

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

}  // namespace

// --- Declared services -------------------------------------------------------

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
  const bool tls = url.size() >= 8 && ascii_lower(url.substr(0, 8)) == "https://";
  if (!tls && (url.size() < 7 || ascii_lower(url.substr(0, 7)) != "http://"))
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
  std::string t = ascii_lower(trim(text));
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
    std::string key = ascii_lower(trim(p.substr(0, e)));
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

// --- Request targets (also what a declared path prefix must be) -------------

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

}  // namespace corral::net
