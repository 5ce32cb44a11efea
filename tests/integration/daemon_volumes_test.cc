// Named persistent volumes against a real `corral serve` and real sandboxes
// (D2, F4; docs/volumes.md): namespace isolation over both listeners,
// sub-path confinement (the class: "..", absolute, symlinks out, a symlink
// swapped while creates resolve it), read-only mounts, the quota as a hard
// limit inside the sandbox and on the host disk, data that outlives
// sandboxes and daemon restarts, and a remove that is refused while a
// sandbox uses the volume and leaves no mount, image or loop device.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "base/sha256.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"
#include "support/team_b.h"

namespace corral::testing {
namespace {

using nlohmann::json;

const char* const kKeyB = kTeamBKey;
std::string config_yaml() { return team_b_config(); }

std::string code_of(const HttpReply& r) {
  json j = r.json();
  return j.contains("error") ? j["error"].value("code", "") : "";
}
std::string field_of(const HttpReply& r) {
  json j = r.json();
  return j.contains("error") ? j["error"].value("field", "") : "";
}

bool loop_devices_usable() {
  struct stat st {};
  return ::stat("/dev/loop-control", &st) == 0;
}

std::string mountinfo() {
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string host_sh(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

class Volumes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new TestDaemon({}, config_yaml()); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    if (!loop_devices_usable()) CORRAL_SKIP_OR_FAIL("no /dev/loop-control: volumes need loop devices");
    ASSERT_TRUE(daemon_->ready()) << daemon_->output();
  }
  TestDaemon& d() { return *daemon_; }

  // As team-b over TCP.
  HttpReply as_b(const std::string& method, const std::string& target, const std::string& body = {},
                 http::Headers headers = {}) {
    headers.push_back({"authorization", std::string("Bearer ") + kKeyB});
    return d().request(method, target, body, true, false, headers);
  }
  std::string make_volume(const std::string& name, const std::string& quota = "16Mi") {
    auto r = d().request("POST", "/v1/volumes", json{{"name", name}, {"quota", quota}}.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return name;
  }
  void remove_volume(const std::string& name) { d().request("DELETE", "/v1/volumes/" + name); }
  std::string sandbox_with(const json& volumes, HttpReply* reply = nullptr) {
    return d().create_sandbox(json{{"volumes", volumes}}.dump(), reply);
  }
  json sh(const std::string& id, const std::string& cmd) { return d().exec(id, cmd); }

  static TestDaemon* daemon_;
};
TestDaemon* Volumes::daemon_ = nullptr;

TEST_F(Volumes, CreateListGetRemoveAndBadInput) {
  auto r = d().request("POST", "/v1/volumes", R"({"name":"crud","quota":"32MiB"})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json().value("quota_bytes", 0ull), 32ull << 20);
  EXPECT_EQ(r.json().value("namespace", ""), "default");
  auto list = d().request("GET", "/v1/volumes").json();
  bool listed = false;
  for (const auto& v : list["volumes"]) listed |= v.value("name", "") == "crud";
  EXPECT_TRUE(listed) << list.dump();
  EXPECT_EQ(d().request("POST", "/v1/volumes", R"({"name":"crud","quota":"16Mi"})").status, 409);
  struct Bad {
    const char* body;
    const char* field;
  } bad[] = {{R"({"name":"Upper","quota":"16Mi"})", "name"},
             {R"({"name":"../x","quota":"16Mi"})", "name"},
             {R"({"name":"small","quota":"1Mi"})", "quota"},
             {R"({"name":"huge","quota":"65Mi"})", "quota"},
             {R"({"name":"nounits","quota":"lots"})", "quota"},
             {R"({"name":"x","quota":"16Mi","extra":1})", "extra"}};
  for (const auto& b : bad) {
    auto e = d().request("POST", "/v1/volumes", b.body);
    EXPECT_EQ(e.status, 400) << b.body << " " << e.body;
    EXPECT_EQ(field_of(e), b.field) << e.body;
  }
  EXPECT_EQ(d().request("DELETE", "/v1/volumes/crud").status, 204);
  EXPECT_EQ(d().request("GET", "/v1/volumes/crud").status, 404);
}

// Key A's namespace ("default") and key B's ("team-b") never reach each
// other's volumes: 403 on every route and in a sandbox create, over TCP and
// on the unix socket acting for a namespace; B's list does not show A's.
TEST_F(Volumes, NamespacesAreIsolatedOnBothListeners) {
  make_volume("iso-a");
  auto b_made = as_b("POST", "/v1/volumes", R"({"name":"iso-b","quota":"16Mi"})");
  ASSERT_EQ(b_made.status, 201) << b_made.body;
  EXPECT_EQ(b_made.json().value("namespace", ""), "team-b");

  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/volumes/iso-a"}, {"DELETE", "/v1/volumes/iso-a"}}) {
    auto r = as_b(method, target);
    EXPECT_EQ(r.status, 403) << method << " " << r.body;
    EXPECT_EQ(code_of(r), "forbidden");
    EXPECT_EQ(r.body.find("quota"), std::string::npos) << "says more than 403: " << r.body;
  }
  EXPECT_EQ(as_b("POST", "/v1/volumes", R"({"name":"iso-a","quota":"16Mi"})").status, 403);
  auto listed = as_b("GET", "/v1/volumes").json();
  for (const auto& v : listed["volumes"]) EXPECT_NE(v.value("name", ""), "iso-a");
  HttpReply created;
  auto sb = as_b("POST", "/v1/sandboxes",
                 json{{"volumes", {{{"volume", "iso-a"}, {"target", "/data"}}}}}.dump());
  EXPECT_EQ(sb.status, 403) << sb.body;

  // A (TCP, its own key) cannot reach B's either.
  auto a_tcp = d().request("GET", "/v1/volumes/iso-b", {}, true);
  EXPECT_EQ(a_tcp.status, 403) << a_tcp.body;
  // Over TCP the header cannot switch namespaces.
  auto switched = as_b("GET", "/v1/volumes/iso-a", {}, {{"x-corral-namespace", "default"}});
  EXPECT_EQ(switched.status, 403) << switched.body;
  EXPECT_EQ(field_of(switched), "X-Corral-Namespace");
  // On the root-only socket an administrator acts for a namespace.
  auto admin_b = d().request("GET", "/v1/volumes/iso-b", {}, false, true,
                             {{"x-corral-namespace", "team-b"}});
  EXPECT_EQ(admin_b.status, 200) << admin_b.body;
  EXPECT_EQ(d().request("GET", "/v1/volumes/iso-a", {}, false, true,
                        {{"x-corral-namespace", "team-b"}}).status, 403);
  EXPECT_EQ(d().request("GET", "/v1/volumes", {}, false, true,
                        {{"x-corral-namespace", "Not/A/Name"}}).status, 400);

  EXPECT_EQ(as_b("DELETE", "/v1/volumes/iso-b").status, 204);
  remove_volume("iso-a");
}

// Every way out of a sub-path is refused with 400 naming the field; the
// sub-path given is all the sandbox sees.
TEST_F(Volumes, SubPathIsConfined) {
  make_volume("conf");
  make_volume("conf-other");
  std::string w = sandbox_with(json::array({{{"volume", "conf"}, {"target", "/v"}, {"writable", true}},
                                            {{"volume", "conf-other"}, {"target", "/o"}, {"writable", true}}}));
  ASSERT_FALSE(w.empty());
  auto made = sh(w, "mkdir -p /v/a/b && echo top > /v/top.txt && echo inner > /v/a/b/inner.txt && "
                    "echo secret > /o/other.txt && ln -s / /v/to-root && ln -s /o /v/to-other && "
                    "ln -s .. /v/a/up && ln -s b /v/a/inside-link");
  ASSERT_EQ(made.value("exit_code", -1), 0) << made.dump();
  ASSERT_EQ(d().request("DELETE", "/v1/sandboxes/" + w).status, 200);

  for (const char* sub : {"..", "/etc", "/", "a/../../x", "../conf-other", "to-root", "to-root/etc",
                          "to-other", "a/up", "a/up/a", "a/inside-link", "missing", "top.txt",
                          "a/b/inner.txt"}) {
    HttpReply r;
    std::string id =
        sandbox_with(json::array({{{"volume", "conf"}, {"subpath", sub}, {"target", "/data"}}}), &r);
    EXPECT_TRUE(id.empty()) << sub << " was accepted";
    EXPECT_EQ(r.status, 400) << sub << ": " << r.body;
    EXPECT_EQ(field_of(r), "volumes[0].subpath") << sub << ": " << r.body;
  }
  std::string id = sandbox_with(json::array({{{"volume", "conf"}, {"subpath", "a/b"}, {"target", "/data"}}}));
  ASSERT_FALSE(id.empty());
  auto seen = sh(id, "ls -A /data; cat /data/../data/inner.txt; ls /data/.. >/dev/null; test -e /data/top.txt && echo LEAK");
  EXPECT_EQ(seen.value("stdout", ""), "inner.txt\ninner\n") << seen.dump();
  d().request("DELETE", "/v1/sandboxes/" + id);
  remove_volume("conf");
  remove_volume("conf-other");
}

// A sandbox swaps a directory and a symlink to / as fast as it can while
// creates resolve that sub-path: each create either refuses it or mounts
// the real directory; none ever shows the host's root.
TEST_F(Volumes, SymlinkSwappedDuringCreatesNeverLeadsOut) {
  make_volume("swap");
  std::string w = sandbox_with(json::array({{{"volume", "swap"}, {"target", "/v"}, {"writable", true}}}));
  ASSERT_FALSE(w.empty());
  auto bg = d().request("POST", "/v1/sandboxes/" + w + "/processes",
                        json{{"cmd", "while :; do rm -rf /v/s; mkdir /v/s; touch /v/s/REAL; "
                                     "rm -rf /v/s; ln -s / /v/s; done"}}.dump());
  ASSERT_LT(bg.status, 300) << bg.body;
  int mounted = 0, refused = 0;
  for (int i = 0; i < 12; ++i) {
    HttpReply r;
    std::string id = sandbox_with(json::array({{{"volume", "swap"}, {"subpath", "s"}, {"target", "/data"}}}), &r);
    if (id.empty()) {
      // Refused at the check (a symlink, 400), or the checked directory was
      // deleted before init could attach it (ENOENT): closed either way.
      EXPECT_TRUE(r.status == 400 || r.body.find("ENOENT") != std::string::npos) << r.body;
      ++refused;
      continue;
    }
    ++mounted;
    auto seen = sh(id, "ls -A /data");
    const std::string out = seen.value("stdout", "");
    EXPECT_TRUE(out.empty() || out == "REAL\n") << "the mount showed: " << out;
    d().request("DELETE", "/v1/sandboxes/" + id);
  }
  EXPECT_EQ(mounted + refused, 12);
  d().request("DELETE", "/v1/sandboxes/" + w);
  remove_volume("swap");
}

TEST_F(Volumes, ReadOnlyUnlessAskedAndQuotaIsHard) {
  make_volume("quota", "16Mi");
  std::string ro = sandbox_with(json::array({{{"volume", "quota"}, {"target", "/data"}}}));
  ASSERT_FALSE(ro.empty());
  auto w = sh(ro, "touch /data/x");
  EXPECT_NE(w.value("exit_code", 0), 0);
  EXPECT_NE(w.value("stderr", "").find("Read-only file system"), std::string::npos) << w.dump();
  d().request("DELETE", "/v1/sandboxes/" + ro);

  std::string rw = sandbox_with(json::array({{{"volume", "quota"}, {"target", "/data"}, {"writable", true}}}));
  ASSERT_FALSE(rw.empty());
  auto fill = sh(rw, "dd if=/dev/urandom of=/data/big bs=1M count=48");
  EXPECT_NE(fill.value("exit_code", 0), 0) << fill.dump();
  EXPECT_NE(fill.value("stderr", "").find("No space left on device"), std::string::npos) << fill.dump();
  struct stat st {};
  ASSERT_EQ(::stat((d().data_dir() + "/volumes/store/quota/image.ext4").c_str(), &st), 0);
  const std::uint64_t allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
  EXPECT_LE(allocated, (16ull << 20) + (1ull << 20)) << "the host disk grew past the quota";
  EXPECT_GT(allocated, 8ull << 20) << "the writes did not reach the image";
  auto info = d().request("GET", "/v1/volumes/quota").json();
  EXPECT_LE(info.value("allocated_bytes", ~0ull), (16ull << 20) + (1ull << 20)) << info.dump();
  d().request("DELETE", "/v1/sandboxes/" + rw);
  remove_volume("quota");
}

TEST_F(Volumes, DataSurvivesSandboxesAndDaemonRestarts) {
  make_volume("keep");
  const json vol = json::array({{{"volume", "keep"}, {"target", "/data"}, {"writable", true}}});
  std::string first = sandbox_with(vol);
  ASSERT_FALSE(first.empty());
  ASSERT_EQ(sh(first, "echo persisted > /data/f").value("exit_code", -1), 0);
  d().request("DELETE", "/v1/sandboxes/" + first);
  std::string second = sandbox_with(vol);
  EXPECT_EQ(sh(second, "cat /data/f").value("stdout", ""), "persisted\n");
  d().request("DELETE", "/v1/sandboxes/" + second);

  ASSERT_TRUE(d().restart()) << d().output();
  std::string third = sandbox_with(vol);
  EXPECT_EQ(sh(third, "cat /data/f").value("stdout", ""), "persisted\n");
  // kill -9 leaves the host mount: the next daemon reuses it (one mount).
  ASSERT_TRUE(d().kill9());
  ASSERT_TRUE(d().restart()) << d().output();
  const std::string dir = d().data_dir() + "/volumes/mnt/default/keep";
  std::string info = mountinfo();
  std::size_t count = 0;
  for (std::size_t at = info.find(" " + dir + " "); at != std::string::npos;
       at = info.find(" " + dir + " ", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << info;
  EXPECT_EQ(sh(third, "cat /data/f").value("stdout", ""), "persisted\n");
  d().request("DELETE", "/v1/sandboxes/" + third);
  remove_volume("keep");
}

TEST_F(Volumes, RemoveIsRefusedWhileMountedAndLeavesNothing) {
  make_volume("gone");
  std::string id = sandbox_with(json::array({{{"volume", "gone"}, {"target", "/data"}}}));
  ASSERT_FALSE(id.empty());
  auto busy = d().request("DELETE", "/v1/volumes/gone");
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_NE(busy.body.find(id), std::string::npos) << busy.body;
  const std::string image = d().data_dir() + "/volumes/store/gone/image.ext4";
  const std::string loop = host_sh("losetup -j '" + image + "' | cut -d: -f1");
  EXPECT_FALSE(loop.empty()) << "no loop device for the image";
  ASSERT_EQ(d().request("DELETE", "/v1/sandboxes/" + id).status, 200);
  EXPECT_EQ(d().request("DELETE", "/v1/volumes/gone").status, 204);
  struct stat st {};
  EXPECT_NE(::stat(image.c_str(), &st), 0) << "the image is left";
  EXPECT_EQ(mountinfo().find(d().data_dir() + "/volumes/mnt/default/gone"), std::string::npos);
  EXPECT_EQ(host_sh("losetup -j '" + image + "'"), "") << "a loop device is left";
}

// corral volume create|ls|rm over the unix socket.
TEST_F(Volumes, CliCreateListRemove) {
  const std::string cli = "CORRAL_URL=" + d().unix_url() + " " + corral_bin() + " volume ";
  EXPECT_EQ(host_sh(cli + "create cli-vol --quota 20Mi >/dev/null; echo $?"), "0\n");
  EXPECT_NE(host_sh(cli + "ls").find("cli-vol\t"), std::string::npos);
  EXPECT_EQ(host_sh(cli + "create cli-vol --quota 20Mi 2>&1 >/dev/null | head -1"),
            "corral: error: volume \"cli-vol\" exists\n");
  EXPECT_EQ(host_sh(cli + "create cli-bad --quota 1Mi >/dev/null 2>&1; echo $?"), "1\n");
  EXPECT_EQ(host_sh(cli + "rm cli-vol; echo $?"), "cli-vol\n0\n");
  EXPECT_EQ(d().request("GET", "/v1/volumes/cli-vol").status, 404);
}

}  // namespace
}  // namespace corral::testing
