// The facade's control plane (E2B's REST API as the e2b SDK calls it;
// docs/e2b.md "What maps to what"): create, list, get, kill, timeout,
// connect, with E2B's error body {"code": <status>, "message": ...}.
// Each one is an ordinary call of SandboxService, so limits, capacity,
// pools, network policy, secrets and audit apply as to corral's own API.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/e2b_facade_internal.h"
#include "daemon/pool_service.h"
#include "daemon/sandbox_placer.h"
#include "daemon/sandbox_service.h"
#include "e2b/control_messages.h"
#include "store/state_store.h"

namespace corral::daemon::e2b_internal {

namespace {

using Json = nlohmann::json;

// The template a sandbox was made from, kept with its metadata (corral's
// own API shows it; the facade's answers leave it out).
constexpr const char* kTemplateKey = "corral.e2b.template";

bool is(const std::vector<std::string_view>& path, std::initializer_list<std::string_view> want) {
  if (path.size() != want.size()) return false;
  std::size_t i = 0;
  for (std::string_view w : want) {
    if (w != "*" && path[i] != w) return false;
    ++i;
  }
  return true;
}

// `with_token`: the answer carries the envd token (create, connect, get;
// never a list).
e2b::SandboxView view_of(const E2bFacade& facade, const api::SandboxInfo& info,
                         bool with_token = true) {
  e2b::SandboxView v;
  v.sandbox_id = info.id;
  v.metadata = info.spec.metadata;
  auto t = v.metadata.find(kTemplateKey);
  v.template_id = t != v.metadata.end() ? t->second : "base";
  if (t != v.metadata.end()) v.metadata.erase(t);
  v.envd_version = std::string(kEnvdVersion);
  if (with_token) v.envd_access_token = facade.access_token(info.id);
  v.started_at_ms = info.created_at_ms;
  v.end_at_ms = info.expires_at_ms.value_or(info.created_at_ms);
  v.cpu_count = info.spec.limits.cpus;
  v.memory_mb = info.spec.limits.memory_bytes >> 20;
  v.disk_size_mb = info.spec.limits.disk_bytes >> 20;
  v.allow_internet_access = info.spec.network.mode != "none";
  return v;
}

// Sandbox `id` when it is live, the caller's (its namespace) and not a
// warm pool's; otherwise answers 404 as E2B does for a sandbox that is gone
// (the SDK turns it into SandboxNotFoundError or false).
bool reachable(ControlCall& c, std::string_view id) {
  ApiContext& ctx = c.facade.context();
  auto live = ctx.sandboxes.live(id);
  bool mine = false;
  if (live) {
    std::lock_guard lock((*live)->mu);  // a claim sets ns under mu
    mine = (*live)->ns == c.r.ns;
  }
  if (mine && !ctx.sandboxes.unclaimed_pooled(id)) return true;
  send_control_error(c.r.out, 404, "sandbox " + std::string(id) + " not found");
  return false;
}

// The same, with what the sandbox is now.
std::optional<api::SandboxInfo> visible(ControlCall& c, std::string_view id) {
  if (!reachable(c, id)) return std::nullopt;
  auto info = c.facade.context().sandboxes.get(id);
  if (!info) {
    send_control_error(c.r.out, 404, "sandbox " + std::string(id) + " not found");
    return std::nullopt;
  }
  return std::move(*info);
}

std::optional<std::string> read_body(ControlCall& c) {
  auto body = c.r.body.read_all(c.facade.context().limits.max_json_body);
  if (!body) {
    send_control_error(c.r.out,
                       body.error().code == ErrorCode::kResourceExhausted ? 413 : 400,
                       "could not read the body: " + body.error().message);
    return std::nullopt;
  }
  return std::move(*body);
}

// The corral network of an E2B create.
Json network_of(const E2bSettings& settings, const e2b::CreateRequest& req) {
  if (req.allow_internet_access && !*req.allow_internet_access) return Json{{"mode", "none"}};
  if (req.allow_out) {
    Json n{{"mode", "allowlist"}, {"allow", *req.allow_out}};
    if (req.deny_out) n["deny"] = *req.deny_out;
    return n;
  }
  Json n;
  if (settings.network == "open" || settings.network == "none")
    n = Json{{"mode", settings.network}};
  else
    n = Json{{"template", settings.network}};
  if (req.deny_out && settings.network != "none") n["deny"] = *req.deny_out;
  return n;
}

}  // namespace

Result<Json> create_body(E2bFacade& facade, const e2b::CreateRequest& req) {
  ApiContext& ctx = facade.context();
  const E2bSettings& settings = facade.settings();
  Json body = Json::object();
  std::string target;
  if (auto m = settings.templates.find(req.template_id); m != settings.templates.end()) {
    target = m->second.target;
    if (!m->second.create_json.empty()) {
      body = Json::parse(m->second.create_json, nullptr, false);
      if (!body.is_object())
        return make_error(ErrorCode::kInternal,
                          "serve.e2b.templates." + req.template_id + " is not a create body");
    }
  } else if (req.template_id != "base") {
    target = ctx.pools != nullptr && ctx.pools->base_spec(req.template_id)
                 ? "pool:" + req.template_id
                 : req.template_id;
  }
  if (target.rfind("pool:", 0) == 0) body["pool"] = target.substr(5);
  else if (!target.empty()) body["image"] = target;
  body["max_lifetime"] = req.timeout_s.value_or(300);
  if (!req.env_vars.empty()) {
    Json env = body.contains("env") && body["env"].is_object() ? body["env"] : Json::object();
    for (const auto& [k, v] : req.env_vars) env[k] = v;
    body["env"] = std::move(env);
  }
  Json metadata = Json::object();
  for (const auto& [k, v] : req.metadata) metadata[k] = v;
  if (req.template_id != "base") metadata[kTemplateKey] = req.template_id;
  if (!metadata.empty()) body["metadata"] = std::move(metadata);
  // The create's own network options win; without them, a template's
  // network, else the facade's default.
  const bool asked = req.allow_internet_access.has_value() || req.allow_out || req.deny_out;
  if (asked || !body.contains("network")) body["network"] = network_of(settings, req);
  return body;
}

namespace {

void create(ControlCall& c) {
  ApiContext& ctx = c.facade.context();
  auto body = read_body(c);
  if (!body) return;
  auto req = e2b::parse_create_request(*body);
  // A wrong type and an unsupported field (autoPause, ...) are both 400
  // naming the field: the SDK shows the message.
  if (!req) return send_control_error(c.r.out, 400, req.error().message);
  auto corral_body = create_body(c.facade, *req);
  if (!corral_body) return send_control_error(c.r.out, 400, corral_body.error().message);
  auto request = parse_create_with_pool(ctx, json_text(*corral_body));
  if (!request) return send_control_error(c.r.out, request.error());
  auto local = [&](const std::optional<std::string>& placement_id) {
    api::CreateSandboxRequest here = *request;
    here.placement_id = placement_id;
    return ctx.sandboxes.create(here, std::nullopt, c.r.ns);
  };
  SandboxPlacer::Door door;
  door.answer_created = [&](ApiResult<SandboxService::Created> created) {
    if (!created) {
      const api::ApiError& e = created.error();
      if (e.http_status == 404 && e.message.find("no image named") != std::string::npos)
        return send_control_error(
            c.r.out, 400,
            "template \"" + req->template_id +
                "\" is not known to this corral daemon: it is neither a pool, an image "
                "(corral image ls) nor mapped in serve.e2b.templates");
      return send_control_error(c.r.out, e);
    }
    ctx.metrics
        .counter("corral_e2b_sandboxes_created_total", "Sandboxes created through the E2B facade")
        .inc();
    (void)c.r.out.send(201, {{"content-type", "application/json"}},
                       e2b::created_json(view_of(c.facade, created->info)));
  };
  door.answer_error = [&](const api::ApiError& e) { send_control_error(c.r.out, e); };
  door.create_path = c.facade.settings().prefix + "/v2/sandboxes";
  // In a fleet the create is placed like the /v1 API's (docs/fleet.md).
  if (ctx.placer == nullptr) return door.answer_created(local(std::nullopt));
  ctx.placer->create(c.r, *body, PlacementWish{}, *request, local, door);
}

bool matches(const api::SandboxInfo& info, const std::map<std::string, std::string>& filter) {
  for (const auto& [k, v] : filter) {
    auto it = info.spec.metadata.find(k);
    if (it == info.spec.metadata.end() || it->second != v) return false;
  }
  return true;
}

// The sandboxes of other nodes of a fleet, as the shared store has them:
// whose namespace each is (its runtime record), whether its node is live.
class RemoteSandboxes {
 public:
  explicit RemoteSandboxes(ApiContext& ctx) : ctx_(ctx) {}

  bool running_for(const api::SandboxInfo& info, const std::string& ns) {
    if (ctx_.forwarder == nullptr || info.node.empty() ||
        info.node == ctx_.sandboxes.store().node())
      return false;
    if (!node_live(info.node)) return false;
    auto record = ctx_.sandboxes.store().get(info.id);
    if (!record || record->lost_at_ms || !record->runtime_json) return false;
    auto rt = nlohmann::json::parse(*record->runtime_json, nullptr, false);
    if (!rt.is_object() || rt.value("ns", std::string("default")) != ns) return false;
    // A warm pool's sandbox is no caller's until claimed (ADR 0015).
    const bool pooled =
        record->idempotency_key && record->idempotency_key->rfind(kPoolKeyPrefix, 0) == 0;
    return !pooled || rt.value("claimed", false);
  }

 private:
  bool node_live(const std::string& id) {
    auto known = live_.find(id);
    if (known != live_.end()) return known->second;
    auto node = ctx_.sandboxes.store().get_node(id);
    const bool live = node && node->state == NodeState::kLive;
    live_.emplace(id, live);
    return live;
  }

  ApiContext& ctx_;
  std::map<std::string, bool> live_;
};

void list(ControlCall& c) {
  ApiContext& ctx = c.facade.context();
  std::map<std::string, std::string> filter;
  if (auto m = c.r.query_value("metadata"); m) {
    auto f = e2b::parse_metadata_filter(*m);
    if (!f) return send_control_error(c.r.out, 400, "metadata: " + f.error().message);
    filter = std::move(*f);
  }
  bool want_running = true;
  if (auto s = c.r.query_value("state"); s) {
    want_running = false;
    std::string_view v = *s;
    while (!v.empty()) {
      auto comma = v.find(',');
      std::string_view one = v.substr(0, comma);
      if (one == "running") want_running = true;
      else if (one != "paused")
        return send_control_error(c.r.out, 400,
                                  "state: \"" + std::string(one) + "\" is not running or paused");
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  std::size_t limit = 100;
  if (auto l = c.r.query_value("limit"); l) {
    char* end = nullptr;
    unsigned long n = std::strtoul(l->c_str(), &end, 10);
    if (l->empty() || *end != '\0' || n == 0 || n > 1000)
      return send_control_error(c.r.out, 400, "limit: a number from 1 to 1000");
    limit = n;
  }
  auto all = ctx.sandboxes.list();
  if (!all) return send_control_error(c.r.out, all.error());
  std::vector<api::SandboxInfo> shown;
  RemoteSandboxes remote(ctx);
  if (want_running) {
    for (auto& info : *all) {
      if (info.state != "ready" && info.state != "running") continue;
      auto live = ctx.sandboxes.live(info.id);
      if (!live) {
        // Another node's, in a fleet: listed where the store says it is the
        // caller's and running on a live node.
        if (remote.running_for(info, c.r.ns) && matches(info, filter))
          shown.push_back(std::move(info));
        continue;
      }
      {
        std::lock_guard lock((*live)->mu);
        if ((*live)->ns != c.r.ns) continue;
      }
      if (ctx.sandboxes.unclaimed_pooled(info.id)) continue;
      if (matches(info, filter)) shown.push_back(std::move(info));
    }
  }
  std::sort(shown.begin(), shown.end(), [](const api::SandboxInfo& a, const api::SandboxInfo& b) {
    return a.created_at_ms != b.created_at_ms ? a.created_at_ms < b.created_at_ms : a.id < b.id;
  });
  std::size_t start = 0;
  if (auto token = c.r.query_value("nextToken"); token && !token->empty()) {
    start = shown.size();
    for (std::size_t i = 0; i < shown.size(); ++i)
      if (shown[i].id == *token) start = i;
  }
  std::vector<e2b::SandboxView> page;
  for (std::size_t i = start; i < shown.size() && page.size() < limit; ++i)
    page.push_back(view_of(c.facade, shown[i], false));
  http::Headers headers{{"content-type", "application/json"}};
  if (start + page.size() < shown.size()) headers.push_back({"x-next-token", shown[start + page.size()].id});
  (void)c.r.out.send(200, headers, e2b::listed_json(page));
}

void set_timeout(ControlCall& c, std::string_view id, bool connect) {
  ApiContext& ctx = c.facade.context();
  auto body = read_body(c);
  if (!body) return;
  auto t = e2b::parse_timeout_body(*body, !connect);
  if (!t) return send_control_error(c.r.out, 400, t.error().message);
  auto info = visible(c, id);
  if (!info) return;
  const std::int64_t seconds = t->value_or(300);
  const std::int64_t now = StateStore::now_ms();
  // setTimeout sets the end (it may come sooner); connect only extends.
  if (!connect || info->expires_at_ms.value_or(0) < now + seconds * 1000) {
    api::ExtendRequest ext;
    ext.max_lifetime_ms = std::max<std::int64_t>(1000, seconds * 1000);
    auto extended = ctx.sandboxes.extend(id, ext);
    if (!extended) return send_control_error(c.r.out, extended.error());
    info = std::move(*extended);
  }
  if (!connect) {
    (void)c.r.out.send(204, {}, "");
    return;
  }
  (void)c.r.out.send(200, {{"content-type", "application/json"}},
                     e2b::created_json(view_of(c.facade, *info)));
}

void kill(ControlCall& c, std::string_view id) {
  if (!reachable(c, id)) return;
  auto destroyed = c.facade.context().sandboxes.destroy(id, "killed through the E2B facade");
  if (!destroyed) return send_control_error(c.r.out, destroyed.error());
  (void)c.r.out.send(204, {}, "");
}

void set_network(ControlCall& c, std::string_view id) {
  auto body = read_body(c);
  if (!body) return;
  // The same fields as a create's network (allowOut, denyOut,
  // allow_internet_access), read by the create's parser.
  auto j = Json::parse(*body, nullptr, false);
  if (!j.is_object()) return send_control_error(c.r.out, 400, "the body must be a JSON object");
  Json as_create = Json::object();
  Json n = Json::object();
  for (const char* k : {"allowOut", "denyOut", "egressProxy", "rules"})
    if (j.contains(k)) n[k] = j[k];
  as_create["network"] = n;
  if (j.contains("allow_internet_access")) as_create["allow_internet_access"] = j["allow_internet_access"];
  auto req = e2b::parse_create_request(json_text(as_create));
  if (!req) return send_control_error(c.r.out, 400, req.error().message);
  if (!reachable(c, id)) return;
  auto network = api::parse_network_update(json_text(network_of(c.facade.settings(), *req)));
  if (!network) return send_control_error(c.r.out, api::to_api_error(network.error()));
  auto updated = c.facade.context().sandboxes.set_network(id, *network);
  if (!updated) return send_control_error(c.r.out, updated.error());
  (void)c.r.out.send(204, {}, "");
}

}  // namespace

void handle_control(ControlCall& c) {
  const auto& p = c.path;
  const std::string& m = c.r.head.method;
  // The SDK 2.x uses /v2/sandboxes for create, list and connect; older
  // ones used /sandboxes: both are served.
  if (is(p, {"v2", "sandboxes"}) || is(p, {"sandboxes"})) {
    if (m == "POST") return create(c);
    if (m == "GET") return list(c);
  } else if (is(p, {"sandboxes", "*"})) {
    if (m == "GET") {
      auto info = visible(c, p[1]);
      if (!info) return;
      return (void)c.r.out.send(200, {{"content-type", "application/json"}},
                                e2b::detail_json(view_of(c.facade, *info)));
    }
    if (m == "DELETE") return kill(c, p[1]);
  } else if (is(p, {"sandboxes", "*", "timeout"})) {
    if (m == "POST") return set_timeout(c, p[1], false);
  } else if (is(p, {"v2", "sandboxes", "*", "connect"}) || is(p, {"sandboxes", "*", "connect"})) {
    if (m == "POST") return set_timeout(c, is(p, {"sandboxes", "*", "connect"}) ? p[1] : p[2], true);
  } else if (is(p, {"sandboxes", "*", "network"})) {
    if (m == "PUT") return set_network(c, p[1]);
  } else if (is(p, {"sandboxes", "*", "metrics"})) {
    if (m == "GET") {
      if (!reachable(c, p[1])) return;
      return (void)c.r.out.send(200, {{"content-type", "application/json"}}, "[]");
    }
  } else if (is(p, {"sandboxes", "*", "pause"}) || is(p, {"sandboxes", "*", "resume"}) ||
             is(p, {"sandboxes", "*", "snapshots"}) || is(p, {"sandboxes", "*", "fork"})) {
    if (!reachable(c, p[1])) return;
    // 501, not 409: the SDK reads 409 on pause as "already paused".
    return send_control_error(c.r.out, 501,
                              "corral cannot pause, resume, fork or snapshot a sandbox with its "
                              "memory (docs/e2b.md); keep it running, or use tasks and volumes");
  }
  send_control_error(c.r.out, 404,
                     "no E2B route " + m + " " + c.r.head.path + " (docs/e2b.md lists them)");
}

}  // namespace corral::daemon::e2b_internal
