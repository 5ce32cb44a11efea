// POST /v1/tasks/{id}/replay (task_model.h, docs/tasks.md "Replay", T2):
// the body and its canonical form. Strict like every request: unknown
// fields are refused by name, the network is a word or a create's network
// object checked by the same reader.
#include "api/codec_internal.h"
#include "api/json_writer.h"
#include "api/task_model.h"
#include "base/strings.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

constexpr std::int64_t kMaxReplayTimeoutMs = 7 * kDayMs;

Result<TaskReplayRequest> read_replay(const Json& doc, const Ctx& ctx) {
  auto obj = open_object(doc, "", ctx, {"id", "network", "from_snapshot", "timeout"},
                         "an object {\"id\", \"network\", \"from_snapshot\", \"timeout\"}, all "
                         "optional");
  if (!obj) return tl::unexpected<Error>(obj.error());
  TaskReplayRequest r;
  if (const Json* id = obj->get("id"); id != nullptr && !id->is_null()) {
    auto text = read_string(*id, "id", ctx);
    if (!text) return tl::unexpected<Error>(text.error());
    if (!valid_task_id(*text))
      return fail(ApiErrorCode::kInvalidValue, "id",
                  quote_for_message(*text) + " is not a task id (1-128 of [A-Za-z0-9._:-])");
    r.id = std::move(*text);
  }
  if (const Json* net = obj->get("network"); net != nullptr && !net->is_null()) {
    if (net->is_string()) {
      const std::string word = net->get<std::string>();
      if (word == "none") {
        r.network = TaskReplayRequest::Network::kNone;
      } else if (word == "as_original") {
        r.network = TaskReplayRequest::Network::kAsOriginal;
      } else {
        return fail(ApiErrorCode::kInvalidValue, "network",
                    quote_for_message(word) +
                        " is not \"none\" or \"as_original\"; or give a network object as a "
                        "create takes it, such as {\"mode\": \"allowlist\", \"allow\": [...]}");
      }
    } else if (net->is_object()) {
      auto spec = read_network_object(*net, "network", ctx);
      if (!spec) return tl::unexpected<Error>(spec.error());
      r.network = TaskReplayRequest::Network::kExplicit;
      r.network_spec = std::move(*spec);
    } else {
      return wrong_type("network", "\"none\", \"as_original\" or a network object", *net);
    }
  }
  CORRAL_TRY(read_into(*obj, "from_snapshot", r.from_snapshot, any_bool()));
  if (const Json* t = obj->get("timeout"); t != nullptr && !t->is_null()) {
    auto ms = read_duration_ms(*t, "timeout", ctx, 1, kMaxReplayTimeoutMs);
    if (!ms) return tl::unexpected<Error>(ms.error());
    r.timeout_ms = *ms;
  }
  return r;
}

}  // namespace

Result<TaskReplayRequest> parse_task_replay(std::string_view body) {
  // An empty body is the default replay.
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return TaskReplayRequest{};
  return guarded<TaskReplayRequest>([&]() -> Result<TaskReplayRequest> {
    auto doc = parse_json(body, kRequest);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_replay(*doc, kRequest);
  });
}

std::string to_canonical_json(const TaskReplayRequest& r) {
  Json j = Json::object();
  j["id"] = nullable(r.id);
  switch (r.network) {
    case TaskReplayRequest::Network::kNone:
      j["network"] = "none";
      break;
    case TaskReplayRequest::Network::kAsOriginal:
      j["network"] = "as_original";
      break;
    case TaskReplayRequest::Network::kExplicit:
      j["network"] = network_json(r.network_spec);
      break;
  }
  j["from_snapshot"] = r.from_snapshot;
  j["timeout_ms"] = nullable(r.timeout_ms);
  return dump(j);
}

}  // namespace corral::api
