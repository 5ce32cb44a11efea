// The daemon's HTTP front: authentication (a bearer key on TCP; the unix
// socket's 0600 mode is the key there), routing of /v1 to the handlers,
// /healthz and /metrics, and JSON errors for everything that does not match.
#pragma once

#include <string>
#include <vector>

#include "daemon/api_context.h"
#include "daemon/api_keys.h"
#include "http/http_server.h"

namespace corral::daemon {

struct RouteInfo {
  std::string method;
  std::string pattern;  // "/v1/sandboxes/{id}/exec"
};

class ApiRouter {
 public:
  ApiRouter(ApiContext& context, const ApiKeys& keys);
  void handle(const http::Peer& peer, const http::RequestHead& head, http::BodyReader& body,
              http::ResponseWriter& out);
  // Whether the request may use the API: over TCP a valid bearer key,
  // on the unix socket always. The server also asks it to tell
  // authenticated connections from the rest (http::ServerOptions).
  bool authenticated(const http::Peer& peer, const http::RequestHead& head) const;
  // Every route the server has (the OpenAPI check compares these).
  static std::vector<RouteInfo> routes();

  using Handler = void (*)(ApiContext&, ApiRequest&);
  // The handler of `head`'s method and path, with the path parameters in
  // *params. Paths are matched exactly as sent: one with an empty segment
  // ("//", a trailing "/") is unknown. When there is no handler, answers on
  // `out` (404 not_found for an unknown path, 405 method_not_allowed with
  // Allow for a known path) and returns nullptr.
  static Handler route(const http::RequestHead& head, http::ResponseWriter& out,
                       std::vector<std::string>* params);

 private:
  // The caller's namespace (ApiRequest::ns), or the error to answer.
  ApiResult<std::string> caller_namespace(const http::Peer& peer,
                                          const http::RequestHead& head) const;
  ApiContext& ctx_;
  const ApiKeys& keys_;
};

}  // namespace corral::daemon
