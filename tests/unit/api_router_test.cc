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
    if (info.pattern == "/healthz" || info.pattern == "/readyz" || info.pattern == "/metrics")
      continue;  // before routing
    std::string path = info.pattern;
    for (auto [from, to] :
         {std::pair<std::string, std::string>{"{id}", "sb-0123"}, {"{pid}", "p-4567"},
          {"{name}", "vol-1"}, {"{n}", "3"}}) {
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
    if (info.pattern.find("{name}") != std::string::npos) expected.push_back("vol-1");
    if (info.pattern.find("{n}") != std::string::npos) expected.push_back("3");
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
  EXPECT_EQ(http::find_header(r.out.headers, "allow"), "POST, GET, HEAD");
  EXPECT_TRUE(
      api::parse_api_error(r.out.status, r.out.body).is(api::ApiErrorCode::kMethodNotAllowed))
      << r.out.body;

  Routed files;
  route("POST", "/v1/sandboxes/sb-0123/files", &files);
  EXPECT_EQ(files.out.status, 405);
  EXPECT_EQ(http::find_header(files.out.headers, "allow"), "PUT, GET, HEAD, DELETE");

  // No GET, no HEAD.
  Routed exec;
  route("HEAD", "/v1/sandboxes/sb-0123/exec", &exec);
  EXPECT_EQ(exec.handler, nullptr);
  EXPECT_EQ(exec.out.status, 405);
  EXPECT_EQ(http::find_header(exec.out.headers, "allow"), "POST");
}

// Issue 14 item 4 (RFC 9110 9.3.2): HEAD is served wherever GET is, by the
// same handler (the HTTP layer drops the body), and nowhere else.
TEST(ApiRouter, HeadRoutesToTheGetHandler) {
  int gets = 0;
  for (const auto& info : ApiRouter::routes()) {
    if (info.method != "GET" || info.pattern == "/healthz" || info.pattern == "/readyz" ||
        info.pattern == "/metrics")
      continue;
    std::string path = info.pattern;
    for (auto [from, to] :
         {std::pair<std::string, std::string>{"{id}", "sb-0123"}, {"{pid}", "p-4567"},
          {"{name}", "vol-1"}, {"{n}", "3"}}) {
      if (auto at = path.find(from); at != std::string::npos) path.replace(at, from.size(), to);
    }
    SCOPED_TRACE(path);
    Routed get, head;
    route("GET", path, &get);
    route("HEAD", path, &head);
    ASSERT_NE(get.handler, nullptr);
    EXPECT_EQ(head.handler, get.handler);
    EXPECT_EQ(head.params, get.params);
    EXPECT_EQ(head.out.responses, 0) << head.out.body;
    ++gets;
  }
  EXPECT_GE(gets, 8);
}

// Issue 14 item 4: the path is matched as sent. An escaped slash is part of
// its segment (it never splits one), and an escaped letter is not the
// letter: one resource, one spelling.
TEST(ApiRouter, EscapesInThePathAreNeverDecoded) {
  Routed r;
  route("GET", "/v1/sandboxes/sb-0123%2Fprocesses", &r);
  ASSERT_NE(r.handler, nullptr);  // the one-sandbox route, with a strange id
  EXPECT_EQ(r.params, std::vector<std::string>{"sb-0123%2Fprocesses"});
  Routed p;
  route("GET", "/v1/sandboxes/sb-0123/processes/p-1%2Foutput", &p);
  ASSERT_NE(p.handler, nullptr);
  EXPECT_EQ(p.params, (std::vector<std::string>{"sb-0123", "p-1%2Foutput"}));
  expect_not_found("GET", "/v1%2Fsandboxes");
  expect_not_found("GET", "/v1/%73andboxes");
  expect_not_found("GET", "/v1/sandboxes%2F");
  expect_not_found("GET", "/v1/sandboxes/sb-0123%2F%2Fprocesses/p-1");
  expect_not_found("GET", "/v1/sandboxes/sb-0123/files%2Flist");
}

}  // namespace
}  // namespace corral::daemon
