// The bodies of E2B's control plane (api.e2b.app, as the e2b SDK 2.51.0
// sends and reads them): the create and connect requests, the sandbox as
// created, listed and inspected, the error body, and the list's metadata
// filter. Field names follow E2B's OpenAPI document (camelCase, except
// allow_internet_access). Unknown fields are ignored, as E2B does: the
// SDKs send fields this facade does not know.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace corral::e2b {

struct CreateRequest {
  std::string template_id = "base";
  std::map<std::string, std::string> metadata;
  std::vector<std::pair<std::string, std::string>> env_vars;
  std::optional<std::int64_t> timeout_s;  // unset: 300, E2B's default
  std::optional<bool> allow_internet_access;
  // network.allowOut / network.denyOut: CIDRs, IPs or domain names.
  std::optional<std::vector<std::string>> allow_out;
  std::optional<std::vector<std::string>> deny_out;
};
// kInvalidArgument naming the field for a wrong type; a field asking for
// what corral cannot do (autoPause, autoResume,
// mcp, volumeMounts, network.egressProxy/rules/maskRequestHost, ...) is
// kUnavailable.
Result<CreateRequest> parse_create_request(std::string_view json);

// POST /sandboxes/{id}/timeout and /v2/sandboxes/{id}/connect: {"timeout": s}.
// Connect's body may be {} (nullopt).
Result<std::optional<std::int64_t>> parse_timeout_body(std::string_view json, bool required);

// What the facade says about one sandbox.
struct SandboxView {
  std::string sandbox_id;
  std::string template_id;
  std::string envd_version;
  std::optional<std::string> envd_access_token;  // create, connect, getInfo
  // Where the sandbox's envd lives, when not the client's configured
  // domain (read by clients; corral's facade answers null).
  std::optional<std::string> domain;
  std::map<std::string, std::string> metadata;
  std::int64_t started_at_ms = 0;
  std::int64_t end_at_ms = 0;
  double cpu_count = 1;
  std::uint64_t memory_mb = 0;
  std::uint64_t disk_size_mb = 0;
  std::string state = "running";
  std::optional<bool> allow_internet_access;
};
// The create / connect answer: sandboxID, templateID, alias, clientID,
// envdVersion, envdAccessToken, domain (null).
std::string created_json(const SandboxView& s);
// One ListedSandbox (GET /v2/sandboxes items) or SandboxDetail (GET
// /sandboxes/{id}, with the token).
std::string listed_json(const std::vector<SandboxView>& list);
std::string detail_json(const SandboxView& s);

// The client's side (a provider talking to an E2B control plane).
std::string create_request_json(const CreateRequest& request);
// A create, connect or detail answer, or one ListedSandbox.
Result<SandboxView> parse_sandbox_view(std::string_view json);
Result<std::vector<SandboxView>> parse_sandbox_list(std::string_view json);
// The message of an error body ({"code": n, "message": "..."}), or the
// body itself when it is not one.
std::string error_message(std::string_view body);

// {"code": 404, "message": "..."}: E2B's error body (the SDK reads code).
std::string error_json(int status, std::string_view message);

// GET /v2/sandboxes?metadata=...: the parameter's value (decoded once by
// the query parser) is itself a query string whose keys and values were
// percent-encoded once more: "a=x%2520y&team=abc" -> {a: "x y", team: "abc"}.
Result<std::map<std::string, std::string>> parse_metadata_filter(std::string_view value);

// "a%20b" -> "a b"; '+' stays '+'. kInvalidArgument for a bad escape.
Result<std::string> percent_decode(std::string_view text);

}  // namespace corral::e2b
