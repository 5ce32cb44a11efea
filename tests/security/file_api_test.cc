// The file API against hostile paths (docs/api.md "Files", docs/file-api.md):
// `..`, absolute host paths, symlinks made inside the sandbox (as the last
// component and in the middle), a symlink swapped in while uploads run,
// hard links, NUL bytes and over-long names. Each attack is refused (400
// path_escape / invalid_value, or 404 where the path simply does not exist
// inside the sandbox) or lands inside the sandbox, and a canary file on the
// host is checked from the host: same content, mtime and inode, and no new
// file next to it. Also: uploads count against the disk limit, and a
// 256 MiB upload and download keep the daemon's memory flat.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

// ---- helpers -----------------------------------------------------------------

std::string url_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~' || c == '/') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

std::string code_of(const HttpReply& r) {
  json j = r.json();
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  return j["error"].value("code", "");
}

std::string describe(const HttpReply& r) {
  return "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 400);
}

// A file on the host that no attack may touch: its content, mtime, inode,
// and the names in its directory.
struct HostState {
  bool exists = false;
  ino_t ino = 0;
  off_t size = 0;
  struct timespec mtime {};
  std::string content;
  std::set<std::string> siblings;
};

std::string read_host_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> dir_names(const std::string& dir) {
  std::set<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

HostState host_state(const std::string& file) {
  HostState s;
  struct stat st;
  if (lstat(file.c_str(), &st) == 0) {
    s.exists = true;
    s.ino = st.st_ino;
    s.size = st.st_size;
    s.mtime = st.st_mtim;
    s.content = read_host_file(file);
  }
  s.siblings = dir_names(file.substr(0, file.rfind('/')));
  return s;
}

void expect_untouched(const HostState& before, const std::string& file, std::string_view when) {
  HostState after = host_state(file);
  EXPECT_TRUE(after.exists) << when << ": the host canary " << file << " is gone";
  EXPECT_EQ(after.ino, before.ino) << when << ": the host canary was replaced";
  EXPECT_EQ(after.content, before.content) << when << ": the host canary's content changed";
  EXPECT_EQ(after.size, before.size) << when;
  EXPECT_EQ(after.mtime.tv_sec, before.mtime.tv_sec) << when << ": the host canary's mtime changed";
  EXPECT_EQ(after.mtime.tv_nsec, before.mtime.tv_nsec) << when;
  std::string diff;
  for (const auto& n : after.siblings)
    if (!before.siblings.count(n)) diff += " +" + n;
  for (const auto& n : before.siblings)
    if (!after.siblings.count(n)) diff += " -" + n;
  EXPECT_TRUE(diff.empty()) << when << ": the host canary's directory changed:" << diff;
}

// A canary directory on the host with one file of known content and an
// old mtime. /var/tmp is on the host's root file system, which the
// sandbox's root mirrors (its /tmp is a mount of its own), so paths there
// also exist, or can be made, inside the sandbox without a mount crossing.
class Canary {
 public:
  explicit Canary(const std::string& parent) {
    std::string tmpl = parent + "/corral-test-canary-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp in " << parent << ": " << strerror(errno);
      return;
    }
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);
    file_ = dir_ + "/canary";
    std::ofstream(file_) << "host canary: no sandbox may change this\n";
    struct timespec times[2] = {{978307200, 0}, {978307200, 123456789}};  // 2001-01-01
    EXPECT_EQ(utimensat(AT_FDCWD, file_.c_str(), times, 0), 0) << strerror(errno);
    state_ = host_state(file_);
    EXPECT_TRUE(state_.exists);
  }
  ~Canary() {
    if (!dir_.empty()) host_sh("rm -rf '" + dir_ + "'");
  }
  const std::string& dir() const { return dir_; }
  const std::string& file() const { return file_; }
  void expect_untouched(std::string_view when) const {
    ::corral::testing::expect_untouched(state_, file_, when);
  }

 private:
  std::string dir_, file_;
  HostState state_;
};

class FileApiSecurity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new TestDaemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(daemon_->ready()) << daemon_->output();
    HttpReply r;
    id_ = daemon_->create_sandbox(R"({"limits": {"memory": "256Mi", "disk": "64Mi"}})", &r);
    ASSERT_FALSE(id_.empty()) << describe(r);
  }
  void TearDown() override {
    if (!id_.empty()) {
      HttpReply r = daemon_->request("DELETE", "/v1/sandboxes/" + id_);
      EXPECT_EQ(r.status, 200) << describe(r);
    }
  }

  TestDaemon& d() { return *daemon_; }
  std::string base() const { return "/v1/sandboxes/" + id_; }

  HttpReply get(const std::string& path) {
    return d().request("GET", base() + "/files?path=" + url_encode(path));
  }
  HttpReply put(const std::string& path, const std::string& data) {
    return d().request("PUT", base() + "/files?path=" + url_encode(path), data, false, true,
                       {{"content-type", "application/octet-stream"}});
  }
  HttpReply del(const std::string& path, bool recursive = false) {
    return d().request(
        "DELETE", base() + "/files?path=" + url_encode(path) + (recursive ? "&recursive=1" : ""));
  }
  HttpReply stat(const std::string& path) {
    return d().request("GET", base() + "/files/stat?path=" + url_encode(path));
  }
  HttpReply list(const std::string& path) {
    return d().request("GET", base() + "/files/list?path=" + url_encode(path));
  }
  HttpReply mkdir(const std::string& path, bool parents = false) {
    return d().request("POST", base() + "/files/mkdir",
                       json{{"path", path}, {"parents", parents}}.dump());
  }
  HttpReply rename(const std::string& from, const std::string& to) {
    return d().request("POST", base() + "/files/rename", json{{"from", from}, {"to", to}}.dump());
  }
  // Runs a shell command in the sandbox; expects exit 0; returns stdout.
  std::string sh(const std::string& cmd) {
    json r = d().exec(id_, cmd);
    EXPECT_EQ(r.value("exit_code", -1), 0) << cmd << " -> " << r.dump();
    return r.value("stdout", "");
  }

  static TestDaemon* daemon_;
  std::string id_;
};

TestDaemon* FileApiSecurity::daemon_ = nullptr;

// 400 path_escape, or 404 where the path does not exist inside.
void expect_refused(const HttpReply& r, std::string_view what) {
  const std::string code = code_of(r);
  EXPECT_TRUE((r.status == 400 && code == "path_escape") ||
              (r.status == 404 && code == "not_found"))
      << what << ": " << describe(r);
}

void expect_path_escape(const HttpReply& r, std::string_view what) {
  EXPECT_EQ(r.status, 400) << what << ": " << describe(r);
  EXPECT_EQ(code_of(r), "path_escape") << what << ": " << describe(r);
}

void expect_invalid(const HttpReply& r, std::string_view what) {
  EXPECT_EQ(r.status, 400) << what << ": " << describe(r);
  EXPECT_EQ(code_of(r), "invalid_value") << what << ": " << describe(r);
}

// ---- dot-dot and absolute host paths ---------------------------------------------------

TEST_F(FileApiSecurity, DotDotIsRefusedEverywhere) {
  Canary canary("/var/tmp");
  const std::string via_dots = "../../../../../../.." + canary.file();
  for (const std::string& path :
       {std::string("../../etc/passwd"), std::string("/workspace/../../.."), via_dots,
        std::string("/workspace/a/../b"), std::string("..")}) {
    SCOPED_TRACE(path);
    HttpReply g = get(path);
    expect_path_escape(g, "download");
    EXPECT_EQ(g.body.find("root:"), std::string::npos) << "a passwd file came back";
    expect_path_escape(put(path, "EVIL\n"), "upload");
    expect_path_escape(stat(path), "stat");
    expect_path_escape(list(path), "list");
    expect_path_escape(del(path, true), "delete");
    expect_path_escape(mkdir(path + "/x", true), "mkdir");
    expect_path_escape(rename("/workspace", path), "rename to");
    expect_path_escape(rename(path, "/workspace/stolen"), "rename from");
  }
  canary.expect_untouched("after the .. attacks");

  // Every refused attempt is in the audit log (X1), with its code: 5 paths,
  // 9 operations each, of this sandbox.
  std::map<std::string, int> refused;
  for (const std::string type : {"file.read", "file.write", "file.stat", "file.list", "file.delete",
                                 "file.mkdir", "file.rename"}) {
    for (const auto& rec : d().audit_records(type)) {
      if (rec.value("sandbox", "") != id_ || rec.value("outcome", "") != "refused") continue;
      EXPECT_EQ(rec.value("error", ""), "path_escape") << rec.dump();
      EXPECT_FALSE(rec.value("reason", "").empty()) << rec.dump();
      ++refused[type];
    }
  }
  EXPECT_EQ(refused["file.read"], 5);
  EXPECT_EQ(refused["file.write"], 5);
  EXPECT_EQ(refused["file.rename"], 10);
  EXPECT_EQ(refused["file.mkdir"], 5);
  EXPECT_EQ(refused["file.delete"] + refused["file.stat"] + refused["file.list"], 15);
}

TEST_F(FileApiSecurity, AbsoluteHostPathsStayInsideTheSandbox) {
  Canary in_var_tmp("/var/tmp");
  // The sandbox's /tmp is its own mount (from its writable layer), not the
  // host's /tmp: the file API crosses into it, and the host canary is simply
  // not there (404).
  Canary in_tmp("/tmp");
  for (const Canary* c : {&in_var_tmp, &in_tmp}) {
    SCOPED_TRACE(c->file());
    HttpReply g = get(c->file());
    expect_refused(g, "download of a host-only path");
    EXPECT_EQ(g.body.find("host canary"), std::string::npos) << "the host file came back";
    expect_refused(put(c->file(), "EVIL\n"), "upload to a host-only path");
    expect_refused(stat(c->file()), "stat");
    expect_refused(list(c->dir()), "list");
    expect_refused(del(c->file()), "delete");
    expect_refused(del(c->dir(), true), "recursive delete");
    expect_refused(rename(c->file(), "/workspace/stolen"), "rename from");
    expect_refused(mkdir(c->dir() + "/new"), "mkdir");
  }
  // With parents, the directories are made: inside the sandbox.
  HttpReply mk = mkdir(in_var_tmp.dir() + "/made-inside", true);
  EXPECT_EQ(mk.status, 201) << describe(mk);
  EXPECT_EQ(sh("test -d '" + in_var_tmp.dir() + "/made-inside' && echo yes"), "yes\n");
  in_var_tmp.expect_untouched("after absolute-path attacks");
  in_tmp.expect_untouched("after absolute-path attacks");
}

// ---- symlinks made inside the sandbox ---------------------------------------------------

TEST_F(FileApiSecurity, SymlinksMadeInsideNeverReachTheHost) {
  Canary canary("/var/tmp");
  const std::string& dir = canary.dir();
  const std::string rel = canary.file().substr(1);  // "var/tmp/.../canary"
  sh("ln -s '" + canary.file() +
     "' /workspace/l && ln -s ../../../../.. /workspace/up && "
     "ln -s '" +
     dir + "' /workspace/d");

  // The link as the last component: never followed.
  expect_path_escape(get("/workspace/l"), "download through a link");
  expect_path_escape(put("/workspace/l", "EVIL\n"), "upload through a link");
  expect_path_escape(list("/workspace/l"), "list through a link");
  expect_path_escape(list("/workspace/up"), "list through a link to the top");
  HttpReply st = stat("/workspace/l");
  ASSERT_EQ(st.status, 200) << describe(st);
  EXPECT_EQ(st.json().value("type", ""), "symlink") << describe(st);
  EXPECT_EQ(st.json().value("link_target", ""), canary.file()) << describe(st);

  // Links in the middle of a path resolve inside the sandbox root, where
  // the canary's directory does not exist.
  expect_refused(get("/workspace/up/" + rel), "download via ../..");
  expect_refused(put("/workspace/up/" + rel, "EVIL\n"), "upload via ../..");
  expect_refused(put("/workspace/d/canary", "EVIL\n"), "upload via a link to the host dir");
  expect_refused(get("/workspace/d/canary"), "download via a link to the host dir");
  expect_refused(stat("/workspace/up/" + rel), "stat via ../..");
  expect_refused(del("/workspace/up/" + rel), "delete via ../..");
  expect_refused(del("/workspace/d/canary"), "delete via a link to the host dir");
  expect_refused(rename("/workspace/up/" + rel, "/workspace/stolen"), "rename from via ../..");
  expect_refused(rename("/workspace/d/canary", "/workspace/stolen"),
                 "rename from via the dir link");
  expect_refused(mkdir("/workspace/d/sub"), "mkdir via the dir link");
  HttpReply vt = list("/workspace/up/var/tmp");
  ASSERT_EQ(vt.status, 200) << describe(vt);
  const json entries = vt.json()["entries"];
  EXPECT_TRUE(entries.is_array()) << describe(vt);
  for (const auto& e : entries) {
    EXPECT_NE("/var/tmp/" + e.value("name", ""), dir) << "the host's /var/tmp was listed";
  }
  canary.expect_untouched("before the directory exists inside");

  // Now the same path exists inside the sandbox too: the API reaches that
  // copy, never the host's.
  sh("mkdir -p '" + dir + "' && echo inside > '" + canary.file() + "'");
  HttpReply g = get("/workspace/up/" + rel);
  EXPECT_EQ(g.status, 200) << describe(g);
  EXPECT_EQ(g.body, "inside\n");
  EXPECT_EQ(get("/workspace/d/canary").body, "inside\n");
  EXPECT_EQ(put("/workspace/d/canary", "EVIL-D\n").status, 201);
  EXPECT_EQ(put("/workspace/up/" + rel.substr(0, rel.rfind('/')) + "/new-file", "EVIL-N\n").status,
            201);
  EXPECT_EQ(sh("cat '" + canary.file() + "'; ls '" + dir + "'"), "EVIL-D\ncanary\nnew-file\n");
  EXPECT_EQ(get(canary.file()).body, "EVIL-D\n") << "the absolute path names the sandbox's file";
  canary.expect_untouched("after writes through links into the sandbox's copy");

  // Delete and rename act on the links themselves.
  HttpReply mv = rename("/workspace/l", "/workspace/l2");
  EXPECT_EQ(mv.status, 200) << describe(mv);
  EXPECT_EQ(del("/workspace/l2").status, 200);
  EXPECT_EQ(del("/workspace/d", true).status, 200);
  EXPECT_EQ(del("/workspace/up", true).status, 200);
  EXPECT_EQ(sh("ls -A /workspace; ls '" + dir + "'"), "canary\nnew-file\n")
      << "removing a link removed its target";
  EXPECT_EQ(del("/workspace/up/" + rel).status, 404) << "the link is gone";
  canary.expect_untouched("after deleting and renaming the links");
}

// One process inside swaps /workspace/swap between a directory, a symlink
// to / and a symlink to the canary's directory while the test uploads to
// /workspace/swap/<name> many times. Whatever each upload resolves to, it
// is inside the sandbox.
TEST_F(FileApiSecurity, SymlinkSwappedDuringUploadsNeverReachesTheHost) {
  Canary canary("/var/tmp");
  const std::string name =
      "swap-" + std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr));
  ASSERT_NE(access(("/" + name).c_str(), F_OK), 0) << "/" << name << " exists on the host already";
  const std::string loop = "mkdir -p '" + canary.dir() +
                           "'; while :; do "
                           "rm -rf /workspace/swap; mkdir /workspace/swap; "
                           "rm -rf /workspace/swap; ln -s / /workspace/swap; "
                           "rm -f /workspace/swap; ln -s '" +
                           canary.dir() +
                           "' /workspace/swap; "
                           "done";
  HttpReply started =
      d().request("POST", base() + "/processes", json{{"cmd", loop}, {"timeout", 120}}.dump());
  ASSERT_EQ(started.status, 201) << describe(started);
  const std::string pid = started.json().value("id", "");
  ASSERT_FALSE(pid.empty());

  std::map<std::string, int> outcomes;
  for (int i = 0; i < 400; ++i) {
    HttpReply r = put("/workspace/swap/" + name, "EVIL " + std::to_string(i) + "\n");
    const std::string code = r.status == 201 ? "created" : code_of(r);
    ++outcomes[std::to_string(r.status) + " " + code];
    // Allowed: written inside, or refused because the tree changed under
    // the request; never a server error.
    EXPECT_TRUE(r.status == 201 || r.status == 404 || r.status == 400 || r.status == 409 ||
                r.status == 503)
        << describe(r);
  }
  HttpReply info = d().request("GET", base() + "/processes/" + pid);
  EXPECT_EQ(info.json().value("state", ""), "running")
      << "the swap loop stopped early: " << describe(info);
  HttpReply killed =
      d().request("POST", base() + "/processes/" + pid + "/signal", R"({"signal": "KILL"})");
  EXPECT_EQ(killed.status, 200) << describe(killed);
  (void)d().request("POST", base() + "/processes/" + pid + "/wait?timeout=10");

  std::string summary;
  for (const auto& [k, v] : outcomes) summary += " [" + k + "]x" + std::to_string(v);
  std::cout << "swap race outcomes:" << summary << "\n";
  EXPECT_GT(outcomes["201 created"], 0) << "no upload succeeded:" << summary;
  // Some uploads went through one of the links: they are in the sandbox's
  // own / or its own copy of the canary directory (else the race was not run).
  std::string landed = sh("for f in '/" + name + "' '" + canary.dir() + "/" + name +
                          "'; do test -f \"$f\" && echo \"$f\"; done; true");
  std::cout << "uploads through a swapped-in link landed inside at: " << landed;
  EXPECT_FALSE(landed.empty()) << "no upload went through a symlink; the race was not exercised";

  EXPECT_NE(access(("/" + name).c_str(), F_OK), 0) << "an upload reached the host's /";
  EXPECT_NE(access((canary.dir() + "/" + name).c_str(), F_OK), 0)
      << "an upload reached the host's canary directory";
  canary.expect_untouched("after the swap race");
  if (access(("/" + name).c_str(), F_OK) == 0) ::unlink(("/" + name).c_str());
}

// ---- hard links, NUL bytes, long names -----------------------------------------------------

TEST_F(FileApiSecurity, HardLinkedFilesAreRefusedForReadAndWrite) {
  sh("echo data > /workspace/h1 && ln /workspace/h1 /workspace/h2");
  expect_path_escape(get("/workspace/h1"), "download of a file with 2 links");
  expect_path_escape(get("/workspace/h2"), "download of its other name");
  expect_path_escape(put("/workspace/h2", "EVIL\n"), "upload onto a file with 2 links");
  EXPECT_EQ(sh("cat /workspace/h1"), "data\n") << "the refused upload changed the file";
  // stat is fine, and so is removing one name; then the file is readable.
  HttpReply st = stat("/workspace/h1");
  EXPECT_EQ(st.status, 200) << describe(st);
  EXPECT_EQ(del("/workspace/h2").status, 200);
  HttpReply g = get("/workspace/h1");
  EXPECT_EQ(g.status, 200) << describe(g);
  EXPECT_EQ(g.body, "data\n");
}

TEST_F(FileApiSecurity, NulBytesAndOverlongNamesAreInvalid) {
  const std::string base_path = base() + "/files?path=";
  expect_invalid(d().request("GET", base_path + "/workspace/a%00b"), "download with %00");
  expect_invalid(d().request("PUT", base_path + "/workspace/a%00b", "x", false, true,
                             {{"content-type", "application/octet-stream"}}),
                 "upload with %00");
  expect_invalid(d().request("GET", base() + "/files/stat?path=%00"), "stat of %00");
  expect_invalid(d().request("POST", base() + "/files/mkdir", R"({"path": "/workspace/a\u0000b"})"),
                 "mkdir with \\u0000");
  expect_invalid(d().request("POST", base() + "/files/rename",
                             R"({"from": "/workspace/a\u0000", "to": "/workspace/b"})"),
                 "rename with \\u0000");

  const std::string long_name = "/workspace/" + std::string(300, 'n');
  expect_invalid(get(long_name), "download of a 300-byte name");
  expect_invalid(put(long_name, "x"), "upload to a 300-byte name");
  expect_invalid(stat(long_name), "stat of a 300-byte name");
  expect_invalid(mkdir(long_name), "mkdir of a 300-byte name");
  std::string long_path = "/workspace";
  while (long_path.size() <= 4200) long_path += "/" + std::string(200, 'p');
  expect_invalid(get(long_path), "download of a 4 KiB path");
  expect_invalid(put(long_path, "x"), "upload to a 4 KiB path");
  expect_invalid(mkdir(long_path, true), "mkdir of a 4 KiB path");
  EXPECT_EQ(sh("ls -A /workspace"), "") << "something was created";
}

// What the kernel refuses is a clear 409 or 400, never a 500: a write
// into a read-only mount, a directory moved into itself.
TEST(FileApiErrors, ReadOnlyMountsAndImpossibleRenamesAreClearErrors) {
  const std::string host = make_temp_dir("ro-mount");
  host_sh("echo kept > '" + host + "/f'");
  TestDaemon d({}, "serve:\n  mount_roots: [" + host + "]\n");
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply c;
  const std::string id = d.create_sandbox(
      json{{"mounts", json::array({{{"source", host}, {"target", "/data"}, {"writable", false}}})}}
          .dump(),
      &c);
  ASSERT_FALSE(id.empty()) << describe(c);
  const std::string files = "/v1/sandboxes/" + id + "/files";
  HttpReply w = d.request("PUT", files + "?path=/data/f", "EVIL", false, true,
                          {{"content-type", "application/octet-stream"}});
  EXPECT_EQ(w.status, 409) << describe(w);
  EXPECT_NE(w.body.find("read-only"), std::string::npos) << describe(w);
  HttpReply rm = d.request("DELETE", files + "?path=/data/f");
  EXPECT_EQ(rm.status, 409) << describe(rm);
  EXPECT_EQ(host_sh("cat '" + host + "/f'"), "kept\n") << "the read-only mount was changed";

  HttpReply mk =
      d.request("POST", files + "/mkdir", R"({"path": "/workspace/d/e", "parents": true})");
  ASSERT_EQ(mk.status, 201) << describe(mk);
  HttpReply into =
      d.request("POST", files + "/rename", R"({"from": "/workspace/d", "to": "/workspace/d/e/d"})");
  EXPECT_EQ(into.status, 400) << describe(into);
  EXPECT_EQ(code_of(into), "invalid_value") << describe(into);

  // Both refusals are audited with their codes.
  auto writes = d.audit_records("file.write");
  ASSERT_FALSE(writes.empty());
  EXPECT_EQ(writes.back().value("outcome", ""), "refused") << writes.back().dump();
  EXPECT_EQ(writes.back().value("error", ""), "conflict") << writes.back().dump();
  auto renames = d.audit_records("file.rename");
  ASSERT_FALSE(renames.empty());
  EXPECT_EQ(renames.back().value("error", ""), "invalid_value") << renames.back().dump();

  d.request("DELETE", "/v1/sandboxes/" + id);
  host_sh("rm -rf '" + host + "'");
}

// The sandbox's /tmp is a mount of its own: a tree there is removed like
// one on the root file system.
TEST_F(FileApiSecurity, RecursiveDeleteWorksOnAnotherMount) {
  sh("mkdir -p /tmp/tree/a/b && echo x > /tmp/tree/a/b/f && echo y > /tmp/tree/g");
  HttpReply r = del("/tmp/tree", true);
  EXPECT_EQ(r.status, 200) << describe(r);
  EXPECT_EQ(sh("test -e /tmp/tree || echo gone"), "gone\n");
}

// A name that is not UTF-8 (the sandbox may make any bytes) is listed as
// name_b64, can be read, stat'ed and deleted by its %-encoded path, and
// every reply is valid JSON (a path echoed back shows U+FFFD for the byte).
TEST_F(FileApiSecurity, NamesThatAreNotUtf8CanBeListedReadAndDeleted) {
  sh("printf x > \"/workspace/$(printf 'a\\377b')\"");
  HttpReply l = list("/workspace");
  ASSERT_EQ(l.status, 200) << describe(l);
  auto entries = l.json().value("entries", json::array());
  ASSERT_EQ(entries.size(), 1u) << l.body;
  EXPECT_EQ(entries[0].value("name_b64", ""), "Yf9i") << l.body;  // "a\xffb"

  const std::string raw = base() + "/files?path=/workspace/a%FFb";
  HttpReply g = d().request("GET", raw);
  EXPECT_EQ(g.status, 200) << describe(g);
  EXPECT_EQ(g.body, "x");
  HttpReply st = d().request("GET", base() + "/files/stat?path=/workspace/a%FFb");
  EXPECT_EQ(st.status, 200) << describe(st);
  EXPECT_EQ(st.json().value("name_b64", ""), "Yf9i") << st.body;

  HttpReply del = d().request("DELETE", raw);
  ASSERT_EQ(del.status, 200) << describe(del);
  EXPECT_EQ(del.json().value("deleted", ""),
            "/workspace/a\xef\xbf\xbd"
            "b")
      << del.body;
  EXPECT_EQ(sh("ls -A /workspace"), "") << "the file was not deleted";
}

// ---- disk limit and memory ------------------------------------------------------------------

TEST_F(FileApiSecurity, UploadCountsAgainstTheDiskLimit) {
  HttpReply r;
  std::string small = d().create_sandbox(R"({"limits": {"memory": "128Mi", "disk": "8Mi"}})", &r);
  ASSERT_FALSE(small.empty()) << describe(r);
  const std::string files = "/v1/sandboxes/" + small + "/files?path=";
  const http::Headers octets = {{"content-type", "application/octet-stream"}};

  HttpReply big = d().request("PUT", files + "/workspace/big", std::string(16u << 20, 'b'), false,
                              true, octets);
  EXPECT_EQ(big.status, 507) << describe(big);
  EXPECT_EQ(code_of(big), "insufficient_storage") << describe(big);

  // The partial file gave its space back, and the sandbox still works.
  HttpReply st = d().request("GET", "/v1/sandboxes/" + small + "/files/stat?path=/workspace/big");
  if (st.status == 200) {
    EXPECT_EQ(st.json().value("size", -1), 0) << describe(st);
  }
  json e = d().exec(small, "echo still here");
  EXPECT_EQ(e.value("stdout", ""), "still here\n") << e.dump();
  HttpReply ok = d().request("PUT", files + "/workspace/fits", std::string(4u << 20, 'f'), false,
                             true, octets);
  EXPECT_EQ(ok.status, 201) << describe(ok);
  EXPECT_EQ(ok.json().value("bytes", std::uint64_t{0}), std::uint64_t{4} << 20) << describe(ok);

  EXPECT_EQ(d().request("DELETE", "/v1/sandboxes/" + small).status, 200);
}

// VmHWM and VmRSS of a process, in bytes (0 when unreadable).
std::pair<std::uint64_t, std::uint64_t> hwm_and_rss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  std::uint64_t hwm = 0, rss = 0;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::stoull(line.substr(6)) * 1024;
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stoull(line.substr(6)) * 1024;
  }
  return {hwm, rss};
}

// Deterministic bytes that do not compress or repeat in a page.
struct ByteStream {
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  void fill(char* buf, std::size_t n) {
    for (std::size_t i = 0; i < n; i += 8) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      std::memcpy(buf + i, &state, std::min<std::size_t>(8, n - i));
    }
  }
};

TEST(FileApiMemory, Upload256MiBAndDownloadKeepDaemonMemoryFlat) {
  TestDaemon d;  // its own daemon: a clean high-water mark
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply r;
  std::string id = d.create_sandbox(R"({"limits": {"memory": "256Mi", "disk": "320Mi"}})", &r);
  ASSERT_FALSE(id.empty()) << describe(r);
  const std::uint64_t kSize = 256ull << 20;
  const std::string target = "/v1/sandboxes/" + id + "/files?path=/workspace/big.bin";

  auto [hwm_before, rss_before] = hwm_and_rss(d.pid());
  ASSERT_GT(hwm_before, 0u);

  auto endpoint = http::Endpoint::parse(d.unix_url());
  ASSERT_TRUE(endpoint);
  auto client = http::Client::connect(*endpoint);
  ASSERT_TRUE(client) << client.error().message;
  client->set_io_timeout(std::chrono::seconds(120));

  // Upload, streamed from a generator, hashed on the way.
  Sha256 sent_hash;
  ByteStream gen;
  std::uint64_t produced = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto head = client->send_streaming(
      "PUT", target, {{"content-type", "application/octet-stream"}},
      [&](char* buf, std::size_t cap) -> Result<std::size_t> {
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(cap, kSize - produced));
        gen.fill(buf, n);
        sent_hash.update(buf, n);
        produced += n;
        return n;
      },
      kSize);
  ASSERT_TRUE(head) << head.error().message;
  auto up_body = client->read_all(1 << 20);
  ASSERT_TRUE(up_body);
  auto up_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(head->status, 201) << *up_body;
  const std::string expected_sha = Sha256::hex(sent_hash.final());
  json up = json::parse(*up_body, nullptr, false);
  EXPECT_EQ(up.value("bytes", std::uint64_t{0}), kSize) << *up_body;
  EXPECT_EQ(up.value("sha256", ""), expected_sha) << *up_body;

  // Download, hashed as it arrives.
  t0 = std::chrono::steady_clock::now();
  auto down = client->send("GET", target, {}, "");
  ASSERT_TRUE(down) << down.error().message;
  ASSERT_EQ(down->status, 200);
  Sha256 got_hash;
  std::uint64_t got = 0;
  std::vector<char> buf(1 << 20);
  for (;;) {
    auto n = client->read_body(buf.data(), buf.size());
    ASSERT_TRUE(n) << n.error().message;
    if (*n == 0) break;
    got_hash.update(buf.data(), *n);
    got += *n;
  }
  auto down_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(got, kSize);
  EXPECT_EQ(Sha256::hex(got_hash.final()), expected_sha);

  auto [hwm_after, rss_after] = hwm_and_rss(d.pid());
  std::cout << "256 MiB upload " << static_cast<int>(256 / up_s) << " MiB/s, download "
            << static_cast<int>(256 / down_s) << " MiB/s; daemon VmHWM " << (hwm_before >> 20)
            << " -> " << (hwm_after >> 20) << " MiB, VmRSS " << (rss_before >> 20) << " -> "
            << (rss_after >> 20) << " MiB\n";
  EXPECT_LT(hwm_after - hwm_before, 64ull << 20) << "the daemon's peak memory grew with the file";
  EXPECT_LT(rss_after > rss_before ? rss_after - rss_before : 0, 64ull << 20);

  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

}  // namespace
}  // namespace corral::testing
