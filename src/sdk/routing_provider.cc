#include "sdk/routing_provider.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "sdk/e2b_provider.h"
#include "sdk/remote_provider.h"

namespace corral::sdk {

bool backend_down(const Error& e) {
  return e.code == ErrorCode::kUnavailable || e.code == ErrorCode::kSystem ||
         e.code == ErrorCode::kTimeout;
}

Result<std::unique_ptr<RoutingProvider>> RoutingProvider::open(RoutingConfig config) {
  auto known = [&](const std::string& b) { return config.backends.count(b) != 0; };
  if (config.classes.empty()) return make_error(ErrorCode::kInvalidArgument, "routing: no classes");
  for (const auto& [cls, rule] : config.classes) {
    if (!known(rule.backend))
      return make_error(ErrorCode::kInvalidArgument, "routing: class " + cls +
                                                         " names back-end \"" + rule.backend +
                                                         "\", which is not among the back-ends");
    if (!rule.when_down.empty() && rule.when_down != "fail" && !known(rule.when_down))
      return make_error(ErrorCode::kInvalidArgument,
                        "routing: class " + cls + ": when_down names back-end \"" + rule.when_down +
                            "\", which is not among the back-ends",
                        "use fail, or a back-end's name");
  }
  if (config.classes.count(config.default_class) == 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "routing: default_class \"" + config.default_class + "\" is not a class");
  return std::unique_ptr<RoutingProvider>(new RoutingProvider(std::move(config)));
}

namespace {

Result<std::string> key_from(const YAML::Node& b, const std::string& name) {
  if (b["api_key_env"]) {
    const std::string var = b["api_key_env"].as<std::string>();
    const char* v = std::getenv(var.c_str());
    if (v == nullptr || *v == '\0')
      return make_error(ErrorCode::kInvalidArgument,
                        "routing: back-end " + name + ": $" + var + " is not set");
    return std::string(v);
  }
  if (b["api_key_file"]) {
    std::ifstream in(b["api_key_file"].as<std::string>());
    std::string key;
    if (!std::getline(in, key) || key.empty())
      return make_error(ErrorCode::kInvalidArgument,
                        "routing: back-end " + name + ": cannot read its api_key_file");
    return key;
  }
  return std::string();
}

// A key the file does not know is refused, naming it: a typo such as
// "when-down" or "api_key" (a key in the file itself) would otherwise be
// dropped without a word, and change where sandboxes go or how they are
// authenticated.
Status only_known_keys(const YAML::Node& node, std::initializer_list<std::string_view> known,
                       std::string_view source, const std::string& where) {
  if (!node.IsMap())
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(source) + ": " + where + ": a map is needed");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(source) + ": " + where + ": unknown key \"" + key + "\"",
                      "the keys here are " + list + " (docs/config.md, \"The SDKs' back-ends\")");
  }
  return ok();
}

}  // namespace

Result<std::unique_ptr<RoutingProvider>> RoutingProvider::from_yaml(std::string_view text,
                                                                    std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kInvalidArgument, std::string(source) + ": " + e.what());
  }
  YAML::Node r = root["routing"] ? root["routing"] : root;
  RoutingConfig config;
  try {
    CORRAL_TRY(only_known_keys(r, {"backends", "classes", "default_class"}, source,
                               root["routing"] ? "routing" : "the routing configuration"));
    if (!r["backends"] || !r["backends"].IsMap())
      return make_error(ErrorCode::kInvalidArgument,
                        std::string(source) + ": backends: a map is needed");
    for (const auto& kv : r["backends"]) {
      const std::string name = kv.first.as<std::string>();
      const YAML::Node& b = kv.second;
      if (!b.IsMap())
        return make_error(ErrorCode::kInvalidArgument,
                          std::string(source) + ": back-end " + name + ": a map is needed");
      const std::string kind = b["kind"] ? b["kind"].as<std::string>() : "";
      if (kind == "corral")
        CORRAL_TRY(only_known_keys(b, {"kind", "url", "api_key_env", "api_key_file"}, source,
                                   "back-end " + name));
      else if (kind == "e2b")
        CORRAL_TRY(only_known_keys(b,
                                   {"kind", "api_url", "sandbox_url", "domain", "ca_file",
                                    "template", "api_key_env", "api_key_file"},
                                   source, "back-end " + name));
      auto key = key_from(b, name);
      if (!key) return tl::unexpected(key.error());
      if (kind == "corral") {
        RemoteOptions o;
        o.url = b["url"] ? b["url"].as<std::string>() : "";
        o.api_key = *key;
        auto p = RemoteProvider::open(o);
        if (!p) return tl::unexpected(p.error().wrap("routing: back-end " + name));
        config.backends[name] = std::move(*p);
      } else if (kind == "e2b") {
        E2bOptions o;
        o.api_url = b["api_url"] ? b["api_url"].as<std::string>() : "";
        o.sandbox_url = b["sandbox_url"] ? b["sandbox_url"].as<std::string>() : "";
        if (b["domain"]) o.domain = b["domain"].as<std::string>();
        o.ca_file = b["ca_file"] ? b["ca_file"].as<std::string>() : "";
        o.api_key = *key;
        if (b["template"]) o.template_id = b["template"].as<std::string>();
        auto p = E2bProvider::open(o);
        if (!p) return tl::unexpected(p.error().wrap("routing: back-end " + name));
        config.backends[name] = std::move(*p);
      } else {
        return make_error(ErrorCode::kInvalidArgument, std::string(source) + ": back-end " + name +
                                                           ": kind must be corral or e2b");
      }
    }
    if (!r["classes"] || !r["classes"].IsMap())
      return make_error(ErrorCode::kInvalidArgument,
                        std::string(source) + ": classes: a map is needed");
    for (const auto& kv : r["classes"]) {
      CORRAL_TRY(only_known_keys(kv.second, {"backend", "when_down"}, source,
                                 "class " + kv.first.as<std::string>()));
      RouteRule rule;
      rule.backend = kv.second["backend"] ? kv.second["backend"].as<std::string>() : "";
      if (kv.second["when_down"]) rule.when_down = kv.second["when_down"].as<std::string>();
      config.classes[kv.first.as<std::string>()] = rule;
    }
    if (r["default_class"]) config.default_class = r["default_class"].as<std::string>();
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kInvalidArgument, std::string(source) + ": " + e.what());
  }
  return open(std::move(config));
}

void RoutingProvider::count(const std::string& cls, const std::string& backend, bool fallback) {
  std::lock_guard lock(mu_);
  ++counts_[{cls, backend, fallback}];
}

std::vector<RoutingProvider::Count> RoutingProvider::counts() const {
  std::lock_guard lock(mu_);
  std::vector<Count> out;
  for (const auto& [k, n] : counts_)
    out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), n});
  return out;
}

std::string RoutingProvider::metrics_text() const {
  std::ostringstream out;
  out << "# HELP corral_routing_creates_total Sandboxes created, by class and the back-end chosen\n"
      << "# TYPE corral_routing_creates_total counter\n";
  for (const Count& c : counts())
    out << "corral_routing_creates_total{class=\"" << c.cls << "\",backend=\"" << c.backend
        << "\",fallback=\"" << (c.fallback ? "true" : "false") << "\"} " << c.n << "\n";
  return out.str();
}

std::string RoutingProvider::backend_of(std::string_view id) const {
  std::lock_guard lock(mu_);
  auto it = owners_.find(id);
  return it == owners_.end() ? std::string() : it->second;
}

Result<api::SandboxInfo> RoutingProvider::create_sandbox(
    const api::CreateSandboxRequest& request, std::optional<std::string> idempotency_key) {
  std::string cls = config_.default_class;
  if (auto it = request.spec.metadata.find(kClassKey); it != request.spec.metadata.end())
    cls = it->second;
  auto rule = config_.classes.find(cls);
  if (rule == config_.classes.end())
    return make_error(
        ErrorCode::kInvalidArgument, "no routing for class \"" + cls + "\"",
        "add it to the routing's classes, or leave \"class\" out for " + config_.default_class);
  auto attempt = [&](const std::string& backend) {
    api::CreateSandboxRequest r = request;
    r.spec.metadata[kClassKey] = cls;
    r.spec.metadata[kBackendKey] = backend;
    return config_.backends.at(backend)->create_sandbox(r, idempotency_key);
  };
  auto created = attempt(rule->second.backend);
  std::string used = rule->second.backend;
  bool fallback = false;
  if (!created && backend_down(created.error()) && !rule->second.when_down.empty() &&
      rule->second.when_down != "fail") {
    used = rule->second.when_down;
    fallback = true;
    auto second = attempt(used);
    if (!second)
      return tl::unexpected(second.error().wrap("class " + cls + ": " + rule->second.backend +
                                                " is down (" + created.error().message +
                                                "), and its fallback " + used + " failed too"));
    created = std::move(second);
  }
  if (!created)
    return tl::unexpected(created.error().wrap("class " + cls + " on back-end " + used));
  {
    std::lock_guard lock(mu_);
    owners_[created->id] = used;
  }
  count(cls, used, fallback);
  return created;
}

Result<SandboxProvider*> RoutingProvider::owner(std::string_view id) {
  {
    std::lock_guard lock(mu_);
    if (auto it = owners_.find(id); it != owners_.end())
      return config_.backends.at(it->second).get();
  }
  // Made by another process: the back-end that knows it.
  for (const auto& [name, p] : config_.backends) {
    if (auto info = p->inspect(id); info) {
      std::lock_guard lock(mu_);
      owners_[std::string(id)] = name;
      return p.get();
    }
  }
  return make_error(ErrorCode::kNotFound, "no back-end knows sandbox " + std::string(id));
}

Result<api::ExecResult> RoutingProvider::exec(std::string_view id,
                                              const api::ExecRequest& request) {
  auto p = owner(id);
  if (!p) return tl::unexpected(p.error());
  return (*p)->exec(id, request);
}

Result<api::ExecResult> RoutingProvider::exec_stream(std::string_view id,
                                                     const api::ExecRequest& request,
                                                     const OutputSink& sink) {
  auto p = owner(id);
  if (!p) return tl::unexpected(p.error());
  return (*p)->exec_stream(id, request, sink);
}

Result<api::UploadResult> RoutingProvider::put_file_from(std::string_view id, std::string_view path,
                                                         const ByteSource& source,
                                                         std::optional<std::uint64_t> length,
                                                         std::uint32_t mode) {
  auto p = owner(id);
  if (!p) return tl::unexpected(p.error());
  return (*p)->put_file_from(id, path, source, length, mode);
}

Result<std::uint64_t> RoutingProvider::get_file_to(std::string_view id, std::string_view path,
                                                   const ByteSink& sink) {
  auto p = owner(id);
  if (!p) return tl::unexpected(p.error());
  return (*p)->get_file_to(id, path, sink);
}

Result<api::SandboxInfo> RoutingProvider::inspect(std::string_view id) {
  auto p = owner(id);
  if (!p) return tl::unexpected(p.error());
  return (*p)->inspect(id);
}

Result<std::vector<api::SandboxInfo>> RoutingProvider::list(bool include_cleaned) {
  std::vector<api::SandboxInfo> all;
  for (const auto& [name, p] : config_.backends) {
    auto l = p->list(include_cleaned);
    if (!l) {
      if (backend_down(l.error())) continue;  // a down back-end lists nothing
      return tl::unexpected(l.error().wrap("back-end " + name));
    }
    for (auto& s : *l) all.push_back(std::move(s));
  }
  return all;
}

Result<api::SandboxInfo> RoutingProvider::destroy_sandbox(std::string_view id) {
  auto p = owner(id);
  if (!p) return tl::unexpected(p.error());
  auto r = (*p)->destroy_sandbox(id);
  if (r) {
    std::lock_guard lock(mu_);
    owners_.erase(std::string(id));
  }
  return r;
}

}  // namespace corral::sdk
