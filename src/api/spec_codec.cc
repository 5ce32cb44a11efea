// The secrets a spec names and the spec as stored and shown (api_model.h:
// spec_to_json, spec_from_json; the "spec" of a sandbox's info).
#include <charconv>
#include <chrono>
#include <cmath>

#include "api/api_model.h"
#include "base/strings.h"
#include "api/codec_internal.h"
#include "api/json_writer.h"
#include "base/json_text.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

// Shapes only: the rules (tiers, modes, hosts, the store's keys) are the
// secrets layer's (secrets/secret_spec.h), checked by the daemon. No value
// ever passes here: a spec names secrets, the store holds them.
constexpr std::size_t kMaxSecrets = 32;
constexpr std::size_t kMaxSecretHosts = 64;

std::optional<std::uint16_t> parse_port_text(std::string_view text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535)
    return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// "host" or "host:port" (port 443 by default), or an object
// {"host", "port", "intercept"}.
Result<SecretHostSpec> read_secret_host(const Json& v, const std::string& path, const Ctx& ctx) {
  SecretHostSpec h;
  if (v.is_string()) {
    std::string text = v.get<std::string>();
    auto colon = text.rfind(':');
    if (colon != std::string::npos) {
      auto port = parse_port_text(std::string_view(text).substr(colon + 1));
      if (!port)
        return fail(ApiErrorCode::kInvalidValue, path,
                    quote_for_message(text) + " has no valid port after ':' (1-65535)");
      h.port = *port;
      text.resize(colon);
    }
    h.host = std::move(text);
  } else {
    auto obj = open_object(v, path, ctx, {"host", "port", "intercept"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    if (obj->get("host") == nullptr)
      return fail(ApiErrorCode::kInvalidValue, obj->at("host"),
                  "is missing: the host the token may go to");
    CORRAL_TRY(read_into(*obj, "host", h.host, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "port", h.port, [](const Json& j, std::string_view p) {
      return read_uint(j, p, 1, 65535);
    }));
    CORRAL_TRY(read_into(*obj, "intercept", h.intercept, any_bool()));
  }
  if (h.host.empty()) return fail(ApiErrorCode::kInvalidValue, path, "names no host");
  return h;
}

}  // namespace

Json secrets_json(const std::vector<SecretSpec>& secrets) {
  Json list = Json::array();
  for (const auto& sp : secrets) {
    Json j = Json::object();
    j["name"] = sp.name;
    if (!sp.key.empty()) j["key"] = sp.key;
    if (!sp.mode.empty()) j["mode"] = sp.mode;
    if (!sp.tier.empty()) j["tier"] = sp.tier;
    if (!sp.env_var.empty()) j["env_var"] = sp.env_var;
    if (!sp.path.empty()) j["path"] = sp.path;
    if (!sp.hosts.empty()) {
      Json hosts = Json::array();
      for (const auto& h : sp.hosts) {
        Json hj = Json::object();
        hj["host"] = h.host;
        hj["port"] = h.port;
        hj["intercept"] = h.intercept;
        hosts.push_back(std::move(hj));
      }
      j["hosts"] = std::move(hosts);
    }
    if (sp.ttl_ms > 0) j["ttl"] = duration_json(sp.ttl_ms);
    list.push_back(std::move(j));
  }
  return list;
}

Result<std::vector<SecretSpec>> read_secrets(const Json& v, const std::string& path,
                                             const Ctx& ctx) {
  if (!v.is_array()) return wrong_type(path, "an array of secrets", v);
  if (v.size() > kMaxSecrets)
    return fail(ApiErrorCode::kInvalidValue, path,
                "lists " + std::to_string(v.size()) + " secrets; at most " +
                    std::to_string(kMaxSecrets) + " (one per external service)");
  std::vector<SecretSpec> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string at = index_path(path, i);
    auto obj = open_object(v[i], at, ctx,
                           {"name", "key", "mode", "tier", "env_var", "path", "hosts", "ttl"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    SecretSpec sp;
    if (obj->get("name") == nullptr)
      return fail(ApiErrorCode::kInvalidValue, obj->at("name"),
                  "is missing: every secret needs a name");
    CORRAL_TRY(read_into(*obj, "name", sp.name, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "key", sp.key, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "mode", sp.mode, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "tier", sp.tier, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "env_var", sp.env_var, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "path", sp.path, any_string(ctx)));
    if (const Json* hv = obj->get("hosts")) {
      const std::string hpath = obj->at("hosts");
      if (!hv->is_array()) return wrong_type(hpath, "an array of hosts", *hv);
      if (hv->size() > kMaxSecretHosts)
        return fail(ApiErrorCode::kInvalidValue, hpath,
                    "lists more than " + std::to_string(kMaxSecretHosts) + " hosts");
      for (std::size_t k = 0; k < hv->size(); ++k) {
        auto h = read_secret_host((*hv)[k], index_path(hpath, k), ctx);
        if (!h) return tl::unexpected<Error>(h.error());
        sp.hosts.push_back(std::move(*h));
      }
    }
    if (const Json* t = obj->get("ttl")) {
      auto ms = read_duration_ms(*t, obj->at("ttl"), ctx, kSecondMs, kMaxLifetimeMs);
      if (!ms) return tl::unexpected<Error>(ms.error());
      sp.ttl_ms = *ms;
    }
    out.push_back(std::move(sp));
  }
  return out;
}

Json mounts_json(const std::vector<MountSpec>& mounts) {
  Json list = Json::array();
  for (const auto& m : mounts) {
    Json mj = Json::object();
    mj["source"] = m.source;
    mj["target"] = m.target;
    mj["writable"] = m.writable;
    list.push_back(std::move(mj));
  }
  return list;
}

Json volumes_json(const std::vector<VolumeMountSpec>& volumes) {
  Json list = Json::array();
  for (const auto& v : volumes) {
    Json vj = Json::object();
    vj["volume"] = v.volume;
    vj["subpath"] = v.subpath;
    vj["target"] = v.target;
    vj["writable"] = v.writable;
    list.push_back(std::move(vj));
  }
  return list;
}

Json spec_json(const SandboxSpec& s) {
  Json j = Json::object();
  j["image"] = s.image;
  j["argv"] = strings_json(s.argv);
  Json limits = Json::object();
  limits["memory_bytes"] = s.limits.memory_bytes;
  limits["cpus"] = s.limits.cpus;
  limits["pids"] = s.limits.pids;
  limits["disk_bytes"] = s.limits.disk_bytes;
  limits["inodes"] = s.limits.inodes;
  limits["timeout_ms"] = s.limits.timeout.count();
  limits["max_lifetime_ms"] = s.limits.max_lifetime.count();
  j["limits"] = std::move(limits);
  j["env"] = env_json(s.env);
  j["mounts"] = mounts_json(s.mounts);
  if (!s.volumes.empty()) j["volumes"] = volumes_json(s.volumes);
  j["workdir"] = s.workdir;
  j["hostname"] = s.hostname;
  j["root"] = s.root;
  j["network"] = network_json(s.network);
  j["secrets"] = secrets_json(s.secrets);
  if (s.expected_duration_ms > 0) j["expected_duration_ms"] = s.expected_duration_ms;
  if (s.dry_run) j["dry_run"] = true;  // only when set: older stored specs stay equal
  if (!s.metadata.empty()) j["metadata"] = s.metadata;  // the same
  return j;
}

// The stored form: every field typed, missing ones default. Values are not
// range-checked beyond their C++ types (the request parser did that when
// the spec came through the API).
Result<SandboxSpec> read_spec(const Json& v, std::string path, const Ctx& ctx) {
  auto obj = open_object(v, std::move(path), ctx,
                         {"image", "argv", "limits", "env", "mounts", "volumes", "workdir", "hostname",
                          "root", "network", "secrets", "expected_duration_ms", "dry_run", "metadata"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  SandboxSpec s;
  CORRAL_TRY(read_into(*obj, "image", s.image, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "argv", s.argv, [&](const Json& j, std::string_view p) {
    return read_string_list(j, p, ctx, kMaxArgv, false);
  }));
  if (const Json* lv = obj->get("limits")) {
    auto limits = open_object(
        *lv, obj->at("limits"), ctx,
        {"memory_bytes", "cpus", "pids", "disk_bytes", "inodes", "timeout_ms", "max_lifetime_ms"});
    if (!limits) return tl::unexpected<Error>(limits.error());
    Limits& l = s.limits;
    CORRAL_TRY(read_into(*limits, "memory_bytes", l.memory_bytes, any_u64()));
    CORRAL_TRY(
        read_into(*limits, "cpus", l.cpus, [](const Json& j, std::string_view p) -> Result<double> {
          if (!j.is_number()) return wrong_type(p, "a number", j);
          double d = j.get<double>();
          if (!std::isfinite(d) || !(d > 0.0)) {
            return fail(ApiErrorCode::kInvalidValue, p,
                        "must be more than 0, found " + json_text(j));
          }
          return d;
        }));
    CORRAL_TRY(read_into(*limits, "pids", l.pids, [](const Json& j, std::string_view p) {
      return read_uint(j, p, 0, std::numeric_limits<std::uint32_t>::max());
    }));
    CORRAL_TRY(read_into(*limits, "disk_bytes", l.disk_bytes, any_u64()));
    CORRAL_TRY(read_into(*limits, "inodes", l.inodes, any_u64()));
    auto ms = [](const Json& j, std::string_view p) -> Result<std::chrono::milliseconds> {
      auto n = read_int(j, p, 0, std::numeric_limits<std::int64_t>::max());
      if (!n) return tl::unexpected<Error>(n.error());
      return std::chrono::milliseconds(*n);
    };
    CORRAL_TRY(read_into(*limits, "timeout_ms", l.timeout, ms));
    CORRAL_TRY(read_into(*limits, "max_lifetime_ms", l.max_lifetime, ms));
  }
  CORRAL_TRY(read_into(*obj, "env", s.env,
                       [&](const Json& j, std::string_view p) { return read_env(j, p, ctx); }));
  if (const Json* mv = obj->get("mounts")) {
    std::string mpath = obj->at("mounts");
    if (!mv->is_array()) return wrong_type(mpath, "an array of mounts", *mv);
    for (std::size_t i = 0; i < mv->size(); ++i) {
      auto m = open_object((*mv)[i], index_path(mpath, i), ctx, {"source", "target", "writable"});
      if (!m) return tl::unexpected<Error>(m.error());
      MountSpec mount;
      CORRAL_TRY(read_into(*m, "source", mount.source, any_string(ctx)));
      CORRAL_TRY(read_into(*m, "target", mount.target, any_string(ctx)));
      CORRAL_TRY(read_into(*m, "writable", mount.writable, any_bool()));
      s.mounts.push_back(std::move(mount));
    }
  }
  if (const Json* vv = obj->get("volumes")) {
    std::string vpath = obj->at("volumes");
    if (!vv->is_array()) return wrong_type(vpath, "an array of volume mounts", *vv);
    for (std::size_t i = 0; i < vv->size(); ++i) {
      auto m = open_object((*vv)[i], index_path(vpath, i), ctx,
                           {"volume", "subpath", "target", "writable"});
      if (!m) return tl::unexpected<Error>(m.error());
      VolumeMountSpec vm;
      CORRAL_TRY(read_into(*m, "volume", vm.volume, any_string(ctx)));
      CORRAL_TRY(read_into(*m, "subpath", vm.subpath, any_string(ctx)));
      CORRAL_TRY(read_into(*m, "target", vm.target, any_string(ctx)));
      CORRAL_TRY(read_into(*m, "writable", vm.writable, any_bool()));
      s.volumes.push_back(std::move(vm));
    }
  }
  CORRAL_TRY(read_into(*obj, "workdir", s.workdir, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "hostname", s.hostname, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "root", s.root, any_bool()));
  CORRAL_TRY(read_into(*obj, "dry_run", s.dry_run, any_bool()));
  if (const Json* mv = obj->get("metadata")) {
    auto m = read_metadata(*mv, obj->at("metadata"), ctx);
    if (!m) return tl::unexpected<Error>(m.error());
    s.metadata = std::move(*m);
  }
  if (const Json* nv = obj->get("network")) {
    auto n = read_network_object(*nv, obj->at("network"), ctx);
    if (!n) return tl::unexpected<Error>(n.error());
    s.network = std::move(*n);
  }
  if (const Json* sv = obj->get("secrets")) {
    auto secrets = read_secrets(*sv, obj->at("secrets"), ctx);
    if (!secrets) return tl::unexpected<Error>(secrets.error());
    s.secrets = std::move(*secrets);
  }
  CORRAL_TRY(read_into(*obj, "expected_duration_ms", s.expected_duration_ms,
                       [](const Json& j, std::string_view p) {
                         return read_int(j, p, 0, std::numeric_limits<std::int64_t>::max());
                       }));
  return s;
}

std::string spec_to_json(const SandboxSpec& spec) { return dump(spec_json(spec)); }

Result<SandboxSpec> spec_from_json(std::string_view json) {
  return read_document<SandboxSpec>(json, kStored, read_spec);
}

}  // namespace corral::api
