// POST /v1/tasks as multipart/form-data (issue 15 point 1, D6; docs/api.md
// "Raw bytes: a multipart submit"): a task's input bytes travel raw, not
// as base64 inside JSON. The bytes reach the sandbox exactly; the same
// bytes sent either way are one task (a repeat, never a second run); and
// every malformed or ambiguous body is a 400 that names what to fix and
// stores nothing.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "api/base64.h"
#include "http/multipart.h"
#include "support/daemon_harness.h"
#include "support/task_client.h"

namespace corral::testing {
namespace {

using nlohmann::json;

// Bytes that look like multipart framing, every byte value, and a NUL.
std::string hostile_bytes() {
  std::string b = "--corral-\r\n\r\n--\r\nContent-Disposition: form-data; name=\"task\"\r\n\r\n";
  for (int i = 0; i < 256; ++i) b.push_back(static_cast<char>(i));
  b += std::string(100000, 'x') + "\r\n--";
  return b;
}

struct Form {
  std::string body, content_type;
};

Form form(const json& task, const std::vector<std::pair<std::string, std::string>>& parts) {
  std::vector<http::FormPart> all{{"task", std::nullopt, "application/json", {}}};
  const std::string text = task.dump();
  all[0].body = text;
  std::vector<std::string_view> bodies{text};
  for (const auto& [name, bytes] : parts) {
    all.push_back({name, std::nullopt, "application/octet-stream", bytes});
    bodies.push_back(bytes);
  }
  const std::string b = http::new_form_boundary(bodies);
  return {http::write_form_data(all, b), "multipart/form-data; boundary=" + b};
}

HttpReply post_form(TestDaemon& d, const Form& f) {
  return d.request("POST", "/v1/tasks", f.body, false, true, {{"content-type", f.content_type}});
}

json copying_task(const std::string& id) {
  json t = task_body(id, "cat /workspace/in.bin > /workspace/out.bin; cat >> /workspace/out.bin");
  t["inputs"] = json::array({{{"path", "/workspace/in.bin"}, {"content_part", "in"}}});
  t["outputs"] = json::array({{{"path", "/workspace/out.bin"}}});
  t["stdin_part"] = "stdin";
  return t;
}

TEST(DaemonTaskMultipart, RawBytesReachTheSandboxExactly) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string bytes = hostile_bytes();
  const std::string stdin_bytes = std::string("\0\r\n--stdin", 10);
  auto r = post_form(d, form(copying_task("mp-1"), {{"in", bytes}, {"stdin", stdin_bytes}}));
  ASSERT_EQ(r.status, 202) << r.body;
  json done = wait_task(d, "mp-1");
  ASSERT_EQ(done.value("status", ""), "succeeded") << done.dump();
  auto out = d.request("GET", "/v1/tasks/mp-1/outputs/0");
  ASSERT_EQ(out.status, 200);
  EXPECT_TRUE(out.body == bytes + stdin_bytes) << "the output differs from the input bytes";
  // The stored request names the bytes by hash, never as a part name.
  EXPECT_EQ(done.dump().find("content_part"), std::string::npos) << done.dump();
}

TEST(DaemonTaskMultipart, TheSameBytesSentEitherWayAreOneTask) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string bytes = hostile_bytes();
  json as_json = task_body("mp-2", "cat /workspace/in.bin > /workspace/out.bin");
  as_json["inputs"] =
      json::array({{{"path", "/workspace/in.bin"}, {"content_b64", api::base64_encode(bytes)}}});
  as_json["outputs"] = json::array({{{"path", "/workspace/out.bin"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", as_json.dump()).status, 202);
  json as_form = as_json;
  as_form["inputs"][0].erase("content_b64");
  as_form["inputs"][0]["content_part"] = "x";
  auto again = post_form(d, form(as_form, {{"x", bytes}}));
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(http::find_header(again.headers, "corral-task-replayed").value_or(""), "true");
  // One byte different: a 409 naming the input's content.
  std::string other = bytes;
  other[7] ^= 1;
  auto conflict = post_form(d, form(as_form, {{"x", other}}));
  EXPECT_EQ(conflict.status, 409) << conflict.body;
  EXPECT_EQ(conflict.json()["error"].value("field", ""), "inputs[0].content") << conflict.body;
  json done = wait_task(d, "mp-2");
  EXPECT_EQ(done.value("attempt", 0), 1) << done.dump();
  EXPECT_EQ(d.request("GET", "/v1/tasks/mp-2/outputs/0").body == bytes, true);
}

TEST(DaemonTaskMultipart, EveryMalformedBodyIsRefusedByNameAndStoresNothing) {
  TestDaemon d({}, "serve:\n  tasks:\n    max_body: 1Mi\n");
  ASSERT_TRUE(d.ready()) << d.output();
  const json good = copying_task("mp-bad");
  const std::vector<std::pair<std::string, std::string>> parts = {{"in", "abc"}, {"stdin", ""}};
  struct Case {
    std::string what;
    Form body;
    int status;
    std::string words;
  };
  std::vector<Case> cases;
  auto with = [&](const std::function<void(json&)>& edit) {
    json t = good;
    edit(t);
    return t;
  };
  {
    Form f = form(good, parts);
    f.body = "preamble\r\n" + f.body;
    cases.push_back({"a preamble", f, 400, "does not start with its boundary"});
  }
  {
    Form f = form(good, parts);
    f.body.resize(f.body.size() / 2);
    cases.push_back({"a cut body", f, 400, "multipart body"});
  }
  {
    Form f = form(good, parts);
    f.content_type = "multipart/form-data";
    cases.push_back({"no boundary", f, 400, "without a boundary"});
  }
  {
    Form f = form(good, parts);
    const std::string from = "name=\"in\"\r\nContent-Type: application/octet-stream\r\n";
    f.body.replace(f.body.find(from), from.size(),
                   "name=\"in\"\r\nContent-Transfer-Encoding: base64\r\n");
    cases.push_back({"a transfer encoding", f, 400, "Content-Transfer-Encoding"});
  }
  {
    Form f = form(good, parts);
    const std::string from = "name=\"task\"\r\nContent-Type: application/json";
    f.body.replace(f.body.find(from), from.size(), "name=\"task\"\r\nContent-Type: text/plain");
    cases.push_back({"a task part that is not JSON", f, 400, "not application/json"});
  }
  {
    const std::string text = good.dump();  // FormPart bodies are views
    std::vector<http::FormPart> ps{{"in", std::nullopt, "", "abc"},
                                   {"task", std::nullopt, "", text}};
    const std::string b = http::new_form_boundary({"abc", text});
    cases.push_back({"the task part not first",
                     {http::write_form_data(ps, b), "multipart/form-data; boundary=" + b},
                     400,
                     "not \"task\""});
  }
  cases.push_back({"two parts of one name",
                   form(good, {{"in", "abc"}, {"stdin", ""}, {"in", "def"}}), 400,
                   "two parts are named \"in\""});
  cases.push_back({"a part nobody names", form(good, {{"in", "abc"}, {"stdin", ""}, {"spare", "z"}}),
                   400, "part \"spare\" is named by no input"});
  cases.push_back({"a name with no part", form(good, {{"in", "abc"}}), 400,
                   "no part of the body is named \"stdin\""});
  cases.push_back({"one part for two inputs",
                   form(with([](json& t) {
                          t["inputs"].push_back({{"path", "/workspace/b"}, {"content_part", "in"}});
                        }),
                        parts),
                   400, "is already the bytes of inputs[0].content_part"});
  cases.push_back({"content and content_part",
                   form(with([](json& t) { t["inputs"][0]["content"] = "x"; }), parts), 400,
                   "exactly one source"});
  cases.push_back({"stdin and stdin_part", form(with([](json& t) { t["stdin"] = "x"; }), parts),
                   400, "give one of"});
  cases.push_back({"over max_body", form(good, {{"in", std::string(1100000, 'a')}, {"stdin", ""}}),
                   413, "bytes"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = post_form(d, c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    const std::string message = r.json()["error"].value("message", "");
    EXPECT_NE(message.find(c.words), std::string::npos) << r.body;
    EXPECT_EQ(d.request("GET", "/v1/tasks/mp-bad").status, 404) << "nothing was stored";
  }
  // A JSON body cannot name parts.
  auto json_body = d.request("POST", "/v1/tasks", good.dump());
  EXPECT_EQ(json_body.status, 400) << json_body.body;
  EXPECT_NE(json_body.body.find("this body is JSON"), std::string::npos) << json_body.body;
  EXPECT_EQ(d.request("GET", "/v1/tasks/mp-bad").status, 404);
  // And the good one is accepted, over TCP too.
  const Form ok = form(good, parts);
  auto accepted = d.request("POST", "/v1/tasks", ok.body, true, true,
                            {{"content-type", ok.content_type}});
  EXPECT_EQ(accepted.status, 202) << accepted.body;
  EXPECT_EQ(wait_task(d, "mp-bad").value("status", ""), "succeeded");
}

}  // namespace
}  // namespace corral::testing
