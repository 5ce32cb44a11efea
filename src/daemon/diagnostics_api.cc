// GET /v1/sandboxes/{id}/diagnostics (REQUIREMENTS.md T1, issue 16 point
// 4; docs/api.md "Diagnostics"): why a sandbox failed, live or for
// serve.diagnostics.retention after its destroy.
#include "base/json_text.h"
#include "daemon/api_context.h"
#include "daemon/sandbox_service.h"

namespace corral::daemon {

void handle_sandbox_diagnostics(ApiContext& ctx, ApiRequest& r) {
  auto doc = ctx.sandboxes.diagnostics(r.params[0], r.ns);
  if (!doc) return send_error(r.out, doc.error());
  send_json(r.out, 200, json_text(*doc));
}

}  // namespace corral::daemon
