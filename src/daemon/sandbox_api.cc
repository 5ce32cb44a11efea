// Handlers of /v1/sandboxes and /v1/sandboxes/{id}: create, list, inspect,
// destroy, extend, network, and the revocation of its broker tokens.
#include "base/json_text.h"
#include "daemon/api_context.h"
#include "daemon/pool_service.h"
#include "daemon/sandbox_placer.h"
#include "daemon/sandbox_service.h"

namespace corral::daemon {

namespace {

template <typename T>
bool fail_if_error(ApiRequest& r, const ApiResult<T>& result) {
  if (result) return false;
  send_error(r.out, result.error());
  return true;
}

}  // namespace

void handle_create_sandbox(ApiContext& ctx, ApiRequest& r) {
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (fail_if_error(r, body)) return;
  auto split = take_placement_wish(*body);
  if (fail_if_error(r, split)) return;
  auto request = parse_create_with_pool(ctx, split->body);
  if (fail_if_error(r, request)) return;
  std::optional<std::string> key;
  if (auto k = r.head.header("idempotency-key"); k) {
    if (k->empty() || k->size() > 200)
      return send_error(r.out, api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                                   "Idempotency-Key must be 1 to 200 characters",
                                                   "Idempotency-Key"));
    if (k->rfind(kPoolKeyPrefix, 0) == 0)
      return send_error(
          r.out, api::make_api_error(
                     api::ApiErrorCode::kInvalidValue,
                     "Idempotency-Key may not start with \"" + std::string(kPoolKeyPrefix) + "\"",
                     "Idempotency-Key", "that prefix marks warm pools' sandboxes"));
    key = std::string(*k);
  }
  auto local = [&](const std::optional<std::string>& placement_id) {
    api::CreateSandboxRequest here = *request;
    here.placement_id = placement_id;
    return ctx.sandboxes.create(here, key, r.ns);
  };
  if (ctx.placer == nullptr) {
    auto created = local(std::nullopt);
    if (fail_if_error(r, created)) return;
    return send_json(r.out, created->created ? 201 : 200, api::to_json(created->info));
  }
  ctx.placer->create(r, *body, split->wish, *request, local);
}

void handle_list_sandboxes(ApiContext& ctx, ApiRequest& r) {
  auto list = ctx.sandboxes.list();
  if (fail_if_error(r, list)) return;
  const bool all = query_flag(r, "all");
  std::vector<api::SandboxInfo> shown;
  for (auto& info : *list) {
    // Cleaned sandboxes are history: shown with ?all=true.
    if (all || info.state != "cleaned") shown.push_back(std::move(info));
  }
  send_json(r.out, 200, api::to_json(shown));
}

void handle_get_sandbox(ApiContext& ctx, ApiRequest& r) {
  auto info = ctx.sandboxes.get(r.params[0]);
  if (fail_if_error(r, info)) return;
  send_json(r.out, 200, api::to_json(*info));
}

void handle_delete_sandbox(ApiContext& ctx, ApiRequest& r) {
  // A warm pool's unclaimed sandbox is no caller's (ADR 0015).
  if (ctx.sandboxes.unclaimed_pooled(r.params[0]))
    return send_error(r.out, api::make_api_error(api::ApiErrorCode::kNotFound,
                                                 "no sandbox with id \"" + r.params[0] + "\""));
  auto info = ctx.sandboxes.destroy(r.params[0], "deleted through the API");
  if (fail_if_error(r, info)) return;
  send_json(r.out, 200, api::to_json(*info));
}

void handle_extend_sandbox(ApiContext& ctx, ApiRequest& r) {
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (fail_if_error(r, body)) return;
  auto request = api::parse_extend(*body);
  if (!request) return send_error(r.out, api::to_api_error(request.error()));
  auto info = ctx.sandboxes.extend(r.params[0], *request);
  if (fail_if_error(r, info)) return;
  send_json(r.out, 200, api::to_json(*info));
}

void handle_set_network(ApiContext& ctx, ApiRequest& r) {
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (fail_if_error(r, body)) return;
  auto network = api::parse_network_update(*body);
  if (!network) return send_error(r.out, api::to_api_error(network.error()));
  auto info = ctx.sandboxes.set_network(r.params[0], *network);
  if (fail_if_error(r, info)) return;
  send_json(r.out, 200, api::to_json(*info));
}

// POST /v1/sandboxes/{id}/secrets/revoke (issue 15, S4): the sandbox's
// broker tokens are refused from now on; the sandbox lives on. No body.
void handle_revoke_secrets(ApiContext& ctx, ApiRequest& r) {
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (fail_if_error(r, body)) return;
  if (!body->empty()) {
    auto j = nlohmann::json::parse(*body, nullptr, false);
    if (!j.is_object() || !j.empty())
      return send_error(r.out, api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                                   "this route takes no body (or {})", "body",
                                                   "send POST with an empty body"));
  }
  auto revoked = ctx.sandboxes.revoke_secrets(r.params[0]);
  if (fail_if_error(r, revoked)) return;
  nlohmann::json out{{"id", r.params[0]}, {"revoked", *revoked}};
  send_json(r.out, 200, json_text(out));
}

}  // namespace corral::daemon
