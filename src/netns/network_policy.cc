#include "netns/network_policy.h"

#include "base/strings.h"

#include <algorithm>
#include <cctype>

namespace corral::net {

namespace {

constexpr const char* kRuleForm =
    "write a rule as [http|tls|tcp://]host[:ports], e.g. pypi.org, pypi.org:443, "
    "*.pythonhosted.org, tcp://db.example.com:5432, 203.0.113.0/24:443";

tl::unexpected<Error> bad_rule(std::string_view text, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument,
                    "network rule \"" + std::string(text) + "\": " + why, kRuleForm);
}

// A DNS name as the rules and the proxy compare it: lower case, no
// trailing dot.
std::string canonical_name(std::string_view name) {
  std::string n = ascii_lower(name);
  if (!n.empty() && n.back() == '.') n.pop_back();
  return n;
}

bool valid_domain(std::string_view d) {
  if (d.empty() || d.size() > 253) return false;
  std::size_t start = 0;
  while (start <= d.size()) {
    std::size_t dot = d.find('.', start);
    std::string_view label = d.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (label.empty() || label.size() > 63) return false;
    if (label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

std::optional<std::uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v == 0 || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

std::string ports_text(const std::vector<PortRange>& ports) {
  if (ports.size() == 1 && ports[0].first == 1 && ports[0].last == 65535) return "*";
  std::string out;
  for (const auto& r : ports) {
    if (!out.empty()) out += ",";
    out += std::to_string(r.first);
    if (r.last != r.first) out += "-" + std::to_string(r.last);
  }
  return out;
}

std::string protocols_text(ProtocolSet p) {
  if (p == (kHttp | kTls)) return "";
  if (p == kHttp) return "http://";
  if (p == kTls) return "tls://";
  return "tcp://";
}

}  // namespace

const char* protocol_name(Protocol p) {
  switch (p) {
    case kHttp:
      return "http";
    case kTls:
      return "tls";
    case kTcp:
      return "tcp";
  }
  return "?";
}

bool NetworkRule::matches_name(std::string_view raw) const {
  if (domain.empty() || raw.empty()) return false;
  const std::string name = canonical_name(raw);
  if (domain == "*") return IpAddress::parse(name) == std::nullopt;  // names, not literals
  if (domain.rfind("*.", 0) == 0) {
    std::string_view suffix = std::string_view(domain).substr(1);  // ".example.com"
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  return name == domain;
}

bool NetworkRule::matches_address(const IpAddress& a) const {
  return prefix && prefix->contains(a);
}

bool NetworkRule::matches_port(std::uint16_t port) const {
  for (const auto& r : ports) {
    if (port >= r.first && port <= r.last) return true;
  }
  return false;
}

bool NetworkRule::all_ports() const {
  return ports.size() == 1 && ports[0].first == 1 && ports[0].last == 65535;
}

Result<NetworkRule> parse_rule(std::string_view text, bool deny) {
  NetworkRule rule;
  rule.deny = deny;
  std::string_view rest = text;
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front())))
    rest.remove_prefix(1);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back())))
    rest.remove_suffix(1);
  if (rest.empty()) return bad_rule(text, "empty rule");

  bool protocol_given = false;
  if (std::size_t sep = rest.find("://"); sep != std::string_view::npos) {
    const std::string proto = ascii_lower(rest.substr(0, sep));
    if (proto == "http")
      rule.protocols = kHttp;
    else if (proto == "tls" || proto == "https")
      rule.protocols = kTls;
    else if (proto == "tcp")
      rule.protocols = kTcp;
    else
      return bad_rule(text, "unknown protocol \"" + proto + "\" (use http, tls or tcp)");
    protocol_given = true;
    rest.remove_prefix(sep + 3);
  }
  if (deny && !protocol_given) rule.protocols = kHttp | kTls | kTcp;

  // Split host and ports: "[v6/len]:ports", "host:ports", "host".
  std::string_view host = rest, ports;
  bool has_ports = false;
  if (!rest.empty() && rest.front() == '[') {
    std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad_rule(text, "unclosed [ in an IPv6 address");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad_rule(text, "expected :ports after ]");
      ports = after.substr(1);
      has_ports = true;
    }
  } else if (std::size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    if (rest.find(':') != colon)
      return bad_rule(text, "an IPv6 address must be written in brackets, e.g. [2001:db8::1]:443");
    host = rest.substr(0, colon);
    ports = rest.substr(colon + 1);
    has_ports = true;
  }
  if (host.empty()) return bad_rule(text, "no host");

  if (auto prefix = IpPrefix::parse(host)) {
    rule.prefix = *prefix;
  } else if (host.find('/') != std::string_view::npos ||
             (!host.empty() && std::isdigit(static_cast<unsigned char>(host.back())) &&
              host.find_first_not_of("0123456789./") == std::string_view::npos)) {
    return bad_rule(text, "\"" + std::string(host) + "\" is not a valid IP address or prefix");
  } else {
    std::string d = canonical_name(host);
    std::string_view check = d;
    if (d == "*") {
      check = {};
    } else if (d.rfind("*.", 0) == 0) {
      check = std::string_view(d).substr(2);
    } else if (d.find('*') != std::string::npos) {
      return bad_rule(text, "a * may only stand alone or as the first label (*.example.com)");
    }
    if (d != "*" && !valid_domain(check))
      return bad_rule(text, "\"" + std::string(host) + "\" is not a valid domain name");
    if (d != "*" && d.rfind("*.", 0) != 0 && check.find('.') == std::string_view::npos && !deny)
      return bad_rule(text, "\"" + std::string(host) +
                                "\" is a single label; name a full domain such as example.com");
    rule.domain = d;
  }

  if (has_ports) {
    if (ports == "*") {
      rule.ports.push_back({1, 65535});
    } else {
      std::size_t start = 0;
      while (start <= ports.size()) {
        std::size_t comma = ports.find(',', start);
        std::string_view item =
            ports.substr(start, comma == std::string_view::npos ? comma : comma - start);
        std::size_t dash = item.find('-');
        auto first = parse_port(item.substr(0, dash));
        auto last = dash == std::string_view::npos ? first : parse_port(item.substr(dash + 1));
        if (!first || !last || *last < *first)
          return bad_rule(text, "bad port \"" + std::string(item) +
                                    "\" (a port is 1-65535; ranges as 8000-8100; * for all)");
        rule.ports.push_back({*first, *last});
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
    }
  } else if (deny) {
    rule.ports.push_back({1, 65535});
  } else if (rule.protocols == kTcp) {
    return bad_rule(text, "a tcp rule must name its ports, e.g. tcp://db.example.com:5432");
  } else {
    if (rule.protocols & kHttp) rule.ports.push_back({80, 80});
    if (rule.protocols & kTls) rule.ports.push_back({443, 443});
  }

  std::string host_text =
      rule.prefix ? (rule.prefix->address.v6 ? "[" + rule.prefix->str() + "]" : rule.prefix->str())
                  : rule.domain;
  if (rule.prefix && rule.prefix->length == (rule.prefix->address.v6 ? 128 : 32)) {
    host_text = rule.prefix->address.v6 ? "[" + rule.prefix->address.str() + "]"
                                        : rule.prefix->address.str();
  }
  rule.text = (deny && !protocol_given ? "" : protocols_text(rule.protocols)) + host_text + ":" +
              ports_text(rule.ports);
  return rule;
}

const char* network_mode_name(NetworkMode m) {
  switch (m) {
    case NetworkMode::kNone:
      return "none";
    case NetworkMode::kAllowlist:
      return "allowlist";
    case NetworkMode::kOpen:
      return "open";
  }
  return "?";
}

std::optional<NetworkMode> parse_network_mode(std::string_view name) {
  if (name == "none") return NetworkMode::kNone;
  if (name == "allowlist") return NetworkMode::kAllowlist;
  if (name == "open") return NetworkMode::kOpen;
  return std::nullopt;
}

bool NetworkPolicy::has_network() const {
  if (mode == NetworkMode::kNone) return false;
  if (mode == NetworkMode::kOpen || !gateway_services.empty()) return true;
  return std::any_of(rules.begin(), rules.end(), [](const NetworkRule& r) { return !r.deny; });
}

namespace {

// Whether rule `r` is for this port and protocol. A tcp rule lets any
// bytes through; http and tls rules only their own.
bool covers_port_and_protocol(const NetworkRule& r, std::uint16_t port, Protocol protocol) {
  return r.matches_port(port) && ((r.protocols & protocol) || (r.protocols & kTcp));
}

bool rule_matches(const NetworkRule& r, const EgressQuery& q) {
  if (!covers_port_and_protocol(r, q.port, q.protocol)) return false;
  if (!r.domain.empty()) return r.matches_name(q.name);
  return q.address && r.matches_address(*q.address);
}

Decision denied(std::string reason, std::string rule = {}) {
  return Decision{false, std::move(rule), std::move(reason)};
}

}  // namespace

Decision decide(const NetworkPolicy& policy, const EgressQuery& query) {
  if (policy.mode == NetworkMode::kNone) return denied("network mode is none");
  for (const auto& r : policy.rules) {
    if (r.deny && rule_matches(r, query)) return denied("denied by rule", r.text);
  }
  if (policy.mode == NetworkMode::kOpen) return Decision{true, "", "network mode is open"};
  for (const auto& r : policy.rules) {
    if (!r.deny && rule_matches(r, query)) return Decision{true, r.text, "allowed by rule"};
  }
  std::string what = query.name.empty() && query.address ? query.address->str() : query.name;
  return denied(std::string("no rule allows ") + protocol_name(query.protocol) + " to " + what +
                ":" + std::to_string(query.port));
}

namespace {

// Whether prefix `p` names an address of class `c` on purpose: all of it
// lies in that class (its first and last address are of it), and for a
// metadata address, it is that one address.
bool names_class(const IpPrefix& p, AddressClass c) {
  if (c == AddressClass::kMetadata) return p.length == (p.address.v6 ? 128 : 32);
  return classify(p.address) == c && classify(p.last()) == c;
}

}  // namespace

Decision check_address(const NetworkPolicy& policy, const IpAddress& address, std::uint16_t port,
                       Protocol protocol) {
  auto covers = [&](const NetworkRule& r) {
    return r.matches_address(address) && covers_port_and_protocol(r, port, protocol);
  };
  for (const auto& r : policy.rules) {
    if (r.deny && covers(r)) return denied("address denied by rule", r.text);
  }
  const AddressClass c = classify(address);
  if (c == AddressClass::kPublic) return Decision{true, "", "public address"};
  for (const auto& r : policy.rules) {
    if (!r.deny && covers(r) && names_class(*r.prefix, c))
      return Decision{true, r.text, std::string(address_class_name(c)) + " address named by rule"};
  }
  return denied(address.str() + " is a " + address_class_name(c) +
                " address; only a rule naming it by address (within its " + address_class_name(c) +
                " range, for port " + std::to_string(port) + ") allows it");
}

Decision check_dns_name(const NetworkPolicy& policy, std::string_view name) {
  if (policy.mode == NetworkMode::kNone) return denied("network mode is none");
  // Only a deny of the whole name (every port, and every protocol: a deny
  // without one, or a tcp one) makes it unresolvable; `http://x` denies
  // plain HTTP to x, not x itself.
  auto whole = [](const NetworkRule& r) { return r.all_ports() && (r.protocols & kTcp); };
  for (const auto& r : policy.rules) {
    if (r.deny && whole(r) && r.matches_name(name)) return denied("denied by rule", r.text);
  }
  if (policy.mode == NetworkMode::kOpen) return Decision{true, "", "network mode is open"};
  for (const auto& r : policy.rules) {
    if (!r.deny && r.matches_name(name)) return Decision{true, r.text, "allowed by rule"};
  }
  return denied("no rule names " + canonical_name(name));
}

const std::vector<NetworkTemplate>& default_network_templates() {
  static const std::vector<NetworkTemplate> templates = {
      {"code-exec",
       1,
       NetworkMode::kAllowlist,
       {"pypi.org", "files.pythonhosted.org", "registry.npmjs.org", "deb.debian.org",
        "security.debian.org"},
       {},
       "package registries for installing dependencies (PyPI, npm, Debian)"},
      {"data-query",
       1,
       NetworkMode::kAllowlist,
       {},
       {},
       "no public internet: only the gateway services the spec grants"},
      {"scraping",
       1,
       NetworkMode::kAllowlist,
       {"*:80,443"},
       {},
       "any public web site over http and https (ports 80 and 443), nothing else"},
  };
  return templates;
}

Result<NetworkPolicy> resolve_policy(const NetworkRequest& request,
                                     const std::vector<NetworkTemplate>& templates) {
  NetworkPolicy policy;
  const NetworkTemplate* tmpl = nullptr;
  if (!request.template_name.empty()) {
    std::string name = request.template_name;
    int version = 0;  // 0: the latest
    if (std::size_t at = name.find('@'); at != std::string::npos) {
      auto v = parse_port(name.substr(at + 1));
      if (!v)
        return make_error(ErrorCode::kInvalidArgument,
                          "network template \"" + name + "\": bad version",
                          "write name or name@version, e.g. code-exec@1");
      version = *v;
      name = name.substr(0, at);
    }
    for (const auto& t : templates) {
      if (t.name == name &&
          (version == 0 ? (!tmpl || t.version > tmpl->version) : t.version == version))
        tmpl = &t;
    }
    if (!tmpl) {
      std::string known;
      for (const auto& t : templates)
        known += (known.empty() ? "" : ", ") + t.name + "@" + std::to_string(t.version);
      return make_error(ErrorCode::kInvalidArgument,
                        "no network template \"" + request.template_name + "\"",
                        "the daemon knows: " + (known.empty() ? std::string("none") : known));
    }
    policy.mode = tmpl->mode;
    policy.template_name = tmpl->name + "@" + std::to_string(tmpl->version);
  }
  if (!request.mode.empty()) {
    auto mode = parse_network_mode(request.mode);
    if (!mode)
      return make_error(ErrorCode::kInvalidArgument,
                        "network mode \"" + request.mode + "\" is unknown",
                        "use none, allowlist or open");
    policy.mode = *mode;
  } else if (!tmpl && (!request.allow.empty() || !request.gateway.empty())) {
    policy.mode = NetworkMode::kAllowlist;  // rules without a mode: what they say
  }

  auto add = [&](const std::string& text, bool deny) -> Status {
    auto rule = parse_rule(text, deny);
    if (!rule) return tl::unexpected(rule.error());
    policy.rules.push_back(std::move(*rule));
    return ok();
  };
  std::vector<std::string> removed;
  for (const auto& text : request.remove) {
    auto r = parse_rule(text, false);
    removed.push_back(r ? r->text : text);
  }
  std::vector<bool> used(removed.size(), false);
  if (tmpl) {
    for (const auto& text : tmpl->deny) CORRAL_TRY(add(text, true));
    for (const auto& text : tmpl->allow) {
      auto r = parse_rule(text, false);
      if (!r) return tl::unexpected(r.error().wrap("template " + policy.template_name));
      auto it = std::find(removed.begin(), removed.end(), r->text);
      if (it != removed.end()) {
        used[static_cast<std::size_t>(it - removed.begin())] = true;
        continue;
      }
      policy.rules.push_back(std::move(*r));
    }
  }
  for (std::size_t i = 0; i < removed.size(); ++i) {
    if (!used[i])
      return make_error(
          ErrorCode::kInvalidArgument,
          "network.remove: \"" + request.remove[i] + "\" is not a rule of " +
              (tmpl ? "template " + policy.template_name : std::string("any template")),
          "remove only rules the template has, written as it lists them");
  }
  for (const auto& text : request.deny) CORRAL_TRY(add(text, true));
  for (const auto& text : request.allow) CORRAL_TRY(add(text, false));

  for (const auto& s : request.dns_servers) {
    std::string host = s;
    if (std::size_t colon = s.rfind(':'); colon != std::string::npos && s.find(':') == colon) {
      if (!parse_port(std::string_view(s).substr(colon + 1)))
        return make_error(ErrorCode::kInvalidArgument, "dns server \"" + s + "\": bad port",
                          "write an IP address, optionally with :port");
      host = s.substr(0, colon);
    }
    if (!IpAddress::parse(host))
      return make_error(ErrorCode::kInvalidArgument,
                        "dns server \"" + s + "\" is not an IP address",
                        "dns_servers lists resolvers by address, e.g. 9.9.9.9 or 10.0.0.2:53");
  }
  policy.dns_servers = request.dns_servers;
  if (request.request_timeout) {
    if (request.request_timeout->count() <= 0 || *request.request_timeout > std::chrono::hours(1))
      return make_error(ErrorCode::kInvalidArgument, "network timeout must be 1 ms to 1 h");
    policy.request_timeout = *request.request_timeout;
  }
  if (request.rate) {
    if (request.rate->per_second < 0 || request.rate->burst < 0 ||
        (request.rate->per_second > 0 && request.rate->burst < 1))
      return make_error(ErrorCode::kInvalidArgument,
                        "network rate limit: per_second and burst must be >= 0, burst >= 1",
                        "e.g. {per_second: 20, burst: 40}; 0 means unlimited");
    policy.rate = *request.rate;
  }
  for (const auto& g : request.gateway) {
    if (g.empty() || g.size() > 63 || !valid_domain(g) || g.find('.') != std::string::npos)
      return make_error(ErrorCode::kInvalidArgument,
                        "gateway service \"" + g + "\" is not a valid service name",
                        "name a service of the daemon config's gateway section");
  }
  policy.gateway_services = request.gateway;
  if (policy.mode == NetworkMode::kNone && (!request.allow.empty() || !request.gateway.empty()))
    return make_error(ErrorCode::kInvalidArgument,
                      "network mode none cannot have allow rules or gateway services",
                      "set mode to allowlist, or drop the rules");
  return policy;
}

}  // namespace corral::net
