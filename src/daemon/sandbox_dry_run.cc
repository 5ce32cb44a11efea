// GET /v1/sandboxes/{id}/dry-run (X2, docs/dry-run.md, ADR 0016): what a
// live dry-run sandbox would have done so far. The writes are read now from
// its layer's upper dirs (a lease keeps the layer while they are read),
// compared with the base layer, with the writable mounts' host sources and
// with the baseline taken when it was handed out; the network and secret
// records come from its DryRunRecord.
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/api_context.h"
#include "daemon/sandbox_service.h"
#include "secrets/redactor.h"

namespace corral::daemon {

ApiResult<nlohmann::json> SandboxService::dry_run_report(std::string_view id) {
  auto lease = this->lease(id);
  if (!lease) return tl::unexpected(lease.error());
  auto state = dry_run_book_.find(std::string(id));
  if (!state)
    return api_fail(api::ApiErrorCode::kConflict,
                    "sandbox " + std::string(id) + " is not a dry run", "",
                    "create it with \"dry_run\": true to get a report");
  const std::shared_ptr<SandboxEntry>& e = lease->sandbox();
  SecretCheck has_secret;
  if (auto set = redaction(e->id); set && !set->empty())
    has_secret = [set](std::string_view text) { return secrets::redact(*set, text) != text; };
  DryRunWrites writes = collect_layer_writes(e->live->layer_root_fd(), state->root_lower.get(),
                                             state->mounts, &state->baseline, has_secret);
  nlohmann::json doc = daemon::dry_run_report(writes, state->record);
  doc["sandbox"] = e->id;
  return doc;
}

void handle_sandbox_dry_run(ApiContext& ctx, ApiRequest& r) {
  auto doc = ctx.sandboxes.dry_run_report(r.params[0]);
  if (!doc) return send_error(r.out, doc.error());
  send_json(r.out, 200, json_text(*doc));
}

}  // namespace corral::daemon
