// Failure snapshots through `corral serve` (D4, S3): a real sandbox with an
// env secret and a file secret writes their canary values into its writable
// layer in every shape it can (plain, base64, hex, split across a 64 KiB
// boundary, in /tmp and /dev/shm, as a file name, as a symlink target, a
// symlink to /run/secrets), then fails; its snapshot's decompressed bytes
// (every tar header and member) hold none of them, and nothing of
// /run/secrets. The snapshot is listed, downloaded with its sha256 (API and
// CLI), deleted, and each step is audited.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "api/base64.h"
#include "base/sha256.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/secret_file.h"
#include "support/tar_reader.h"

namespace corral::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

// The shell script a failing task runs: the canaries everywhere it can
// write them, then exit 3.
const char* kLeakScript = R"SH(
set -e
cd /workspace
printf 'api=%s\ndb=%s\n' "$API" "$(cat /run/secrets/db)" > plain.txt
printf %s "$API" | base64 > api.b64
cat /run/secrets/db | base64 > db.b64
printf %s "$API" | od -An -tx1 | tr -d ' \n' > api.hex
# 65530 bytes, then the value: it straddles the 64 KiB boundary.
head -c 65530 /dev/zero | tr '\0' x > big.bin
printf %s "$API" >> big.bin
head -c 70000 /dev/zero | tr '\0' y >> big.bin
cp /run/secrets/db copied-db
mkdir -p "dir-$API"
echo named > "dir-$API/file-$API"
ln -s "/target/$API" link-with-secret
ln -s /run/secrets/db link-to-secret-file
ln -s /run/secrets link-to-secrets-dir
printf %s "$API" > /tmp/in-tmp
printf %s "$API" > /dev/shm/in-shm
env > env-dump.txt
mkfifo a-fifo
exit 3
)SH";

TEST(SnapshotCanary, SecretsNeverReachTheSnapshot) {
  SecretFile store({"api", "db"}, "canary-", 24);
  TestDaemon d({}, store.config());
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string api = store.values["api"], db = store.values["db"];

  HttpReply reply;
  std::string id = d.create_sandbox(
      R"({"secrets": [{"name": "api", "tier": "low"}, {"name": "db", "tier": "medium"}]})", &reply);
  ASSERT_FALSE(id.empty()) << reply.body;
  json run = d.request("POST", "/v1/sandboxes/" + id + "/exec",
                       json{{"argv", {"/bin/sh", "-c", kLeakScript}}, {"timeout", 30}}.dump())
                 .json();
  ASSERT_EQ(run.value("exit_code", -1), 3) << run.dump();

  auto taken = d.request("POST", "/v1/sandboxes/" + id + "/snapshot",
                         R"({"task": "canary-task", "reason": "exit_code"})");
  ASSERT_EQ(taken.status, 201) << taken.body;
  json snap = taken.json();
  const std::string snap_id = snap.value("id", "");
  ASSERT_EQ(snap_id.rfind("snap-", 0), 0u) << taken.body;
  EXPECT_EQ(snap.value("task", ""), "canary-task");
  EXPECT_EQ(snap.value("reason", ""), "exit_code");
  EXPECT_GT(snap.value("expires_at_ms", 0LL), snap.value("created_at_ms", 0LL));
  EXPECT_EQ(snap["env_secret_names"], json({"api", "db"}));
  EXPECT_GE(snap.value("redactions", 0), 8);

  auto archive = d.request("GET", "/v1/snapshots/" + snap_id + "/archive");
  ASSERT_EQ(archive.status, 200);
  EXPECT_EQ(archive.body.size(), snap.value("size", 0ULL));
  EXPECT_EQ(sha256_hex(archive.body), snap.value("sha256", ""));
  auto header = http::find_header(archive.headers, "x-corral-sha256");
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(*header, snap.value("sha256", ""));

  // Every byte of the tar stream: headers (names, link targets, pax
  // records) and contents.
  const std::string tar = test::decompress(archive.body);
  ASSERT_GT(tar.size(), 135000u);
  for (const std::string& needle :
       {api, db, api::base64_encode(api).substr(0, 24), api::base64_encode(db).substr(0, 24),
        hex(api), api.substr(0, 16), db.substr(0, 16)})
    EXPECT_EQ(tar.find(needle), std::string::npos) << "found " << needle;

  std::map<std::string, test::TarMember> m;
  for (auto& member : test::read_tar(archive.body)) m[member.name] = member;
  ASSERT_TRUE(m.count("rootfs/workspace/plain.txt")) << "the workspace is archived";
  EXPECT_EQ(m["rootfs/workspace/plain.txt"].content, "api=[REDACTED:api]\ndb=[REDACTED:db]\n");
  EXPECT_EQ(m["rootfs/workspace/copied-db"].content, "[REDACTED:db]");
  EXPECT_EQ(m["rootfs/workspace/big.bin"].content.size(), 65530u + 14 + 70000);
  EXPECT_EQ(m["rootfs/workspace/link-to-secret-file"].type, 'l');
  EXPECT_EQ(m["rootfs/workspace/link-to-secret-file"].link, "/run/secrets/db");
  EXPECT_EQ(m["rootfs/workspace/link-with-secret"].link, "/target/[REDACTED:api]");
  EXPECT_TRUE(m.count("rootfs/workspace/dir-[REDACTED:api]/file-[REDACTED:api]"));
  EXPECT_EQ(m["rootfs/tmp/in-tmp"].content, "[REDACTED:api]");
  EXPECT_EQ(m["rootfs/dev/shm/in-shm"].content, "[REDACTED:api]");
  EXPECT_EQ(m.count("rootfs/workspace/a-fifo"), 0u);
  for (const auto& [name, member] : m)
    EXPECT_EQ(name.find("run/secrets"), std::string::npos) << name;
  json manifest = json::parse(m["corral-snapshot.json"].content, nullptr, false);
  ASSERT_TRUE(manifest.is_object()) << m["corral-snapshot.json"].content;
  EXPECT_EQ(manifest.value("task", ""), "canary-task");
  EXPECT_EQ(manifest["env_secret_names"], json({"api", "db"}));
  EXPECT_NE(manifest.dump().find("fifo"), std::string::npos);

  // The stored object's bytes on disk hold no value either (compressed or
  // not), nor does anything else the object store wrote.
  for (const auto& e : fs::recursive_directory_iterator(d.data_dir() + "/objects")) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(bytes.find(api), std::string::npos) << e.path();
    EXPECT_EQ(bytes.find(db), std::string::npos) << e.path();
  }

  auto created = d.wait_audit("snapshot.created", 1);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].value("snapshot", ""), snap_id);

  // The CLI: listed, downloaded (sha256 checked), removed.
  RunOutcome ls = run_corral({"snapshot", "ls", "--url", d.unix_url(), "--task", "canary-task"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find(snap_id), std::string::npos) << ls.out;
  std::string out_file = d.data_dir() + "/../cli-snapshot.tar.zst";
  fs::remove(out_file);
  RunOutcome get = run_corral({"snapshot", "get", "--url", d.unix_url(), snap_id, "-o", out_file});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  std::ifstream in(out_file, std::ios::binary);
  std::string downloaded((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(downloaded, archive.body);
  fs::remove(out_file);
  RunOutcome rm = run_corral({"snapshot", "rm", "--url", d.unix_url(), snap_id});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_EQ(d.request("GET", "/v1/snapshots/" + snap_id).status, 404);
  auto deleted = d.wait_audit("snapshot.deleted", 1);
  ASSERT_EQ(deleted.size(), 1u);
  EXPECT_EQ(deleted[0].value("why", ""), "api");
  EXPECT_EQ(deleted[0].value("snapshot", ""), snap_id);
  EXPECT_FALSE(fs::exists(d.data_dir() + "/objects/snapshots/" + snap_id + ".tar.zst"));
}

TEST(SnapshotApi, BadRequestsAreRefusedByName) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  EXPECT_EQ(d.request("GET", "/v1/snapshots/snap-00000000000000000000000000000000").status, 404);
  EXPECT_EQ(d.request("GET", "/v1/snapshots/../../etc/passwd").status, 404);
  EXPECT_EQ(d.request("DELETE", "/v1/snapshots/not-a-snapshot").status, 404);
  EXPECT_EQ(d.request("GET", "/v1/snapshots?limit=0").status, 400);
  EXPECT_EQ(d.request("GET", "/v1/snapshots?cursor=garbage").status, 400);
  auto empty = d.request("GET", "/v1/snapshots");
  ASSERT_EQ(empty.status, 200);
  EXPECT_EQ(empty.json()["snapshots"], json::array());
  EXPECT_EQ(d.request("POST", "/v1/sandboxes/sb-nope/snapshot", "{}").status, 404);
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  auto unknown = d.request("POST", "/v1/sandboxes/" + id + "/snapshot", R"({"why": "x"})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.json()["error"].value("field", ""), "why");
  auto bad_reason = d.request("POST", "/v1/sandboxes/" + id + "/snapshot", R"({"reason": "a b"})");
  EXPECT_EQ(bad_reason.status, 400) << bad_reason.body;
  // A snapshot with no body: reason "manual", no task.
  auto manual = d.request("POST", "/v1/sandboxes/" + id + "/snapshot", "");
  ASSERT_EQ(manual.status, 201) << manual.body;
  EXPECT_EQ(manual.json().value("reason", ""), "manual");
  EXPECT_TRUE(manual.json()["task"].is_null());
}

}  // namespace
}  // namespace corral::testing
