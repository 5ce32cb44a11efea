#include "daemon/dry_run_record.h"

#include <algorithm>

namespace corral::daemon {

using nlohmann::json;

namespace {

// Distinct entries kept per kind, and HTTP requests per connection entry;
// counts go on past both.
constexpr std::size_t kMaxEntries = 500;
constexpr std::size_t kMaxRequests = 50;

std::string text_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::uint16_t port_of(const json& j) {
  auto it = j.find("port");
  if (it == j.end() || !it->is_number_integer()) return 0;
  return static_cast<std::uint16_t>(std::clamp<std::int64_t>(it->get<std::int64_t>(), 0, 65535));
}

std::string times(std::uint64_t n) {
  if (n == 1) return "once";
  if (n == 2) return "twice";
  return std::to_string(n) + " times";
}

// The proxy's and the gateway's dry-run reason says what a real run would
// have done ("... a real run would relay it" / "... would forward it").
bool real_run_allows(const std::string& refusal, const std::string& reason) {
  return refusal == "dry_run" && (reason.find("a real run would relay") != std::string::npos ||
                                  reason.find("a real run would forward") != std::string::npos);
}

template <typename T, typename Same>
T* find_or_add(std::vector<T>& list, bool& truncated, Same same) {
  for (T& e : list)
    if (same(e)) return &e;
  if (list.size() >= kMaxEntries) {
    truncated = true;
    return nullptr;
  }
  list.emplace_back();
  return &list.back();
}

}  // namespace

void DryRunRecord::observe(const json& event) {
  if (!event.is_object()) return;
  const std::string type = text_of(event, "type");
  std::lock_guard lock(mu_);
  if (type == "network.dns") {
    const std::string name = text_of(event, "name"), qtype = text_of(event, "qtype");
    Dns* d = find_or_add(dns_, truncated_,
                         [&](const Dns& e) { return e.name == name && e.qtype == qtype; });
    if (d == nullptr) return;
    d->name = name;
    d->qtype = qtype;
    d->outcome = text_of(event, "outcome");
    std::string answer;
    if (auto it = event.find("addresses"); it != event.end() && it->is_array())
      for (const auto& a : *it)
        if (a.is_string()) answer += (answer.empty() ? "" : ",") + a.get<std::string>();
    d->answer = answer;
    ++d->count;
  } else if (type == "network.connection") {
    std::string host = text_of(event, "name");
    if (host.empty()) host = text_of(event, "connect_host");
    if (host.empty()) host = text_of(event, "original_address");
    if (host.empty()) host = text_of(event, "address");
    const std::uint16_t port = port_of(event);
    const std::string protocol = text_of(event, "protocol");
    Connection* c = find_or_add(connections_, truncated_, [&](const Connection& e) {
      return e.host == host && e.port == port && e.protocol == protocol;
    });
    if (c == nullptr) return;
    c->host = host;
    c->port = port;
    c->protocol = protocol;
    if (std::string sni = text_of(event, "sni"); !sni.empty()) c->sni = sni;
    c->reason = text_of(event, "reason");
    c->real_run_allows = real_run_allows(text_of(event, "refusal"), c->reason);
    ++c->count;
    const std::string method = text_of(event, "method");
    if (!method.empty() && c->requests.size() < kMaxRequests) {
      std::string h = text_of(event, "host");
      c->requests.push_back(Request{method, h.empty() ? host : h, text_of(event, "path")});
    }
  } else if (type == "network.gateway") {
    const std::string service = text_of(event, "service"), method = text_of(event, "method"),
                      path = text_of(event, "path");
    Gateway* g = find_or_add(gateway_, truncated_, [&](const Gateway& e) {
      return e.service == service && e.method == method && e.path == path;
    });
    if (g == nullptr) return;
    g->service = service;
    g->method = method;
    g->path = path;
    g->reason = text_of(event, "reason");
    g->real_run_allows =
        g->reason.rfind("dry run:", 0) == 0 && real_run_allows("dry_run", g->reason);
    ++g->count;
  } else if (type == "secret.read") {
    const std::string secret = text_of(event, "secret"), path = text_of(event, "path");
    SecretRead* s = find_or_add(secrets_, truncated_, [&](const SecretRead& e) {
      return e.secret == secret && e.path == path;
    });
    if (s == nullptr) return;
    s->secret = secret;
    s->path = path;
    s->mode = text_of(event, "mode");
    ++s->count;
  }
}

json DryRunRecord::network_json() const {
  std::lock_guard lock(mu_);
  json dns = json::array();
  for (const Dns& d : dns_)
    dns.push_back({{"name", d.name},
                   {"type", d.qtype},
                   {"outcome", d.outcome},
                   {"answer", d.answer},
                   {"count", d.count}});
  json connections = json::array();
  for (const Connection& c : connections_) {
    json requests = json::array();
    for (const Request& r : c.requests)
      requests.push_back({{"method", r.method}, {"host", r.host}, {"path", r.path}});
    json one = {{"host", c.host},
                {"port", c.port},
                {"protocol", c.protocol},
                {"count", c.count},
                {"real_run", c.real_run_allows ? "allow" : "deny"},
                {"reason", c.reason},
                {"requests", std::move(requests)}};
    if (!c.sni.empty()) one["sni"] = c.sni;
    connections.push_back(std::move(one));
  }
  json gateway = json::array();
  for (const Gateway& g : gateway_)
    gateway.push_back({{"service", g.service},
                       {"method", g.method},
                       {"path", g.path},
                       {"count", g.count},
                       {"real_run", g.real_run_allows ? "allow" : "deny"},
                       {"reason", g.reason}});
  return {{"dns", std::move(dns)},
          {"connections", std::move(connections)},
          {"gateway", std::move(gateway)},
          {"truncated", truncated_}};
}

json DryRunRecord::secrets_json() const {
  std::lock_guard lock(mu_);
  json reads = json::array();
  for (const SecretRead& s : secrets_)
    reads.push_back({{"secret", s.secret}, {"path", s.path}, {"mode", s.mode}, {"count", s.count}});
  return {{"reads", std::move(reads)}};
}

std::vector<std::string> DryRunRecord::summary_parts() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> parts;
  for (const Connection& c : connections_)
    parts.push_back("would connect to " + c.host + ":" + std::to_string(c.port) + " " +
                    times(c.count) + (c.real_run_allows ? "" : " (refused in a real run)"));
  for (const Gateway& g : gateway_)
    parts.push_back("would call gateway service " + g.service + " (" + g.method + " " + g.path +
                    ") " + times(g.count) + (g.real_run_allows ? "" : " (refused in a real run)"));
  for (const SecretRead& s : secrets_) parts.push_back("would read secret " + s.secret);
  return parts;
}

json dry_run_writes_json(const DryRunWrites& w) {
  json changes = json::array();
  for (const WriteChange& c : w.changes) {
    json one = {{"path", c.path},
                {"change", change_kind_name(c.kind)},
                {"type", c.type},
                {"size", c.size}};
    one["diff"] = c.diff ? json(*c.diff) : json(nullptr);
    if (c.redacted) one["redacted"] = true;
    changes.push_back(std::move(one));
  }
  json areas = json::array();
  for (const WriteArea& a : w.areas) areas.push_back({{"target", a.target}, {"kind", a.kind}});
  return {{"created", w.created},
          {"modified", w.modified},
          {"deleted", w.deleted},
          {"bytes_written", w.bytes_written},
          {"truncated", w.truncated},
          {"areas", std::move(areas)},
          {"changes", std::move(changes)}};
}

std::string summarize_dry_run(const DryRunWrites& writes, const DryRunRecord& record) {
  std::string out = summarize_writes(writes);
  for (const std::string& p : record.summary_parts()) out += ", " + p;
  return out;
}

json dry_run_report(const DryRunWrites& writes, const DryRunRecord& record) {
  return {{"summary", summarize_dry_run(writes, record)},
          {"writes", dry_run_writes_json(writes)},
          {"network", record.network_json()},
          {"secrets", record.secrets_json()}};
}

void DryRunBook::add(const std::string& sandbox, std::shared_ptr<DryRunSandbox> state) {
  std::lock_guard lock(mu_);
  records_[sandbox] = std::move(state);
}

void DryRunBook::remove(const std::string& sandbox) {
  std::lock_guard lock(mu_);
  records_.erase(sandbox);
}

std::shared_ptr<DryRunSandbox> DryRunBook::find(const std::string& sandbox) const {
  std::lock_guard lock(mu_);
  auto it = records_.find(sandbox);
  return it == records_.end() ? nullptr : it->second;
}

void DryRunBook::observe(const json& event) {
  if (!event.is_object()) return;
  auto it = event.find("sandbox");
  if (it == event.end() || !it->is_string()) return;
  if (auto state = find(it->get<std::string>())) state->record.observe(event);
}

}  // namespace corral::daemon
