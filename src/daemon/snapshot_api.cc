// The failure snapshot routes (D4; docs/api.md "Snapshots",
// docs/snapshots.md): list, get, download and delete the snapshots in the
// object store, and take one of a live sandbox by hand.
#include <nlohmann/json.hpp>

#include "daemon/api_context.h"
#include "daemon/snapshot_service.h"

namespace corral::daemon {

using nlohmann::json;

namespace {

json snapshot_json(const snapshot::SnapshotInfo& s) {
  return json{{"id", s.id},
              {"task", s.task.empty() ? json(nullptr) : json(s.task)},
              {"reason", s.reason},
              {"sandbox", s.sandbox},
              {"size", s.size},
              {"sha256", s.sha256},
              {"created_at_ms", s.created_ms},
              {"expires_at_ms", s.expires_ms},
              {"partial", s.partial},
              {"partial_reasons", s.partial_reasons},
              {"env_secret_names", s.env_secret_names},
              {"files", s.files},
              {"redactions", s.redactions}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The service, or a 503 when the daemon runs without an object store.
SnapshotService* service_or_fail(ApiContext& ctx, ApiRequest& r) {
  if (ctx.snapshots != nullptr) return ctx.snapshots;
  send_error(r.out, api::make_api_error(api::ApiErrorCode::kUnavailable,
                                        "failure snapshots are not available: no object store",
                                        "", "configure serve.object_store (docs/config.md)"));
  return nullptr;
}

bool valid_id_or_fail(ApiRequest& r, const std::string& id) {
  if (snapshot::valid_snapshot_id(id)) return true;
  send_error(r.out, api::make_api_error(api::ApiErrorCode::kNotFound, "no snapshot " + id, "",
                                        "snapshot ids are snap- and 32 hex digits"));
  return false;
}

}  // namespace

void handle_list_snapshots(ApiContext& ctx, ApiRequest& r) {
  auto* service = service_or_fail(ctx, r);
  if (service == nullptr) return;
  std::size_t limit = 100;
  if (auto l = r.query_value("limit")) {
    char* end = nullptr;
    unsigned long v = std::strtoul(l->c_str(), &end, 10);
    if (l->empty() || *end != '\0' || v == 0 || v > 1000) {
      send_error(r.out, api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                            "limit must be 1..1000", "limit"));
      return;
    }
    limit = v;
  }
  auto page = service->store().list(r.query_value("task").value_or(""), limit,
                                    r.query_value("cursor").value_or(""));
  if (!page) {
    send_error(r.out, api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                          page.error().message, "cursor", page.error().hint));
    return;
  }
  json list = json::array();
  for (const auto& s : page->snapshots) list.push_back(snapshot_json(s));
  json body{{"snapshots", list},
            {"next_cursor", page->next_cursor.empty() ? json(nullptr) : json(page->next_cursor)}};
  send_json(r.out, 200, dump(body));
}

void handle_get_snapshot(ApiContext& ctx, ApiRequest& r) {
  auto* service = service_or_fail(ctx, r);
  if (service == nullptr || !valid_id_or_fail(r, r.params[0])) return;
  auto s = service->store().get(r.params[0]);
  if (!s) return send_error(r.out, api::to_api_error(s.error()));
  send_json(r.out, 200, dump(snapshot_json(*s)));
}

void handle_delete_snapshot(ApiContext& ctx, ApiRequest& r) {
  auto* service = service_or_fail(ctx, r);
  if (service == nullptr || !valid_id_or_fail(r, r.params[0])) return;
  auto s = service->store().get(r.params[0]);
  if (!s) return send_error(r.out, api::to_api_error(s.error()));
  auto removed = service->store().remove(r.params[0], "api");
  if (!removed) return send_error(r.out, api::to_api_error(removed.error()));
  send_json(r.out, 200, dump(snapshot_json(*s)));
}

// The archive as stored: its length and sha256 up front (from the
// metadata), the bytes streamed from the object store.
void handle_download_snapshot(ApiContext& ctx, ApiRequest& r) {
  auto* service = service_or_fail(ctx, r);
  if (service == nullptr || !valid_id_or_fail(r, r.params[0])) return;
  auto s = service->store().get(r.params[0]);
  if (!s) return send_error(r.out, api::to_api_error(s.error()));
  bool started = false;
  auto got = service->store().download(s->id, [&](std::span<const char> bytes) -> Status {
    if (!started) {
      started = true;
      CORRAL_TRY(r.out.start(200,
                             {{"content-type", "application/zstd"},
                              {"content-disposition", "attachment; filename=\"" + s->id + ".tar.zst\""},
                              {"x-corral-sha256", s->sha256}},
                             s->size));
    }
    return r.out.write(std::string_view(bytes.data(), bytes.size()));
  });
  if (!got) {
    // Once the head is out, only cutting the connection short can say so.
    if (!r.out.started()) send_error(r.out, api::to_api_error(got.error().wrap("reading " + s->id)));
    return;
  }
  if (!started)
    (void)r.out.start(200, {{"content-type", "application/zstd"}, {"x-corral-sha256", s->sha256}},
                      0);
  (void)r.out.finish();
}

// POST /v1/sandboxes/{id}/snapshot {"reason": "...", "task": "..."}: a
// snapshot of a live sandbox now (debugging, and the task service's path
// through the API). Both fields optional; reason defaults to "manual".
void handle_snapshot_sandbox(ApiContext& ctx, ApiRequest& r) {
  auto* service = service_or_fail(ctx, r);
  if (service == nullptr) return;
  auto body = read_json_body(r, ctx.limits.max_json_body);
  if (!body) return send_error(r.out, body.error());
  std::string reason = "manual", task;
  if (!body->empty()) {
    auto j = json::parse(*body, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return send_error(r.out, api::make_api_error(api::ApiErrorCode::kBadJson,
                                                   "the body must be a JSON object"));
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() != "reason" && it.key() != "task")
        return send_error(r.out, api::make_api_error(api::ApiErrorCode::kUnknownField,
                                                     "unknown field " + it.key(), it.key(),
                                                     "the fields are reason and task"));
      if (!it.value().is_string() || it.value().get<std::string>().size() > 128)
        return send_error(r.out, api::make_api_error(api::ApiErrorCode::kWrongType,
                                                     it.key() + " must be a string of at most 128 bytes",
                                                     it.key()));
    }
    reason = j.value("reason", reason);
    task = j.value("task", task);
  }
  auto taken = service->take_sandbox(r.params[0], task, reason, {});
  if (!taken) return send_error(r.out, taken.error());
  send_json(r.out, 201, dump(snapshot_json(*taken)));
}

}  // namespace corral::daemon
