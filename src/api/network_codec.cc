// The network object of a sandbox (api_model.h): in a create request, in
// PUT .../network, and as stored.
#include <algorithm>
#include <cmath>

#include "api/api_model.h"
#include "base/strings.h"
#include "api/codec_internal.h"
#include "api/json_writer.h"
#include "base/json_text.h"
#include "netns/network_policy.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

constexpr std::size_t kMaxNetworkRules = 1024;
constexpr std::int64_t kMaxNetworkTimeoutMs = 3600 * kSecondMs;
constexpr double kMaxNetworkRate = 1e6;

Result<double> read_rate_number(const Json& v, std::string_view path) {
  if (!v.is_number()) return wrong_type(path, "a number", v);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0 || d > kMaxNetworkRate)
    return fail(ApiErrorCode::kInvalidValue, path,
                "must be between 0 (no limit) and 1000000, found " + json_text(v));
  return d;
}

// Checks each rule of a request with the policy's own parser, so that the
// error names the entry ("network.allow[2]").
Status check_rules(const std::vector<std::string>& rules, const std::string& path, bool deny) {
  for (std::size_t i = 0; i < rules.size(); ++i) {
    auto rule = net::parse_rule(rules[i], deny);
    if (!rule) return fail(ApiErrorCode::kInvalidValue, index_path(path, i), rule.error().message);
  }
  return ok();
}

}  // namespace

Json network_json(const NetworkSpec& n) {
  Json j = Json::object();
  j["mode"] = n.mode;
  if (!n.template_name.empty()) j["template"] = n.template_name;
  j["allow"] = strings_json(n.allow);
  j["deny"] = strings_json(n.deny);
  if (!n.remove.empty()) j["remove"] = strings_json(n.remove);
  j["allow_domains"] = strings_json(n.allow_domains);
  j["dns_servers"] = strings_json(n.dns_servers);
  if (n.timeout_ms > 0) j["timeout"] = duration_json(n.timeout_ms);
  if (n.rate_per_second >= 0) {
    Json rate = Json::object();
    rate["per_second"] = n.rate_per_second;
    rate["burst"] = n.rate_burst >= 0       ? n.rate_burst
                    : n.rate_per_second > 0 ? std::max(1.0, 2 * n.rate_per_second)
                                            : 0.0;
    j["rate"] = std::move(rate);
  }
  j["gateway"] = strings_json(n.gateway);
  return j;
}

Result<NetworkSpec> read_network_object(const Json& v, const std::string& path, const Ctx& ctx) {
  auto obj = open_object(v, path, ctx,
                         {"mode", "default", "template", "allow", "deny", "remove", "allow_domains",
                          "dns_servers", "timeout", "rate", "gateway"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  NetworkSpec n;
  const bool request = &ctx == &kRequest;
  // The design source's form (its section 8.1): `default: deny` with
  // `allow_domains`, or `default: allow` for everything public.
  std::optional<bool> default_allow;
  if (const Json* d = obj->get("default")) {
    auto text = read_string(*d, obj->at("default"), ctx, "\"deny\" or \"allow\"");
    if (!text) return tl::unexpected<Error>(text.error());
    if (*text != "deny" && *text != "allow")
      return fail(ApiErrorCode::kInvalidValue, obj->at("default"),
                  quote_for_message(*text) + " is not a default: use \"deny\" or \"allow\"");
    default_allow = *text == "allow";
    if (const Json* m = obj->get("mode");
        m != nullptr && m->is_string() && (m->get<std::string>() == "open") != *default_allow)
      return fail(ApiErrorCode::kInvalidValue, obj->at("mode"),
                  "mode " + quote_for_message(m->get<std::string>()) + " contradicts default " +
                      quote_for_message(*text) + ": give only one of them");
    if (*default_allow && obj->get("allow_domains") != nullptr &&
        !obj->get("allow_domains")->empty())
      return fail(ApiErrorCode::kInvalidValue, obj->at("allow_domains"),
                  "lists domains, but default \"allow\" reaches every public domain: use "
                  "default \"deny\" to allow only these");
  }
  if (const Json* mode = obj->get("mode")) {
    auto m =
        read_string(*mode, obj->at("mode"), ctx, "a string (\"none\", \"allowlist\", \"open\")");
    if (!m) return tl::unexpected<Error>(m.error());
    // "" is what GET shows for a policy given by its rules alone: sent back,
    // it means the same.
    if (*m != "none" && *m != "allowlist" && *m != "open" && !m->empty())
      return fail(ApiErrorCode::kInvalidValue, obj->at("mode"),
                  quote_for_message(*m) +
                      " is not a network mode: use \"none\" (loopback only), "
                      "\"allowlist\" or \"open\"");
    n.mode = *m;
  } else if (default_allow && *default_allow) {
    n.mode = "open";
  } else if (obj->get("allow") != nullptr || obj->get("template") != nullptr ||
             obj->get("allow_domains") != nullptr || obj->get("gateway") != nullptr) {
    n.mode = "";  // what the rules, template or gateway say (resolve_policy)
  }
  auto list = [&](std::string_view key, std::vector<std::string>& out) -> Status {
    const Json* l = obj->get(key);
    if (l == nullptr) return ok();
    auto items = read_string_list(*l, obj->at(key), ctx, kMaxNetworkRules, true);
    if (!items) return tl::unexpected<Error>(items.error());
    out = std::move(*items);
    return ok();
  };
  CORRAL_TRY(read_into(*obj, "template", n.template_name, any_string(ctx)));
  CORRAL_TRY(list("allow", n.allow));
  CORRAL_TRY(list("deny", n.deny));
  CORRAL_TRY(list("remove", n.remove));
  CORRAL_TRY(list("allow_domains", n.allow_domains));
  CORRAL_TRY(list("dns_servers", n.dns_servers));
  CORRAL_TRY(list("gateway", n.gateway));
  if (request) {
    CORRAL_TRY(check_rules(n.allow, obj->at("allow"), false));
    CORRAL_TRY(check_rules(n.deny, obj->at("deny"), true));
    CORRAL_TRY(check_rules(n.remove, obj->at("remove"), false));
  }
  if (const Json* t = obj->get("timeout")) {
    auto ms = read_duration_ms(*t, obj->at("timeout"), ctx, 1, kMaxNetworkTimeoutMs);
    if (!ms) return tl::unexpected<Error>(ms.error());
    n.timeout_ms = *ms;
  }
  if (const Json* r = obj->get("rate")) {
    auto rate = open_object(*r, obj->at("rate"), ctx, {"per_second", "burst"});
    if (!rate) return tl::unexpected<Error>(rate.error());
    if (rate->get("per_second") == nullptr)
      return fail(ApiErrorCode::kInvalidValue, rate->at("per_second"),
                  "is missing: new connections per second (0: no limit)");
    CORRAL_TRY(read_into(*rate, "per_second", n.rate_per_second, read_rate_number));
    // Without a burst: twice the rate (at least 1), as the CLI's --network-rate.
    n.rate_burst = n.rate_per_second > 0 ? std::max(1.0, 2 * n.rate_per_second) : 0;
    CORRAL_TRY(read_into(*rate, "burst", n.rate_burst, read_rate_number));
  }
  return n;
}

Result<NetworkSpec> parse_network_update(std::string_view body) {
  return read_document<NetworkSpec>(body, kRequest, read_network_object);
}

Result<NetworkSpec> network_from_json(std::string_view json) {
  return read_document<NetworkSpec>(json, kStored, read_network_object);
}

std::string to_json(const NetworkSpec& network) { return dump(network_json(network)); }

}  // namespace corral::api
