// /v1/pools (C4, docs/api.md "Pools", docs/adr/0015-warm-pools.md): list,
// inspect, add and end warm pools, and the `"pool"` field of a create body.
// Pools are the daemon's: adding or ending one is for the "default"
// namespace (the unix socket, or a default key); any caller may claim.
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/api_context.h"
#include "daemon/pool_service.h"
#include "spec/units.h"

namespace corral::daemon {
namespace {

using nlohmann::json;

json pool_json(const PoolStatus& s) {
  json j{{"name", s.settings.name},
         {"min", s.settings.min},
         {"max", s.settings.max},
         {"idle_limit_ms", s.settings.idle_limit_ms},
         {"spec", json::parse(s.spec_json)},
         {"ready", s.ready},
         {"building", s.building},
         {"target", s.target},
         {"hits", s.hits},
         {"misses", s.misses},
         {"refill_failures", s.refill_failures},
         {"backoff_ms", s.backoff_ms},
         {"source", s.from_config ? "config" : "api"}};
  j["last_error"] = s.last_error.empty() ? json() : json(s.last_error);
  return j;
}

PoolService* pools_or_answer(ApiContext& ctx, ApiRequest& r) {
  if (ctx.pools != nullptr) return ctx.pools;
  send_error(r.out, api::make_api_error(api::ApiErrorCode::kUnavailable,
                                        "this daemon serves no pools", "",
                                        "see the daemon's start-up log"));
  return nullptr;
}

bool admin_or_answer(ApiRequest& r) {
  if (r.ns == "default") return true;
  send_error(r.out, api::make_api_error(api::ApiErrorCode::kForbidden,
                                        "pools are the daemon's: only the default namespace "
                                        "adds or ends them",
                                        "", "ask the daemon's operator (serve.pools)"));
  return false;
}

api::ApiError bad(const std::string& field, const std::string& message) {
  return api::make_api_error(api::ApiErrorCode::kInvalidValue, message, field);
}

// {"name", "min", "max", "idle_limit", "sandbox"}.
ApiResult<PoolSettings> parse_pool(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return tl::unexpected(
        api::make_api_error(api::ApiErrorCode::kBadJson, "the body is not a JSON object"));
  PoolSettings s;
  for (auto& [k, v] : j.items()) {
    if (k == "name") {
      if (!v.is_string()) return tl::unexpected(bad("name", "name must be a string"));
      s.name = v.get<std::string>();
    } else if (k == "min" || k == "max") {
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() > 1'000'000)
        return tl::unexpected(bad(k, k + " must be a small non-negative integer"));
      (k == "min" ? s.min : s.max) = v.get<std::uint32_t>();
    } else if (k == "idle_limit") {
      if (!v.is_string())
        return tl::unexpected(bad("idle_limit", "idle_limit must be a duration such as \"10m\""));
      auto d = parse_duration(v.get<std::string>());
      if (!d) return tl::unexpected(bad("idle_limit", d.error().message));
      s.idle_limit_ms = d->count();
    } else if (k == "sandbox") {
      if (!v.is_object())
        return tl::unexpected(bad("sandbox", "sandbox must be an object (a create body)"));
      s.sandbox_json = json_text(v);
    } else {
      return tl::unexpected(api::make_api_error(
          api::ApiErrorCode::kUnknownField, "unknown field \"" + k + "\"", k,
          "a pool has name, min, max, idle_limit and sandbox"));
    }
  }
  if (s.name.empty()) return tl::unexpected(bad("name", "a pool needs a name"));
  return s;
}

}  // namespace

void handle_list_pools(ApiContext& ctx, ApiRequest& r) {
  PoolService* pools = pools_or_answer(ctx, r);
  if (pools == nullptr) return;
  json out = json::array();
  for (const PoolStatus& s : pools->list()) out.push_back(pool_json(s));
  send_json(r.out, 200, json_text(json{{"pools", std::move(out)}}));
}

void handle_get_pool(ApiContext& ctx, ApiRequest& r) {
  PoolService* pools = pools_or_answer(ctx, r);
  if (pools == nullptr) return;
  auto s = pools->get(r.params[0]);
  if (!s) return send_error(r.out, s.error());
  send_json(r.out, 200, json_text(pool_json(*s)));
}

void handle_create_pool(ApiContext& ctx, ApiRequest& r) {
  PoolService* pools = pools_or_answer(ctx, r);
  if (pools == nullptr || !admin_or_answer(r)) return;
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (!body) return send_error(r.out, body.error());
  auto settings = parse_pool(*body);
  if (!settings) return send_error(r.out, settings.error());
  auto s = pools->add(*settings);
  if (!s) return send_error(r.out, s.error());
  send_json(r.out, 201, json_text(pool_json(*s)));
}

void handle_delete_pool(ApiContext& ctx, ApiRequest& r) {
  PoolService* pools = pools_or_answer(ctx, r);
  if (pools == nullptr || !admin_or_answer(r)) return;
  auto s = pools->remove(r.params[0]);
  if (!s) return send_error(r.out, s.error());
  send_json(r.out, 200, json_text(pool_json(*s)));
}

ApiResult<api::CreateSandboxRequest> parse_create_with_pool(ApiContext& ctx,
                                                            const std::string& body) {
  return parse_create_over_pool(ctx.pools, ctx.sandboxes.defaults(), body);
}

}  // namespace corral::daemon
