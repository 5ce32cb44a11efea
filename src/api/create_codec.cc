// The create request (POST /v1/sandboxes) and the lifetime change (POST
// .../timeout) of api_model.h.
#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include "api/api_model.h"
#include "base/strings.h"
#include "api/codec_internal.h"
#include "spec/image_ref.h"
#include "api/json_writer.h"
#include "spec/mount_arg.h"
#include "spec/volume_ref.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

constexpr std::size_t kMaxMounts = 64;
constexpr std::uint64_t kMinMemoryBytes = 4 * kMiB;
constexpr std::uint64_t kMinDiskBytes = 1 * kMiB;
constexpr std::uint64_t kMaxPids = 65536;
constexpr std::uint64_t kMaxInodes = std::uint64_t{1} << 32;

// A create's env on top of the base's (the daemon's defaults): a name set
// in `body` replaces the base's value in place, a new one is appended, and
// a name in `unset` is removed.
Status merge_env(std::vector<std::pair<std::string, std::string>>& base,
                 std::vector<std::pair<std::string, std::string>> body,
                 const std::vector<std::string>& unset, std::string_view path) {
  if (base.empty() && unset.empty()) {
    base = std::move(body);
    return ok();
  }
  std::unordered_map<std::string, std::size_t> index;
  index.reserve(base.size() + body.size());
  for (std::size_t i = 0; i < base.size(); ++i) index.emplace(base[i].first, i);
  for (auto& [name, value] : body) {
    auto [it, added] = index.emplace(name, base.size());
    if (added) {
      base.emplace_back(std::move(name), std::move(value));
    } else {
      base[it->second].second = std::move(value);
    }
  }
  if (!unset.empty()) {
    std::unordered_set<std::string_view> drop(unset.begin(), unset.end());
    std::erase_if(base, [&](const auto& var) { return drop.contains(var.first); });
  }
  if (base.size() > kMaxEnv) {
    return fail(ApiErrorCode::kInvalidValue, path,
                "more than " + std::to_string(kMaxEnv) + " variables with the daemon's defaults (" +
                    std::to_string(base.size()) + ")");
  }
  return ok();
}

Status read_limits(const Json& v, const std::string& path, Limits& l) {
  const Ctx& ctx = kRequest;
  auto obj = open_object(v, path, ctx, {"memory", "cpus", "pids", "disk", "inodes", "timeout"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  CORRAL_TRY(read_into(*obj, "memory", l.memory_bytes, [&](const Json& j, std::string_view p) {
    return read_size_at_least(j, p, ctx, kMinMemoryBytes);
  }));
  CORRAL_TRY(read_into(*obj, "cpus", l.cpus,
                       [&](const Json& j, std::string_view p) { return read_cpus(j, p, ctx); }));
  CORRAL_TRY(read_into(*obj, "pids", l.pids, [](const Json& j, std::string_view p) {
    return read_uint(j, p, 1, kMaxPids);
  }));
  CORRAL_TRY(read_into(*obj, "disk", l.disk_bytes, [&](const Json& j, std::string_view p) {
    return read_size_at_least(j, p, ctx, kMinDiskBytes);
  }));
  CORRAL_TRY(read_into(*obj, "inodes", l.inodes, [](const Json& j, std::string_view p) {
    return read_uint(j, p, 1, kMaxInodes);
  }));
  CORRAL_TRY(read_into(*obj, "timeout", l.timeout,
                       [&](const Json& j, std::string_view p) -> Result<std::chrono::milliseconds> {
                         auto ms = read_duration_ms(j, p, ctx, 1, kMaxLifetimeMs);
                         if (!ms) return tl::unexpected<Error>(ms.error());
                         return std::chrono::milliseconds(*ms);
                       }));
  return ok();
}

Result<std::vector<MountSpec>> read_mounts(const Json& v, const std::string& path) {
  const Ctx& ctx = kRequest;
  if (!v.is_array()) {
    return wrong_type(path, "an array of {\"source\", \"target\", \"writable\"} objects", v);
  }
  if (v.size() > kMaxMounts) {
    return fail(
        ApiErrorCode::kInvalidValue, path,
        "more than " + std::to_string(kMaxMounts) + " mounts (" + std::to_string(v.size()) + ")");
  }
  std::vector<MountSpec> mounts;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string item_path = index_path(path, i);
    auto obj = open_object(v[i], item_path, ctx, {"source", "target", "writable"},
                           "an object {\"source\", \"target\", \"writable\"}");
    if (!obj) return tl::unexpected<Error>(obj.error());
    MountSpec mount;
    const Json* source = obj->get("source");
    const Json* target = obj->get("target");
    if (source == nullptr) {
      return fail(ApiErrorCode::kInvalidValue, obj->at("source"),
                  "is missing (the host path to mount, such as /srv/data)");
    }
    if (target == nullptr) {
      return fail(ApiErrorCode::kInvalidValue, obj->at("target"),
                  "is missing (the path inside the sandbox, such as /data)");
    }
    auto src = read_string(*source, obj->at("source"), ctx);
    if (!src) return tl::unexpected<Error>(src.error());
    if (auto st = check_mount_source(*src); !st) return fail_with(obj->at("source"), st.error());
    if (auto st = check_absolute(*src, obj->at("source")); !st) {
      return tl::unexpected<Error>(st.error());
    }
    auto dst = read_string(*target, obj->at("target"), ctx);
    if (!dst) return tl::unexpected<Error>(dst.error());
    auto normalized = normalize_mount_target(*dst);
    if (!normalized) return fail_with(obj->at("target"), normalized.error());
    CORRAL_TRY(read_into(*obj, "writable", mount.writable, any_bool()));
    mount.source = std::move(*src);
    mount.target = std::move(*normalized);
    for (const MountSpec& earlier : mounts) {
      if (earlier.target == mount.target) {
        return fail(ApiErrorCode::kInvalidValue, obj->at("target"),
                    "a second mount on " + quote_for_message(mount.target));
      }
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

// "volumes": [{"volume", "subpath", "target", "writable"}] (docs/volumes.md).
Result<std::vector<VolumeMountSpec>> read_volumes(const Json& v, const std::string& path) {
  const Ctx& ctx = kRequest;
  constexpr const char* kShape = "an object {\"volume\", \"subpath\", \"target\", \"writable\"}";
  if (!v.is_array()) return wrong_type(path, std::string("an array of ") + kShape, v);
  if (v.size() > kMaxMounts) {
    return fail(
        ApiErrorCode::kInvalidValue, path,
        "more than " + std::to_string(kMaxMounts) + " volumes (" + std::to_string(v.size()) + ")");
  }
  std::vector<VolumeMountSpec> volumes;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string item_path = index_path(path, i);
    auto obj = open_object(v[i], item_path, ctx, {"volume", "subpath", "target", "writable"}, kShape);
    if (!obj) return tl::unexpected<Error>(obj.error());
    VolumeMountSpec vm;
    const Json* name = obj->get("volume");
    const Json* target = obj->get("target");
    if (name == nullptr)
      return fail(ApiErrorCode::kInvalidValue, obj->at("volume"), "is missing (a volume's name)");
    if (target == nullptr)
      return fail(ApiErrorCode::kInvalidValue, obj->at("target"),
                  "is missing (the path inside the sandbox, such as /data)");
    auto n = read_string(*name, obj->at("volume"), ctx);
    if (!n) return tl::unexpected<Error>(n.error());
    if (!is_valid_volume_name(*n))
      return fail(ApiErrorCode::kInvalidValue, obj->at("volume"),
                  quote_for_message(*n) + " is not a volume name ([a-z0-9][a-z0-9._-]{0,62})");
    if (const Json* sub = obj->get("subpath")) {
      auto text = read_string(*sub, obj->at("subpath"), ctx);
      if (!text) return tl::unexpected<Error>(text.error());
      auto normalized = normalize_volume_subpath(*text);
      if (!normalized) return fail_with(obj->at("subpath"), normalized.error());
      vm.subpath = std::move(*normalized);
    }
    auto dst = read_string(*target, obj->at("target"), ctx);
    if (!dst) return tl::unexpected<Error>(dst.error());
    auto normalized = normalize_mount_target(*dst);
    if (!normalized) return fail_with(obj->at("target"), normalized.error());
    CORRAL_TRY(read_into(*obj, "writable", vm.writable, any_bool()));
    vm.volume = std::move(*n);
    vm.target = std::move(*normalized);
    for (const VolumeMountSpec& earlier : volumes) {
      if (earlier.target == vm.target)
        return fail(ApiErrorCode::kInvalidValue, obj->at("target"),
                    "a second volume on " + quote_for_message(vm.target));
    }
    volumes.push_back(std::move(vm));
  }
  return volumes;
}

Result<CreateSandboxRequest> parse_create(std::string_view body, const SandboxSpec* base) {
  const Ctx& ctx = kRequest;
  auto doc = parse_json(body, ctx);
  if (!doc) return tl::unexpected<Error>(doc.error());
  auto obj = open_object(*doc, "", ctx,
                         {"image", "limits", "max_lifetime", "env", "mounts", "volumes", "workdir",
                          "hostname", "root", "network", "secrets", "expected_duration",
                          "dry_run", "metadata"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  CreateSandboxRequest request;
  if (base != nullptr) request.spec = *base;
  SandboxSpec& s = request.spec;
  if (const Json* image = obj->get("image")) {
    auto name = read_string(*image, obj->at("image"), ctx);
    if (!name) return tl::unexpected<Error>(name.error());
    if (!valid_image_ref(*name)) {
      return fail(ApiErrorCode::kInvalidValue, obj->at("image"),
                  quote_for_message(*name) +
                      " is not an image name ([a-z0-9][a-z0-9._-]{0,62}), a digest "
                      "(sha256:<64 hex>) or REGISTRY/REPOSITORY@sha256:<64 hex>; omit \"image\" "
                      "for the host base");
    }
    s.image = std::move(*name);
  }
  if (const Json* limits = obj->get("limits"))
    CORRAL_TRY(read_limits(*limits, obj->at("limits"), s.limits));
  CORRAL_TRY(read_into(*obj, "max_lifetime", s.limits.max_lifetime,
                       [&](const Json& j, std::string_view p) -> Result<std::chrono::milliseconds> {
                         auto ms = read_duration_ms(j, p, ctx, kSecondMs, kMaxLifetimeMs);
                         if (!ms) return tl::unexpected<Error>(ms.error());
                         return std::chrono::milliseconds(*ms);
                       }));
  // env goes on top of the defaults' env instead of replacing it.
  if (const Json* env = obj->get("env")) {
    auto body_env = read_env(*env, obj->at("env"), ctx, &request.env_unset);
    if (!body_env) return tl::unexpected<Error>(body_env.error());
    CORRAL_TRY(merge_env(s.env, std::move(*body_env), request.env_unset, obj->at("env")));
  }
  if (const Json* mounts = obj->get("mounts")) {
    auto m = read_mounts(*mounts, obj->at("mounts"));
    if (!m) return tl::unexpected<Error>(m.error());
    s.mounts = std::move(*m);
  }
  if (const Json* volumes = obj->get("volumes")) {
    auto v = read_volumes(*volumes, obj->at("volumes"));
    if (!v) return tl::unexpected<Error>(v.error());
    s.volumes = std::move(*v);
    // A volume and a host mount on one target: the second would hide the first.
    for (const VolumeMountSpec& vm : s.volumes) {
      for (const MountSpec& m : s.mounts) {
        if (m.target == vm.target)
          return fail(ApiErrorCode::kInvalidValue, obj->at("volumes"),
                      "a volume and a mount both on " + quote_for_message(vm.target));
      }
    }
  }
  if (const Json* workdir = obj->get("workdir")) {
    auto dir = read_string(*workdir, obj->at("workdir"), ctx);
    if (!dir) return tl::unexpected<Error>(dir.error());
    CORRAL_TRY(check_absolute(*dir, obj->at("workdir")));
    s.workdir = std::move(*dir);
  }
  if (const Json* hostname = obj->get("hostname")) {
    auto name = read_string(*hostname, obj->at("hostname"), ctx);
    if (!name) return tl::unexpected<Error>(name.error());
    if (!is_valid_hostname(*name)) {
      return fail(ApiErrorCode::kInvalidValue, obj->at("hostname"),
                  quote_for_message(*name) +
                      " is not a valid hostname (letters, digits, '-' and '.', labels not "
                      "starting or ending with '-', at most 64 bytes)");
    }
    s.hostname = std::move(*name);
  }
  CORRAL_TRY(read_into(*obj, "root", s.root, any_bool()));
  CORRAL_TRY(read_into(*obj, "dry_run", s.dry_run, any_bool()));
  if (const Json* metadata = obj->get("metadata")) {
    auto m = read_metadata(*metadata, obj->at("metadata"), ctx);
    if (!m) return tl::unexpected<Error>(m.error());
    s.metadata = std::move(*m);
  }
  // A network object replaces the defaults' network as a whole.
  if (const Json* network = obj->get("network")) {
    auto n = read_network_object(*network, obj->at("network"), ctx);
    if (!n) return tl::unexpected<Error>(n.error());
    s.network = std::move(*n);
  }
  if (const Json* secrets = obj->get("secrets")) {
    auto list = read_secrets(*secrets, obj->at("secrets"), ctx);
    if (!list) return tl::unexpected<Error>(list.error());
    s.secrets = std::move(*list);
  }
  if (const Json* d = obj->get("expected_duration")) {
    auto ms = read_duration_ms(*d, obj->at("expected_duration"), ctx, kSecondMs, kMaxLifetimeMs);
    if (!ms) return tl::unexpected<Error>(ms.error());
    s.expected_duration_ms = *ms;
  }
  return request;
}

}  // namespace

// ---- public: sandboxes -----------------------------------------------------------

Result<CreateSandboxRequest> parse_create_sandbox(std::string_view body) {
  return guarded<CreateSandboxRequest>([&] { return parse_create(body, nullptr); });
}

Result<CreateSandboxRequest> parse_create_sandbox_over(std::string_view body,
                                                       const SandboxSpec& defaults) {
  return guarded<CreateSandboxRequest>([&] { return parse_create(body, &defaults); });
}

std::string to_json(const CreateSandboxRequest& request) {
  const SandboxSpec& s = request.spec;
  Json j = Json::object();
  if (!s.image.empty()) j["image"] = s.image;
  Json limits = Json::object();
  limits["memory"] = s.limits.memory_bytes;
  limits["cpus"] = s.limits.cpus;
  limits["pids"] = s.limits.pids;
  limits["disk"] = s.limits.disk_bytes;
  if (s.limits.inodes != 0) limits["inodes"] = s.limits.inodes;
  limits["timeout"] = duration_json(s.limits.timeout.count());
  j["limits"] = std::move(limits);
  j["max_lifetime"] = duration_json(s.limits.max_lifetime.count());
  Json env = env_json(s.env);
  if (!request.env_unset.empty()) {
    std::unordered_set<std::string_view> set;  // a name set in spec.env wins
    for (const auto& var : s.env) set.insert(var.first);
    for (const auto& name : request.env_unset) {
      if (set.insert(name).second) env[name] = nullptr;
    }
  }
  j["env"] = std::move(env);
  j["mounts"] = mounts_json(s.mounts);
  if (!s.volumes.empty()) j["volumes"] = volumes_json(s.volumes);
  j["workdir"] = s.workdir;
  j["hostname"] = s.hostname;
  j["root"] = s.root;
  j["network"] = network_json(s.network);
  if (!s.secrets.empty()) j["secrets"] = secrets_json(s.secrets);
  if (s.expected_duration_ms > 0) j["expected_duration"] = duration_json(s.expected_duration_ms);
  if (s.dry_run) j["dry_run"] = true;
  if (!s.metadata.empty()) j["metadata"] = s.metadata;
  return dump(j);
}

Result<ExtendRequest> parse_extend(std::string_view body) {
  return guarded<ExtendRequest>([&]() -> Result<ExtendRequest> {
    const Ctx& ctx = kRequest;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"max_lifetime", "extend_by"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    const Json* lifetime = obj->get("max_lifetime");
    const Json* extend = obj->get("extend_by");
    if ((lifetime == nullptr) == (extend == nullptr)) {
      return fail(ApiErrorCode::kInvalidValue, lifetime != nullptr ? "max_lifetime" : "",
                  std::string(lifetime != nullptr ? "give" : "no change given: give") +
                      " exactly one of \"max_lifetime\" (the new lifetime, counted from now) "
                      "and \"extend_by\" (added to the current expiry)");
    }
    ExtendRequest request;
    if (lifetime != nullptr) {
      auto ms = read_duration_ms(*lifetime, "max_lifetime", ctx, kSecondMs, kMaxLifetimeMs);
      if (!ms) return tl::unexpected<Error>(ms.error());
      request.max_lifetime_ms = *ms;
    } else {
      auto ms = read_duration_ms(*extend, "extend_by", ctx, kSecondMs, kMaxLifetimeMs);
      if (!ms) return tl::unexpected<Error>(ms.error());
      request.extend_by_ms = *ms;
    }
    return request;
  });
}

std::string to_json(const ExtendRequest& request) {
  Json j = Json::object();
  if (request.max_lifetime_ms) j["max_lifetime"] = duration_json(*request.max_lifetime_ms);
  if (request.extend_by_ms) j["extend_by"] = duration_json(*request.extend_by_ms);
  return dump(j);
}

}  // namespace corral::api
