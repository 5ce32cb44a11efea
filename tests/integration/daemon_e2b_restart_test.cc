// The E2B facade across a daemon restart (issue 17): a command started
// through envd's Process/Start with a tag keeps its tag when a kill -9 and
// a new daemon re-attach it, so List still shows it and a selector by tag
// still reaches it (the tag is stored with the process, schema 10).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "http/http_client.h"
#include "support/daemon_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string envelope(const json& message) {
  const std::string text = message.dump();
  std::string out(5, '\0');
  const auto n = static_cast<std::uint32_t>(text.size());
  out[1] = static_cast<char>(n >> 24);
  out[2] = static_cast<char>(n >> 16);
  out[3] = static_cast<char>(n >> 8);
  out[4] = static_cast<char>(n);
  return out + text;
}

struct E2bSandbox {
  std::string id;
  std::string token;
};

http::Headers envd_headers(const E2bSandbox& s, const std::string& type) {
  return {{"content-type", type}, {"e2b-sandbox-id", s.id}, {"x-access-token", s.token}};
}

// Unary envd call over the unix socket; the answer's JSON ({} on failure).
json envd(TestDaemon& d, const E2bSandbox& s, const std::string& method, const json& body,
          int* status = nullptr) {
  auto r = d.request("POST", "/e2b/envd/" + method, body.dump(), false, true,
                     envd_headers(s, "application/json"));
  if (status != nullptr) *status = r.status;
  EXPECT_EQ(r.status, 200) << method << ": " << r.body;
  return r.json();
}

// The tags of the running processes Process/List shows, by pid.
std::map<std::uint32_t, std::string> listed_tags(TestDaemon& d, const E2bSandbox& s) {
  std::map<std::uint32_t, std::string> out;
  for (const auto& p :
       envd(d, s, "process.Process/List", json::object()).value("processes", json::array()))
    out[p.value("pid", 0u)] = p.value("tag", "");
  return out;
}

TEST(DaemonE2bRestart, AProcessKeepsItsTagAcrossAKill9) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  auto created = d.request("POST", "/e2b/v2/sandboxes", R"({"templateID":"base","timeout":300})",
                           false, true, {{"content-type", "application/json"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const E2bSandbox s{created.json().value("sandboxID", ""),
                     created.json().value("envdAccessToken", "")};
  ASSERT_FALSE(s.id.empty());

  // Start a long command with a tag, read its start event, and go away
  // (the process keeps running: a client that leaves does not stop it).
  std::uint32_t pid = 0;
  {
    auto endpoint = http::Endpoint::parse(d.unix_url());
    ASSERT_TRUE(endpoint);
    auto client = http::Client::connect(*endpoint, 10s);
    ASSERT_TRUE(client) << client.error().message;
    const json start{{"process", {{"cmd", "/bin/sh"}, {"args", {"-c", "sleep 120"}}}},
                     {"tag", "dev-server"}};
    auto head = client->send("POST", "/e2b/envd/process.Process/Start",
                             envd_headers(s, "application/connect+json"), envelope(start));
    ASSERT_TRUE(head) << head.error().message;
    ASSERT_EQ(head->status, 200);
    // The first envelope: 5 bytes of flags and length, then its JSON.
    std::string got;
    char buf[4096];
    auto length = [&] {
      return (std::size_t{static_cast<std::uint8_t>(got[1])} << 24) |
             (std::size_t{static_cast<std::uint8_t>(got[2])} << 16) |
             (std::size_t{static_cast<std::uint8_t>(got[3])} << 8) |
             std::size_t{static_cast<std::uint8_t>(got[4])};
    };
    while (got.size() < 5 || got.size() < 5 + length()) {
      auto n = client->read_body(buf, sizeof buf);
      ASSERT_TRUE(n && *n > 0) << "the stream ended before its start event: " << got;
      got.append(buf, *n);
    }
    const json first = json::parse(got.substr(5, length()), nullptr, false);
    pid = first["event"]["start"].value("pid", 0u);
    ASSERT_NE(pid, 0u) << got;
  }
  auto before = listed_tags(d, s);
  ASSERT_EQ(before.count(pid), 1u);
  EXPECT_EQ(before[pid], "dev-server");

  ASSERT_TRUE(d.kill9());
  ASSERT_TRUE(d.restart()) << d.output();

  // The new daemon re-attached it, with its tag.
  auto after = listed_tags(d, s);
  ASSERT_EQ(after.count(pid), 1u) << "the process is not listed after the restart: "
                                  << d.request("GET", "/v1/sandboxes/" + s.id + "/processes").body;
  EXPECT_EQ(after[pid], "dev-server");
  // A selector by tag reaches it: SIGKILL by tag, then it is gone from the list.
  envd(d, s, "process.Process/SendSignal",
       {{"process", {{"tag", "dev-server"}}}, {"signal", "SIGNAL_SIGKILL"}});
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = listed_tags(d, s).count(pid) == 0;
    if (!gone) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(gone) << "SIGKILL by tag did not end the process";
  // An unknown tag is not_found, as before the restart.
  int status = 0;
  auto r = d.request("POST", "/e2b/envd/process.Process/SendSignal",
                     json{{"process", {{"tag", "nope"}}}, {"signal", "SIGNAL_SIGKILL"}}.dump(),
                     false, true, envd_headers(s, "application/json"));
  status = r.status;
  EXPECT_EQ(status, 404) << r.body;
  EXPECT_EQ(r.json().value("code", ""), "not_found") << r.body;
  EXPECT_EQ(d.request("DELETE", "/e2b/sandboxes/" + s.id).status, 204);
}

}  // namespace
}  // namespace corral::testing
