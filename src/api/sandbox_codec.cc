// A sandbox as the daemon shows it (api_model.h: SandboxInfo, GET
// /v1/sandboxes/{id} and GET /v1/sandboxes): a response, read leniently.
#include <limits>

#include "api/api_model.h"
#include "api/codec_internal.h"
#include "api/json_writer.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

Json usage_json(const SandboxUsage& u) {
  Json j = Json::object();
  j["memory_bytes"] = u.memory_bytes;
  j["memory_peak_bytes"] = u.memory_peak_bytes;
  j["cpu_ms"] = u.cpu_ms;
  j["pids"] = u.pids;
  j["disk_bytes"] = u.disk_bytes;
  j["disk_inodes"] = u.disk_inodes;
  j["oom_kills"] = u.oom_kills;
  j["pids_max_hits"] = u.pids_max_hits;
  return j;
}

Json sandbox_info_json(const SandboxInfo& info) {
  Json j = Json::object();
  j["id"] = info.id;
  j["state"] = info.state;
  j["node"] = info.node;
  j["spec"] = spec_json(info.spec);
  j["usage"] = info.usage ? usage_json(*info.usage) : Json(nullptr);
  j["created_at_ms"] = info.created_at_ms;
  j["updated_at_ms"] = info.updated_at_ms;
  j["expires_at_ms"] = nullable(info.expires_at_ms);
  j["error"] = nullable(info.error);
  j["residue"] = strings_json(info.residue);
  j["residue_bytes"] = info.residue_bytes;
  if (info.network) {
    const NetworkStatus& n = *info.network;
    Json nj = Json::object();
    nj["address"] = n.address;
    nj["host_address"] = n.host_address;
    nj["mode"] = n.mode;
    nj["template"] = n.template_name;
    nj["allow"] = strings_json(n.allow);
    nj["deny"] = strings_json(n.deny);
    nj["gateway"] = strings_json(n.gateway);
    j["network"] = std::move(nj);
  } else {
    j["network"] = nullptr;
  }
  if (info.self_check) {
    const SelfCheckStatus& c = *info.self_check;
    Json cj = Json::object();
    cj["ok"] = c.ok;
    if (!c.failed.empty()) cj["failed"] = c.failed;
    Json checks = Json::array();
    for (const auto& [name, passed] : c.checks)
      checks.push_back(Json{{"name", name}, {"ok", passed}});
    cj["checks"] = std::move(checks);
    cj["took_us"] = c.took_us;
    j["self_check"] = std::move(cj);
  } else {
    j["self_check"] = nullptr;
  }
  return j;
}

Result<SandboxInfo> read_sandbox_info(const Json& v, std::string path, const Ctx& ctx) {
  auto obj =
      open_object(v, std::move(path), ctx,
                  {"id", "state", "node", "spec", "usage", "created_at_ms", "updated_at_ms",
                   "expires_at_ms", "error", "residue", "residue_bytes", "network", "self_check"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  SandboxInfo info;
  if (obj->get("id") == nullptr)
    return fail(ApiErrorCode::kInvalidValue, obj->at("id"), "is missing");
  CORRAL_TRY(read_into(*obj, "id", info.id, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "state", info.state, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "node", info.node, any_string(ctx)));
  if (const Json* spec = obj->get("spec")) {
    auto s = read_spec(*spec, obj->at("spec"), ctx);
    if (!s) return tl::unexpected<Error>(s.error());
    info.spec = std::move(*s);
  }
  if (const Json* usage = obj->get("usage"); usage != nullptr && !usage->is_null()) {
    auto u = open_object(*usage, obj->at("usage"), ctx,
                         {"memory_bytes", "memory_peak_bytes", "cpu_ms", "pids", "disk_bytes",
                          "disk_inodes", "oom_kills", "pids_max_hits"});
    if (!u) return tl::unexpected<Error>(u.error());
    SandboxUsage su;
    CORRAL_TRY(read_into(*u, "memory_bytes", su.memory_bytes, any_u64()));
    CORRAL_TRY(read_into(*u, "memory_peak_bytes", su.memory_peak_bytes, any_u64()));
    CORRAL_TRY(read_into(*u, "cpu_ms", su.cpu_ms, any_u64()));
    CORRAL_TRY(read_into(*u, "pids", su.pids, any_u64()));
    CORRAL_TRY(read_into(*u, "disk_bytes", su.disk_bytes, any_u64()));
    CORRAL_TRY(read_into(*u, "disk_inodes", su.disk_inodes, any_u64()));
    CORRAL_TRY(read_into(*u, "oom_kills", su.oom_kills, any_u64()));
    CORRAL_TRY(read_into(*u, "pids_max_hits", su.pids_max_hits, any_u64()));
    info.usage = su;
  }
  if (const Json* nv = obj->get("network"); nv != nullptr && !nv->is_null()) {
    auto n =
        open_object(*nv, obj->at("network"), ctx,
                    {"address", "host_address", "mode", "template", "allow", "deny", "gateway"});
    if (!n) return tl::unexpected<Error>(n.error());
    NetworkStatus ns;
    auto list = [&](const Json& j, std::string_view p) {
      return read_string_list(j, p, ctx, std::numeric_limits<std::size_t>::max(), false);
    };
    CORRAL_TRY(read_into(*n, "address", ns.address, any_string(ctx)));
    CORRAL_TRY(read_into(*n, "host_address", ns.host_address, any_string(ctx)));
    CORRAL_TRY(read_into(*n, "mode", ns.mode, any_string(ctx)));
    CORRAL_TRY(read_into(*n, "template", ns.template_name, any_string(ctx)));
    CORRAL_TRY(read_into(*n, "allow", ns.allow, list));
    CORRAL_TRY(read_into(*n, "deny", ns.deny, list));
    CORRAL_TRY(read_into(*n, "gateway", ns.gateway, list));
    info.network = std::move(ns);
  }
  if (const Json* cv = obj->get("self_check"); cv != nullptr && !cv->is_null()) {
    auto c = open_object(*cv, obj->at("self_check"), ctx, {"ok", "failed", "checks", "took_us"});
    if (!c) return tl::unexpected<Error>(c.error());
    SelfCheckStatus sc;
    if (const Json* ok = c->get("ok"); ok != nullptr && ok->is_boolean()) sc.ok = ok->get<bool>();
    CORRAL_TRY(read_into(*c, "failed", sc.failed, any_string(ctx)));
    CORRAL_TRY(read_into(*c, "took_us", sc.took_us, any_i64()));
    if (const Json* list = c->get("checks"); list != nullptr && list->is_array()) {
      for (const Json& item : *list) {
        if (item.is_object() && item.contains("name") && item["name"].is_string())
          sc.checks.emplace_back(item["name"].get<std::string>(), item.value("ok", false));
      }
    }
    info.self_check = std::move(sc);
  }
  CORRAL_TRY(read_into(*obj, "created_at_ms", info.created_at_ms, any_i64()));
  CORRAL_TRY(read_into(*obj, "updated_at_ms", info.updated_at_ms, any_i64()));
  CORRAL_TRY(read_optional_int(*obj, "expires_at_ms", info.expires_at_ms));
  CORRAL_TRY(read_optional_string(*obj, "error", info.error));
  CORRAL_TRY(read_into(*obj, "residue", info.residue, [&](const Json& j, std::string_view p) {
    return read_string_list(j, p, ctx, std::numeric_limits<std::size_t>::max(), false);
  }));
  CORRAL_TRY(read_into(*obj, "residue_bytes", info.residue_bytes, any_u64()));
  return info;
}

}  // namespace

std::string to_json(const SandboxInfo& info) { return dump(sandbox_info_json(info)); }

Result<SandboxInfo> parse_sandbox_info(std::string_view body) {
  return read_document<SandboxInfo>(body, kResponse, read_sandbox_info);
}

std::string to_json(const std::vector<SandboxInfo>& list) {
  return dump(list_json("sandboxes", list, sandbox_info_json));
}

Result<std::vector<SandboxInfo>> parse_sandbox_list(std::string_view body) {
  return read_list_document<SandboxInfo>(body, "sandboxes", read_sandbox_info);
}

}  // namespace corral::api
