// The daemon's route matching (ApiRouter::route, src/daemon/api_router.cc):
// paths are matched exactly as sent. A path with an empty segment ("//", a
// trailing "/") is not normalized to a known route but answered like any
// unknown path: 404 with the JSON not_found error.
#include "daemon/api_router.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/api_model.h"

namespace corral::daemon {
namespace {

// Records the one response the router sends.
class RecordingWriter final : public http::ResponseWriter {
 public:
  Status send(int status, const http::Headers& headers, std::string_view body) override {
    ++responses;
    this->status = status;
    this->headers = headers;
    this->body.assign(body);
    return ok();
  }
  Status start(int status, const http::Headers& headers, std::optional<std::uint64_t>) override {
    return send(status, headers, {});
  }
  Status write(std::string_view data) override {
    body.append(data);
    return ok();
  }
  Status finish() override { return ok(); }
  bool started() const override { return responses > 0; }
  bool peer_gone() override { return false; }
  int fd() const override { return -1; }

  int responses = 0;
  int status = 0;
  http::Headers headers;
  std::string body;
};

struct Routed {
  ApiRouter::Handler handler = nullptr;
  std::vector<std::string> params;
  RecordingWriter out;
};

// Sets params to garbage first, to see that route() replaces them.
void route(const std::string& method, const std::string& path, Routed* r) {
  http::RequestHead head;
  head.method = method;
  head.path = path;
  head.target = path;
  r->params = {"stale"};
  r->handler = ApiRouter::route(head, r->out, &r->params);
}

// A 404 exactly like the one of a path no route knows.
void expect_not_found(const std::string& method, const std::string& path) {
  SCOPED_TRACE(method + " " + path);
  Routed r;
  route(method, path, &r);
  EXPECT_EQ(r.handler, nullptr);
  EXPECT_TRUE(r.params.empty());
  ASSERT_EQ(r.out.responses, 1);
  EXPECT_EQ(r.out.status, 404);
  EXPECT_EQ(http::find_header(r.out.headers, "content-type"), "application/json");
  api::ApiError e = api::parse_api_error(r.out.status, r.out.body);
  EXPECT_TRUE(e.is(api::ApiErrorCode::kNotFound)) << r.out.body;
  EXPECT_EQ(e.message, "no route " + method + " " + path) << r.out.body;
  EXPECT_EQ(e.hint, "the API is described in docs/api.md") << r.out.body;
}

TEST(ApiRouter, KnownPathsRouteWithTheirParameters) {
  for (const auto& info : ApiRouter::routes()) {
    if (info.pattern == "/healthz" || info.pattern == "/metrics") continue;  // before routing
    std::string path = info.pattern;
    for (auto [from, to] :
         {std::pair<std::string, std::string>{"{id}", "sb-0123"}, {"{pid}", "p-4567"}}) {
      if (auto at = path.find(from); at != std::string::npos) path.replace(at, from.size(), to);
    }
    SCOPED_TRACE(info.method + " " + path);
    Routed r;
    route(info.method, path, &r);
    EXPECT_NE(r.handler, nullptr);
    EXPECT_EQ(r.out.responses, 0) << r.out.body;
    std::vector<std::string> expected;
    if (info.pattern.find("{id}") != std::string::npos) expected.push_back("sb-0123");
    if (info.pattern.find("{pid}") != std::string::npos) expected.push_back("p-4567");
    EXPECT_EQ(r.params, expected);
  }
}

TEST(ApiRouter, UnknownPathIsNotFound) {
  expect_not_found("GET", "/v1/nope");
  expect_not_found("GET", "/v1/sandboxes/sb-0123/nope");
  expect_not_found("GET", "/v2/sandboxes");
}

TEST(ApiRouter, EmptySegmentsAreNotFoundNeverNormalized) {
  // Each would reach a route if empty segments were dropped.
  expect_not_found("GET", "/v1//sandboxes");
  expect_not_found("POST", "/v1//sandboxes");
  expect_not_found("GET", "//v1/sandboxes");
  expect_not_found("GET", "/v1/sandboxes/");
  expect_not_found("GET", "/v1/sandboxes//");
  expect_not_found("GET", "/v1/sandboxes//sb-0123");
  expect_not_found("GET", "/v1/sandboxes/sb-0123/");
  expect_not_found("POST", "/v1/sandboxes/sb-0123//exec");
  expect_not_found("POST", "/v1/sandboxes/sb-0123/exec/");
  expect_not_found("GET", "/v1/sandboxes/sb-0123/processes//p-4567");
  expect_not_found("PUT", "/v1/sandboxes/sb-0123/files/");
  // Not a 405 either: the path is unknown, whatever the method.
  expect_not_found("DELETE", "/v1/sandboxes/");
  // No segments at all.
  expect_not_found("GET", "/");
  expect_not_found("GET", "//");
  expect_not_found("GET", "");
}

TEST(ApiRouter, KnownPathOtherMethodIs405WithAllow) {
  Routed r;
  route("DELETE", "/v1/sandboxes", &r);
  EXPECT_EQ(r.handler, nullptr);
  EXPECT_TRUE(r.params.empty());
  ASSERT_EQ(r.out.responses, 1);
  EXPECT_EQ(r.out.status, 405);
  EXPECT_EQ(http::find_header(r.out.headers, "allow"), "POST, GET");
  EXPECT_TRUE(
      api::parse_api_error(r.out.status, r.out.body).is(api::ApiErrorCode::kMethodNotAllowed))
      << r.out.body;

  Routed files;
  route("POST", "/v1/sandboxes/sb-0123/files", &files);
  EXPECT_EQ(files.out.status, 405);
  EXPECT_EQ(http::find_header(files.out.headers, "allow"), "PUT, GET, DELETE");
}

}  // namespace
}  // namespace corral::daemon
