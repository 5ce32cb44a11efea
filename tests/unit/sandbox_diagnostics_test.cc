// The diagnostics' counters and document (REQUIREMENTS.md T1, issue 16
// point 4; src/daemon/sandbox_diagnostics.h) and serve.diagnostics.
#include "daemon/sandbox_diagnostics.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "daemon/daemon_config.h"

namespace corral::daemon {
namespace {

using nlohmann::json;

json dns_deny(const std::string& sandbox, const std::string& name) {
  return json{{"type", "network.dns"}, {"sandbox", sandbox}, {"name", name},
              {"outcome", "denied"},   {"decision", "deny"}, {"reason", "no rule allows " + name}};
}

TEST(DiagnosticsBook, CountsRefusalsOfOpenSandboxesOnly) {
  DiagnosticsBook book(2);
  book.open("sb-a", "team-a");
  book.observe(dns_deny("sb-a", "one.test"));
  book.observe(dns_deny("sb-a", "two.test"));
  book.observe(json{{"type", "network.connection"}, {"sandbox", "sb-a"}, {"decision", "deny"},
                    {"name", "three.test"}, {"port", 443}, {"refusal", "rate_limited"},
                    {"reason", "over the rate"}});
  // Allowed traffic, other types, unknown and malformed events: nothing.
  book.observe(json{{"type", "network.dns"}, {"sandbox", "sb-a"}, {"decision", "allow"}});
  book.observe(json{{"type", "exec.exit"}, {"sandbox", "sb-a"}});
  book.observe(dns_deny("sb-unknown", "x.test"));
  book.observe(json::array());
  book.observe(json{{"type", "network.connection"}, {"sandbox", "sb-a"}, {"decision", "deny"},
                    {"port", "not a number"}, {"name", 42}});
  book.observe(json{{"type", "secret.refused"}, {"sandbox", "sb-a"}, {"secret", "openai"},
                    {"reason", "host not allowed"}, {"via", "http"}, {"host", "evil.test:443"}});

  auto c = book.snapshot("sb-a");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->ns, "team-a");
  EXPECT_EQ(c->blocked, 4u);  // the malformed deny is still a deny
  EXPECT_EQ(c->blocked_by_reason.at("dns:denied"), 2u);
  EXPECT_EQ(c->blocked_by_reason.at("proxy:rate_limited"), 1u);
  EXPECT_EQ(c->blocked_by_reason.at("proxy:refused"), 1u);
  ASSERT_EQ(c->blocked_last.size(), 2u);  // keep_last
  EXPECT_EQ(c->blocked_last[0].host, "three.test");
  EXPECT_EQ(c->blocked_last[0].port, 443);
  EXPECT_EQ(c->secret_failures, 1u);
  EXPECT_EQ(c->secret_last.at(0).secret, "openai");
  EXPECT_FALSE(book.snapshot("sb-unknown"));

  book.process_ended("sb-a", true, SIGKILL, false);
  book.process_ended("sb-a", false, SIGXFSZ, true);
  book.process_ended("sb-a", false, std::nullopt, false);
  auto closed = book.close("sb-a");
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->process_timeouts, 1u);
  EXPECT_EQ(closed->sigxfsz_kills, 1u);
  EXPECT_EQ(closed->layer_full_at_exit, 1u);
  // Closed: later events are dropped, nothing grows.
  book.observe(dns_deny("sb-a", "late.test"));
  EXPECT_FALSE(book.snapshot("sb-a"));
}

TEST(DiagnosticsBook, LongTextIsCut) {
  DiagnosticsBook book;
  book.open("sb", "default");
  book.observe(dns_deny("sb", std::string(5000, 'a')));
  auto c = book.snapshot("sb");
  ASSERT_TRUE(c);
  EXPECT_LE(c->blocked_last.at(0).host.size(), 256u);
  EXPECT_LE(c->blocked_last.at(0).detail.size(), 256u);
}

TEST(LayerFull, LessThanAPageOrNoInodeLeft) {
  EXPECT_TRUE(layer_full(16 << 20, 16 << 20, 10, 4096));
  EXPECT_TRUE(layer_full((16 << 20) - 100, 16 << 20, 10, 4096));
  EXPECT_FALSE(layer_full((16 << 20) - 8192, 16 << 20, 10, 4096));
  EXPECT_TRUE(layer_full(0, 16 << 20, 4096, 4096));
  EXPECT_FALSE(layer_full(0, 0, 0, 0));
}

TEST(DiagnosticsJson, NamesEachSymptomAndNullsWhatWasNotRead) {
  DiagnosticsInput in;
  in.id = "sb-x";
  in.state = "cleaned";
  in.final = true;
  in.limits.memory_bytes = 64 << 20;
  CgroupStats s;
  s.oom_kills = 2;
  s.memory_peak_bytes = 60 << 20;
  s.pids_max_hits = 3;
  in.stats = s;
  CgroupLimitCounters lc;
  lc.cpu_throttled_periods = 5;
  lc.cpu_throttled_ns = 1'500'000'000;
  lc.memory_limit_hits = 7;
  in.limit_counters = lc;
  in.counters.sigxfsz_kills = 1;
  in.counters.layer_full_at_exit = 1;
  in.layer_full_now = true;  // the same fill the exit saw: not counted again
  in.destroy_reason = "max_lifetime reached";
  in.lifetime_expired = true;
  in.residue = {"writable layer still holds 4096 bytes after wipe"};
  in.residue_bytes = 4096;
  json d = diagnostics_json(in);
  EXPECT_EQ(d["oom_kills"], 2);
  EXPECT_EQ(d["memory_peak_bytes"], 60 << 20);
  EXPECT_EQ(d["memory_limit_hits"], 7);
  EXPECT_EQ(d["pids_limit_hits"], 3);
  EXPECT_EQ(d["cpu_throttled"]["periods"], 5);
  EXPECT_DOUBLE_EQ(d["cpu_throttled"]["seconds"].get<double>(), 1.5);
  EXPECT_EQ(d["disk_quota_hits"], 2);
  EXPECT_TRUE(d["timeouts"]["lifetime_expired"].get<bool>());
  EXPECT_EQ(d["residue"]["bytes"], 4096);
  EXPECT_EQ(d["residue"]["items"].size(), 1u);
  EXPECT_TRUE(d["self_check"].is_null());

  // Live, counters unreadable: null, not 0 (0 would say "no OOM kill").
  DiagnosticsInput live;
  live.id = "sb-y";
  live.layer_full_now = true;
  json l = diagnostics_json(live);
  EXPECT_TRUE(l["oom_kills"].is_null());
  EXPECT_TRUE(l["pids_limit_hits"].is_null());
  EXPECT_TRUE(l["cpu_throttled"].is_null());
  EXPECT_TRUE(l["memory_limit_hits"].is_null());
  EXPECT_TRUE(l["residue"].is_null());
  EXPECT_EQ(l["disk_quota_hits"], 1);  // full now, no process end saw it
}

TEST(DiagnosticsConfigYaml, RetentionAndKeepLast) {
  auto c = parse_daemon_config("serve:\n  diagnostics:\n    retention: 30m\n    keep_last: 5\n",
                               "test");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->diagnostics.retention, std::chrono::minutes(30));
  EXPECT_EQ(c->diagnostics.keep_last, 5u);
  auto d = parse_daemon_config("serve: {}\n", "test");
  ASSERT_TRUE(d) << d.error().to_string();
  EXPECT_EQ(d->diagnostics.retention, std::chrono::hours(24));
  EXPECT_EQ(d->diagnostics.keep_last, 20u);
  for (const char* bad : {"serve:\n  diagnostics:\n    retention: 10ms\n",
                          "serve:\n  diagnostics:\n    keep_last: 5000\n",
                          "serve:\n  diagnostics:\n    keep: 1h\n",
                          "serve:\n  diagnostics: 3\n"}) {
    auto r = parse_daemon_config(bad, "test");
    EXPECT_FALSE(r) << bad;
  }
  auto typo = parse_daemon_config("serve:\n  diagnostics:\n    keep: 1h\n", "test");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().to_string().find("retention"), std::string::npos)
      << typo.error().to_string();
}

}  // namespace
}  // namespace corral::daemon
