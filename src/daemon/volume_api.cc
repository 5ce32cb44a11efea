// /v1/volumes (D2, F4; docs/volumes.md): create, list, get and remove the
// named volumes of the caller's namespace (ApiRequest::ns). A volume of
// another namespace is 403 and nothing more is said about it.
#include <cerrno>
#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "base/json_text.h"
#include "daemon/api_context.h"
#include "daemon/sandbox_service.h"
#include "spec/units.h"
#include "volume/volume_store.h"

namespace corral::daemon {
namespace {

using nlohmann::json;

}  // namespace

api::ApiError volume_api_error(const Error& e, const std::string& field) {
  using C = api::ApiErrorCode;
  C code = C::kInternal;
  switch (e.code) {
    case ErrorCode::kInvalidArgument: code = C::kInvalidValue; break;
    case ErrorCode::kNotFound: code = C::kNotFound; break;
    case ErrorCode::kAlreadyExists: code = C::kConflict; break;
    case ErrorCode::kPermissionDenied: code = C::kForbidden; break;
    case ErrorCode::kResourceExhausted: code = C::kInsufficientStorage; break;
    case ErrorCode::kUnavailable: code = e.sys_errno == EBUSY ? C::kConflict : C::kUnavailable; break;
    default: break;
  }
  return api::make_api_error(code, e.message, code == C::kInvalidValue ? field : "", e.hint);
}

namespace {

json volume_json(const volume::VolumeInfo& v, bool with_users) {
  json j{{"name", v.name},
         {"namespace", v.ns},
         {"quota", format_size(v.quota)},
         {"quota_bytes", v.quota},
         {"used_bytes", v.used_bytes},
         {"capacity_bytes", v.capacity_bytes},
         {"allocated_bytes", v.allocated_bytes},
         {"created_at_ms", v.created_ms},
         {"mounted", v.mounted}};
  if (with_users) j["sandboxes"] = v.sandboxes;
  return j;
}

volume::VolumeStore* store_or_answer(ApiContext& ctx, ApiRequest& r) {
  if (ctx.volumes != nullptr) return ctx.volumes;
  send_error(r.out, api::make_api_error(api::ApiErrorCode::kUnavailable,
                                        "this daemon serves no volumes", "",
                                        "see the daemon's start-up log"));
  return nullptr;
}

}  // namespace

void handle_create_volume(ApiContext& ctx, ApiRequest& r) {
  volume::VolumeStore* store = store_or_answer(ctx, r);
  if (store == nullptr) return;
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (!body) return send_error(r.out, body.error());
  const api::json::Ctx& c = api::json::kRequest;
  std::string name, quota_text;
  auto parsed = api::json::guarded<bool>([&]() -> Result<bool> {
    auto doc = api::json::parse_json(*body, c);
    if (!doc) return tl::unexpected(doc.error());
    auto obj = api::json::open_object(*doc, "", c, {"name", "quota"});
    if (!obj) return tl::unexpected(obj.error());
    const api::json::Json* n = obj->get("name");
    const api::json::Json* q = obj->get("quota");
    if (n == nullptr)
      return api::json::fail(api::ApiErrorCode::kInvalidValue, "name", "is missing (the volume's name)");
    if (q == nullptr)
      return api::json::fail(api::ApiErrorCode::kInvalidValue, "quota",
                             "is missing (a size such as \"1GiB\")");
    auto ns = api::json::read_string(*n, "name", c);
    if (!ns) return tl::unexpected(ns.error());
    name = std::move(*ns);
    if (q->is_number_unsigned()) {
      quota_text = std::to_string(q->get<std::uint64_t>());
    } else {
      auto qs = api::json::read_string(*q, "quota", c);
      if (!qs) return tl::unexpected(qs.error());
      quota_text = std::move(*qs);
    }
    return true;
  });
  if (!parsed) return send_error(r.out, api::to_api_error(parsed.error()));
  auto quota = volume::parse_quota(quota_text, store->limits().max_quota);
  if (!quota) return send_error(r.out, volume_api_error(quota.error(), "quota"));
  auto made = store->create(r.ns, name, *quota);
  if (!made) return send_error(r.out, volume_api_error(made.error(), "name"));
  ctx.sandboxes.audit_async(json{{"type", "volume.create"},
                                 {"volume", name},
                                 {"namespace", r.ns},
                                 {"quota", made->quota}});
  (void)r.out.send(201,
                   {{"content-type", "application/json"}, {"location", "/v1/volumes/" + name}},
                   json_text(volume_json(*made, true)));
}

void handle_list_volumes(ApiContext& ctx, ApiRequest& r) {
  volume::VolumeStore* store = store_or_answer(ctx, r);
  if (store == nullptr) return;
  json list = json::array();
  for (const auto& v : store->list(r.ns)) list.push_back(volume_json(v, false));
  send_json(r.out, 200, json_text(json{{"volumes", std::move(list)}}));
}

void handle_get_volume(ApiContext& ctx, ApiRequest& r) {
  volume::VolumeStore* store = store_or_answer(ctx, r);
  if (store == nullptr) return;
  auto v = store->get(r.ns, r.params[0]);
  if (!v) return send_error(r.out, volume_api_error(v.error()));
  send_json(r.out, 200, json_text(volume_json(*v, true)));
}

void handle_delete_volume(ApiContext& ctx, ApiRequest& r) {
  volume::VolumeStore* store = store_or_answer(ctx, r);
  if (store == nullptr) return;
  const std::string& name = r.params[0];
  auto st = store->remove(r.ns, name, [&](const std::string& id) {
    return ctx.sandboxes.registered(id);
  });
  if (!st) return send_error(r.out, volume_api_error(st.error()));
  ctx.sandboxes.audit_async(
      json{{"type", "volume.remove"}, {"volume", name}, {"namespace", r.ns}});
  (void)r.out.send(204, {}, "");
}

}  // namespace corral::daemon
