// The E2B-compatible front of `corral serve` (issue 17, docs/e2b.md): the
// control plane of api.e2b.app (create, list, get, kill, timeout, connect)
// and envd, the per-sandbox agent (the Connect services process.Process
// and filesystem.Filesystem, /files and /health), under one path prefix of
// the daemon's listener:
//
//   <prefix>/v2/sandboxes, <prefix>/sandboxes/{id}/...   control plane
//   <prefix>/envd/process.Process/Start, <prefix>/envd/files, ...   envd
//
// so that E2B_API_URL=http://host:port<prefix> and
// E2B_SANDBOX_URL=http://host:port<prefix>/envd are all the e2b SDK needs.
// The control plane authenticates with X-API-Key (a corral API key, or the
// same key spelled e2b_<hex>); envd with each sandbox's X-Access-Token, an
// HMAC of its id under a key of the daemon's, compared in constant time.
// Every operation goes through the services corral's own API uses
// (SandboxService, the file layer, the redactor, the audit log).
#pragma once

#include <string>
#include <string_view>

#include "daemon/api_context.h"
#include "daemon/api_keys.h"
#include "daemon/e2b_settings.h"
#include "daemon/envd_watcher.h"
#include "http/http_server.h"

namespace corral::daemon {

// The envd version the facade reports: the highest whose gated features
// (E2B-PROTOCOL.md section 8) it implements, never a higher one.
inline constexpr std::string_view kEnvdVersion = "0.5.7";

class E2bFacade {
 public:
  // `token_key`: the secret the access tokens are derived from (32 bytes).
  E2bFacade(ApiContext& context, const ApiKeys& keys, E2bSettings settings, std::string token_key);

  // Loads the token key from `path`, or makes one there (0600) when it is
  // missing. A file that is not a private regular file is an error.
  static Result<std::string> load_or_make_key(const std::string& path);

  const E2bSettings& settings() const { return settings_; }
  // Checks every template of serve.e2b.templates that is a create body as
  // a create would (the daemon refuses to start on one that fails).
  Status check_templates();
  // Whether the request is the facade's (its path is under the prefix).
  bool owns(const http::RequestHead& head) const;
  // The connection-level check the server asks (http::ServerOptions):
  // a valid API key for the control plane, a valid access token for envd.
  bool authenticated(const http::Peer& peer, const http::RequestHead& head) const;
  void handle(const http::Peer& peer, const http::RequestHead& head, http::BodyReader& body,
              http::ResponseWriter& out);

  // The access token of sandbox `id` (hex HMAC-SHA256 of the id).
  std::string access_token(std::string_view sandbox_id) const;
  bool token_matches(std::string_view sandbox_id, std::string_view presented) const;

  ApiContext& context() { return ctx_; }
  const ApiKeys& keys() const { return keys_; }
  // The inotify instances the facade's watches may hold (envd_watcher.h).
  WatchBudget& watch_budget() { return watch_budget_; }

 private:
  // A call on sandbox `id` that another live node of the fleet runs, sent
  // there (docs/fleet.md "E2B"): true when answered.
  bool relayed_to_owner(const http::RequestHead& head, http::BodyReader& body,
                        http::ResponseWriter& out, const std::string& id, const std::string& ns,
                        bool envd);

  ApiContext& ctx_;
  const ApiKeys& keys_;
  E2bSettings settings_;
  std::string token_key_;
  WatchBudget watch_budget_;
};

}  // namespace corral::daemon
