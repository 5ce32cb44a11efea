// A torn last line in the audit log (issue 14 item 7, X1): a daemon killed in
// the middle of a write(2) leaves part of a record after the last newline.
// The next start must not refuse the log (its sandboxes would run with no
// daemon managing them): it replaces the torn bytes with an audit.repair
// record in the chain, takes its sandboxes over again, and
// `corral audit verify` passes and lists the repair. Damage that is not a
// torn write still stops the start, and the log is left as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

const char* const kBody = R"({"limits": {"memory": "64Mi", "disk": "8Mi"}})";

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(DaemonAuditRepair, TornLastLineAfterAKillIsRepairedAndItsSandboxesAreManagedAgain) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply made;
  const std::string id = d.create_sandbox(kBody, &made);
  ASSERT_FALSE(id.empty()) << made.status << " " << made.body << "\n" << d.output();
  ASSERT_EQ(d.exec(id, "echo before").value("stdout", ""), "before\n");
  ASSERT_TRUE(d.kill9());

  // What a write(2) cut short by the kill leaves: the start of a record,
  // no newline. The words in it must not reach the repair record.
  const std::string log = d.data_dir() + "/audit.log";
  const std::string clean = read_host_file(log);
  ASSERT_FALSE(clean.empty());
  ASSERT_EQ(clean.back(), '\n');
  const std::string torn =
      R"({"argv":["sh","-c","echo torn-write-marker"],"background":false,"hash":"5be0)";
  write_file(log, clean + torn);
  // Until a daemon starts, verify reports the torn line and says what the
  // start will do about it.
  auto before = run_corral({"audit", "verify", "--log", log});
  EXPECT_EQ(before.exit_code, 1) << before.out << before.err;
  EXPECT_NE(before.err.find("truncated last line"), std::string::npos) << before.err;
  EXPECT_NE(before.err.find("audit.repair"), std::string::npos) << before.err;

  ASSERT_TRUE(d.restart()) << "the daemon refused a log with a torn last line:\n" << d.output();
  EXPECT_NE(d.output().find("audit log: removed a torn last line of " +
                            std::to_string(torn.size()) + " bytes at offset " +
                            std::to_string(clean.size())),
            std::string::npos)
      << d.output();

  // The sandbox that ran unmanaged meanwhile is taken over again, and
  // answers on both listeners.
  for (bool via_tcp : {false, true}) {
    SCOPED_TRACE(via_tcp ? "tcp" : "unix");
    auto info = d.request("GET", "/v1/sandboxes/" + id, "", via_tcp);
    EXPECT_EQ(info.status, 200) << info.body;
    EXPECT_EQ(info.json().value("state", ""), "ready") << info.body;
  }
  EXPECT_EQ(d.exec(id, "echo after").value("stdout", ""), "after\n");

  // The chain verifies and shows the repair: where, how many bytes, their
  // hash; the records of the new daemon (its re-attach) follow it.
  EXPECT_FALSE(d.wait_audit("sandbox.reattach", 1).empty());
  auto repairs = d.audit_records("audit.repair");
  ASSERT_EQ(repairs.size(), 1u);
  EXPECT_EQ(repairs[0].value("offset", 0u), clean.size());
  EXPECT_EQ(repairs[0].value("dropped_bytes", 0u), torn.size());
  EXPECT_EQ(repairs[0].dump().find("torn-write-marker"), std::string::npos)
      << "the repair record carries the removed bytes: " << repairs[0].dump();
  EXPECT_TRUE(read_host_file(log).starts_with(clean)) << "the records before it are kept";
  auto v = run_corral({"audit", "verify", "--log", log});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("chain intact"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("repaired: " + log + ": line "), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("torn last line of " + std::to_string(torn.size()) + " bytes at offset " +
                       std::to_string(clean.size())),
            std::string::npos)
      << v.out;

  // A second crash and restart later: the repair stays listed, the chain intact.
  ASSERT_TRUE(d.kill9());
  ASSERT_TRUE(d.restart()) << d.output();
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id, "", true).json().value("state", ""),
            "cleaned");
  v = run_corral({"audit", "verify", "--log", log});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("repaired: "), std::string::npos) << v.out;
}

// Only a partial last line without a newline is a torn write. A damaged
// record (ending in its newline) before the torn bytes is something else:
// the start is refused with a message that says what to do, and the log is
// not touched, so the evidence stays.
TEST(DaemonAuditRepair, DamageThatIsNotATornWriteStillStopsTheStartAndIsLeftAsItIs) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply made;
  const std::string id = d.create_sandbox(kBody, &made);
  ASSERT_FALSE(id.empty()) << made.status << " " << made.body << "\n" << d.output();
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  d.stop();
  const std::string log = d.data_dir() + "/audit.log";
  const std::string clean = read_host_file(log);
  ASSERT_GT(clean.size(), 20u);
  std::string damaged = clean;
  damaged[damaged.size() - 12] ^= 1;  // inside the last record, before its newline
  damaged += R"({"sandbox":"sb-)";
  write_file(log, damaged);

  EXPECT_FALSE(d.restart()) << "a daemon started on a log whose last record was edited";
  const std::string out = d.output();
  EXPECT_NE(out.find("the end of the log is damaged"), std::string::npos) << out;
  EXPECT_NE(out.find("edited"), std::string::npos) << out;
  EXPECT_NE(out.find("corral audit verify"), std::string::npos) << out;
  EXPECT_EQ(read_host_file(log), damaged) << "a refused log must not be cut";

  // Put back as it was, the daemon starts, with nothing to repair.
  write_file(log, clean);
  ASSERT_TRUE(d.restart()) << d.output();
  EXPECT_TRUE(d.audit_records("audit.repair").empty());
}

}  // namespace
}  // namespace corral::testing
