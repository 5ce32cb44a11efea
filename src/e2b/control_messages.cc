#include "e2b/control_messages.h"

#include <nlohmann/json.hpp>

#include "api/task_model.h"
#include "e2b/envd_messages.h"

namespace corral::e2b {

namespace {

using Json = nlohmann::json;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

tl::unexpected<Error> bad(std::string_view field, std::string_view what) {
  return make_error(ErrorCode::kInvalidArgument, std::string(field) + ": " + std::string(what));
}

tl::unexpected<Error> unsupported(std::string_view field, std::string_view why) {
  return make_error(
      ErrorCode::kUnavailable,
      std::string(field) + " is not supported by corral's E2B facade: " + std::string(why));
}

const Json* member(const Json& obj, std::string_view name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::map<std::string, std::string>> string_map(const Json& v, std::string_view field) {
  if (!v.is_object()) return bad(field, "must be an object of strings");
  std::map<std::string, std::string> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it->is_string()) return bad(std::string(field) + "." + it.key(), "must be a string");
    out.emplace(it.key(), it->get<std::string>());
  }
  return out;
}

Result<std::vector<std::string>> string_list(const Json& v, std::string_view field) {
  if (!v.is_array()) return bad(field, "must be an array of strings");
  std::vector<std::string> out;
  for (const Json& item : v) {
    if (!item.is_string()) return bad(field, "must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

bool truthy_object(const Json* v, std::string_view flag) {
  if (v == nullptr) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_object()) {
    auto it = v->find(flag);
    return it != v->end() && it->is_boolean() && it->get<bool>();
  }
  return true;
}

Json view_object(const SandboxView& s, bool with_token) {
  Json j{{"sandboxID", s.sandbox_id},
         {"templateID", s.template_id},
         {"alias", s.template_id},
         {"clientID", "corral"},
         {"startedAt", rfc3339_ms(s.started_at_ms)},
         {"endAt", rfc3339_ms(s.end_at_ms)},
         {"state", s.state},
         {"cpuCount", s.cpu_count < 1 ? 1 : static_cast<std::int64_t>(s.cpu_count + 0.999)},
         {"memoryMB", s.memory_mb},
         {"diskSizeMB", s.disk_size_mb},
         {"envdVersion", s.envd_version},
         {"metadata", s.metadata}};
  if (with_token && s.envd_access_token) j["envdAccessToken"] = *s.envd_access_token;
  if (s.allow_internet_access) j["allowInternetAccess"] = *s.allow_internet_access;
  return j;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<CreateRequest> parse_create_request(std::string_view json) {
  auto j = Json::parse(json.empty() ? std::string_view("{}") : json, nullptr, false);
  if (j.is_discarded()) return bad("body", "is not valid JSON");
  if (!j.is_object()) return bad("body", "must be a JSON object");
  CreateRequest r;
  if (const Json* t = member(j, "templateID")) {
    if (!t->is_string()) return bad("templateID", "must be a string");
    r.template_id = t->get<std::string>();
    if (r.template_id.empty()) r.template_id = "base";
  }
  if (const Json* m = member(j, "metadata")) {
    auto map = string_map(*m, "metadata");
    if (!map) return tl::unexpected(map.error());
    r.metadata = std::move(*map);
  }
  if (const Json* e = member(j, "envVars")) {
    auto map = string_map(*e, "envVars");
    if (!map) return tl::unexpected(map.error());
    for (auto& [k, v] : *map) r.env_vars.emplace_back(k, std::move(v));
  }
  if (const Json* t = member(j, "timeout")) {
    if (!t->is_number_integer() || t->get<std::int64_t>() < 0)
      return bad("timeout", "must be a whole number of seconds");
    r.timeout_s = t->get<std::int64_t>();
  }
  if (const Json* a = member(j, "allow_internet_access")) {
    if (!a->is_boolean()) return bad("allow_internet_access", "must be true or false");
    r.allow_internet_access = a->get<bool>();
  }
  if (const Json* n = member(j, "network")) {
    if (!n->is_object()) return bad("network", "must be an object");
    if (const Json* allow = member(*n, "allowOut")) {
      auto list = string_list(*allow, "network.allowOut");
      if (!list) return tl::unexpected(list.error());
      r.allow_out = std::move(*list);
    }
    if (const Json* deny = member(*n, "denyOut")) {
      auto list = string_list(*deny, "network.denyOut");
      if (!list) return tl::unexpected(list.error());
      r.deny_out = std::move(*list);
    }
    for (const char* field : {"egressProxy", "rules", "maskRequestHost"}) {
      if (member(*n, field) != nullptr)
        return unsupported(std::string("network.") + field,
                           "corral's egress is set by allowOut and denyOut (docs/e2b.md)");
    }
  }
  if (truthy_object(member(j, "autoPause"), "enabled"))
    return unsupported("autoPause", "corral cannot pause a sandbox with its memory");
  if (truthy_object(member(j, "autoResume"), "enabled"))
    return unsupported("autoResume", "corral cannot pause a sandbox with its memory");
  if (const Json* mcp = member(j, "mcp"); mcp != nullptr && !(mcp->is_object() && mcp->empty()))
    return unsupported("mcp", "run `corral mcp` for MCP (docs/mcp.md)");
  if (const Json* v = member(j, "volumeMounts"); v != nullptr && !(v->is_array() && v->empty()))
    return unsupported("volumeMounts", "use corral's own volumes API (docs/volumes.md)");
  if (const Json* iam = member(j, "iam"); iam != nullptr && !(iam->is_object() && iam->empty()))
    return unsupported("iam",
                       "corral's secrets broker gives sandboxes credentials (docs/secrets.md)");
  return r;
}

Result<std::optional<std::int64_t>> parse_timeout_body(std::string_view json, bool required) {
  auto j = Json::parse(json.empty() ? std::string_view("{}") : json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("body", "must be a JSON object");
  const Json* t = member(j, "timeout");
  if (t == nullptr) {
    if (required) return bad("timeout", "is missing (seconds from now)");
    return std::optional<std::int64_t>();
  }
  if (!t->is_number_integer() || t->get<std::int64_t>() < 0)
    return bad("timeout", "must be a whole number of seconds");
  return std::optional<std::int64_t>(t->get<std::int64_t>());
}

std::string created_json(const SandboxView& s) {
  Json j{{"sandboxID", s.sandbox_id},    {"templateID", s.template_id},   {"alias", s.template_id},
         {"clientID", "corral"},         {"envdVersion", s.envd_version}, {"domain", nullptr},
         {"trafficAccessToken", nullptr}};
  if (s.envd_access_token) j["envdAccessToken"] = *s.envd_access_token;
  return dump(j);
}

std::string listed_json(const std::vector<SandboxView>& list) {
  Json arr = Json::array();
  for (const SandboxView& s : list) arr.push_back(view_object(s, false));
  return dump(arr);
}

std::string detail_json(const SandboxView& s) {
  Json j = view_object(s, true);
  j["domain"] = nullptr;
  return dump(j);
}

std::string create_request_json(const CreateRequest& r) {
  Json j{{"templateID", r.template_id}};
  if (!r.metadata.empty()) j["metadata"] = r.metadata;
  if (!r.env_vars.empty()) {
    Json env = Json::object();
    for (const auto& [k, v] : r.env_vars) env[k] = v;
    j["envVars"] = std::move(env);
  }
  if (r.timeout_s) j["timeout"] = *r.timeout_s;
  if (r.allow_internet_access) j["allow_internet_access"] = *r.allow_internet_access;
  if (r.allow_out || r.deny_out) {
    Json n = Json::object();
    if (r.allow_out) n["allowOut"] = *r.allow_out;
    if (r.deny_out) n["denyOut"] = *r.deny_out;
    j["network"] = std::move(n);
  }
  return dump(j);
}

namespace {

Result<SandboxView> view_from(const Json& j) {
  if (!j.is_object()) return bad("sandbox", "is not an object");
  SandboxView v;
  auto str = [&](const char* k) -> std::string {
    auto it = j.find(k);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  v.sandbox_id = str("sandboxID");
  if (v.sandbox_id.empty()) return bad("sandboxID", "is missing");
  v.template_id = str("templateID");
  v.envd_version = str("envdVersion");
  if (auto t = j.find("envdAccessToken"); t != j.end() && t->is_string())
    v.envd_access_token = t->get<std::string>();
  if (auto d = j.find("domain"); d != j.end() && d->is_string()) v.domain = d->get<std::string>();
  if (auto m = j.find("metadata"); m != j.end() && m->is_object()) {
    auto map = string_map(*m, "metadata");
    if (map) v.metadata = std::move(*map);
  }
  // Times the answer does not give as RFC 3339 in UTC stay 0 (unknown).
  if (auto t = api::parse_time_ms(str("startedAt"))) v.started_at_ms = *t;
  if (auto t = api::parse_time_ms(str("endAt"))) v.end_at_ms = *t;
  if (auto c = j.find("cpuCount"); c != j.end() && c->is_number()) v.cpu_count = c->get<double>();
  if (auto m = j.find("memoryMB"); m != j.end() && m->is_number_unsigned())
    v.memory_mb = m->get<std::uint64_t>();
  if (auto d = j.find("diskSizeMB"); d != j.end() && d->is_number_unsigned())
    v.disk_size_mb = d->get<std::uint64_t>();
  if (auto s = str("state"); !s.empty()) v.state = s;
  return v;
}

}  // namespace

Result<SandboxView> parse_sandbox_view(std::string_view json) {
  auto j = Json::parse(json, nullptr, false);
  if (j.is_discarded()) return bad("answer", "is not JSON");
  return view_from(j);
}

Result<std::vector<SandboxView>> parse_sandbox_list(std::string_view json) {
  auto j = Json::parse(json, nullptr, false);
  if (!j.is_array()) return bad("answer", "is not a JSON array of sandboxes");
  std::vector<SandboxView> out;
  for (const Json& item : j) {
    auto v = view_from(item);
    if (!v) return tl::unexpected(v.error());
    out.push_back(std::move(*v));
  }
  return out;
}

std::string error_message(std::string_view body) {
  auto j = Json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (auto m = j.find("message"); m != j.end() && m->is_string()) return m->get<std::string>();
  }
  return std::string(body.substr(0, 500));
}

std::string error_json(int status, std::string_view message) {
  return dump(Json{{"code", status}, {"message", std::string(message)}});
}

Result<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size())
      return make_error(ErrorCode::kInvalidArgument, "a '%' without two hex digits");
    const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0)
      return make_error(ErrorCode::kInvalidArgument, "a '%' without two hex digits");
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

Result<std::map<std::string, std::string>> parse_metadata_filter(std::string_view value) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t amp = value.find('&', start);
    if (amp == std::string_view::npos) amp = value.size();
    std::string_view pair = value.substr(start, amp - start);
    if (!pair.empty()) {
      const std::size_t eq = pair.find('=');
      if (eq == std::string_view::npos || eq == 0)
        return make_error(ErrorCode::kInvalidArgument, "metadata filter: each entry is key=value");
      // Encoded twice by the SDK inside the parameter: decode twice.
      auto decode2 = [](std::string_view s) -> Result<std::string> {
        auto once = percent_decode(s);
        if (!once) return once;
        return percent_decode(*once);
      };
      auto k = decode2(pair.substr(0, eq));
      if (!k) return tl::unexpected(k.error());
      auto v = decode2(pair.substr(eq + 1));
      if (!v) return tl::unexpected(v.error());
      out[std::move(*k)] = std::move(*v);
    }
    start = amp + 1;
  }
  return out;
}

}  // namespace corral::e2b
