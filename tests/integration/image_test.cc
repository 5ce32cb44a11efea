// `corral image` end to end (F4): import of an OCI tarball made here with
// umoci from Debian's busybox-static (no registry), a sandbox on top of it,
// rm while in use, refusals of bad tarballs, the mmdebstrap build and its
// interruption. Each test has its own CORRAL_DATA_DIR (inherited by corral).
//
// The tests that need deb.debian.org are in the ImageBuildNet suite;
// ImageBuildNet.BuildRunRemove takes about a minute (set CORRAL_SKIP_SLOW=1
// to skip it, or run `ctest -E ImageBuildNet`).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using std::chrono::seconds;

std::string shq(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

// Entries of a directory (none if it does not exist).
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  std::istringstream in(host_sh("ls -A " + shq(dir) + " 2>/dev/null"));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::string mounts_under(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line, found;
  while (std::getline(in, line)) {
    if (line.find(" " + dir + "/") != std::string::npos) found += line + "\n";
  }
  return found;
}

bool have(const std::string& tool) {
  int st = 0;
  host_sh("command -v " + tool + " >/dev/null 2>&1", &st);
  return st == 0;
}

// A static busybox is all the tiny image needs.
bool have_static_busybox() {
  if (access("/bin/busybox", X_OK) != 0) return false;
  return host_sh("ldd /bin/busybox 2>&1").find("not a dynamic executable") != std::string::npos;
}

// Builds, once per test binary and kind, an OCI image layout holding
// /bin/busybox and a few applet links, and returns its tarball ("" on
// failure, with the reason in *why). The "conventional" kind also has the
// empty /dev, /proc, /sys and /tmp that most distribution images carry; the
// "scratch" kind has only /bin and /etc, like an image built FROM scratch.
enum class TinyKind { kConventional, kScratch };

std::string tiny_oci_tarball(TinyKind kind, std::string* why) {
  // Made once, removed when the test binary exits.
  static struct Cache {
    std::string tarballs[2], errors[2], dirs[2];
    bool done[2] = {false, false};
    ~Cache() {
      for (const auto& d : dirs) {
        if (!d.empty()) host_sh("rm -rf " + shq(d));
      }
    }
  } cache;
  auto& tarballs = cache.tarballs;
  auto& errors = cache.errors;
  auto& done = cache.done;
  int k = kind == TinyKind::kScratch ? 1 : 0;
  if (!done[k]) {
    done[k] = true;
    if (!have("umoci") || !have("tar")) {
      errors[k] = "umoci/tar missing (apt-get install -y umoci)";
    } else if (!have_static_busybox()) {
      errors[k] = "/bin/busybox (static) missing (apt-get install -y busybox-static)";
    } else {
      std::string dir = make_temp_dir("image-oci");
      cache.dirs[k] = dir;
      std::string dirs = k == 0 ? " bundle/rootfs/dev bundle/rootfs/proc bundle/rootfs/sys"
                                  " bundle/rootfs/tmp"
                                : "";
      std::string script =
          "set -e; cd " + shq(dir) +
          "; umoci init --layout layout"
          "; umoci new --image layout:latest"
          "; umoci unpack --image layout:latest bundle"
          "; mkdir -p bundle/rootfs/bin bundle/rootfs/etc" +
          dirs +
          "; cp /bin/busybox bundle/rootfs/bin/busybox"
          "; for a in sh cat echo ls id sleep true; do ln -s busybox bundle/rootfs/bin/$a; done"
          "; printf 'NAME=\"corral tiny\"\\nID=tiny\\n' > bundle/rootfs/etc/os-release"
          "; umoci repack --image layout:latest bundle"
          "; umoci config --image layout:latest --config.env CORRAL_IMAGE=tiny"
          "; tar -C layout -cf tiny.tar . 2>&1; echo built";
      std::string out = host_sh("( " + script + " ) 2>&1");
      if (out.find("built") == std::string::npos) {
        errors[k] = "making the OCI tarball failed: " + out;
      } else {
        tarballs[k] = dir + "/tiny.tar";
      }
    }
  }
  if (why != nullptr) *why = errors[k];
  return tarballs[k];
}

// corral running in the background, its stdout+stderr on one pipe.
struct Background {
  pid_t pid = -1;
  int out_fd = -1;
  std::string output;

  // Reads what is there for up to `wait`.
  void pump(std::chrono::milliseconds wait) {
    auto end = std::chrono::steady_clock::now() + wait;
    char buf[8192];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0 || out_fd < 0) return;
      pollfd p{out_fd, POLLIN, 0};
      int r = poll(&p, 1, static_cast<int>(left.count()));
      if (r <= 0) continue;
      ssize_t n = read(out_fd, buf, sizeof buf);
      if (n <= 0) {
        close(out_fd);
        out_fd = -1;
        return;
      }
      output.append(buf, static_cast<size_t>(n));
    }
  }
  // Waits for the exit status (128+N for a signal); -1 after `timeout`
  // (and then kills it).
  int wait(seconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      pump(std::chrono::milliseconds(200));
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        pump(std::chrono::milliseconds(200));
        if (out_fd >= 0) close(out_fd);
        out_fd = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
  }
};

Background start_corral(const std::vector<std::string>& args) {
  Background bg;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2 failed";
    return bg;
  }
  std::string bin = corral_bin();
  std::vector<std::string> storage = args;
  std::vector<char*> argv{bin.data()};
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  bg.pid = fork();
  if (bg.pid == 0) {
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    dup2(devnull, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  bg.out_fd = fds[0];
  return bg;
}

class ImageCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("CORRAL_DATA_DIR");
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    data_ = make_temp_dir("image-data");
    images_ = data_ + "/images";
    setenv("CORRAL_DATA_DIR", data_.c_str(), 1);
  }
  void TearDown() override {
    if (had_old_) {
      setenv("CORRAL_DATA_DIR", old_.c_str(), 1);
    } else {
      unsetenv("CORRAL_DATA_DIR");
    }
    if (!HasFailure() && mounts_under(data_).empty()) host_sh("rm -rf " + shq(data_));
  }

  std::string need_tiny_tarball(TinyKind kind = TinyKind::kConventional) {
    std::string why;
    std::string t = tiny_oci_tarball(kind, &why);
    return t.empty() ? why : t;
  }

  std::string data_, images_, old_;
  bool had_old_ = false;
};

#define NEED_TINY(var, ...)                         \
  std::string var = need_tiny_tarball(__VA_ARGS__); \
  if (var.empty() || var[0] != '/') {               \
    CORRAL_SKIP_OR_FAIL(var);                       \
  }

TEST_F(ImageCli, UsageErrorsExitTwo) {
  RunOutcome r = run_corral({"image"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("usage: corral image"), std::string::npos) << r.err;
  r = run_corral({"image", "build"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_corral({"image", "build", "Bad/Name"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("invalid image name"), std::string::npos) << r.err;
  r = run_corral({"image", "build", "ok", "--packages", "curl;id"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("invalid package name"), std::string::npos) << r.err;
  r = run_corral({"image", "frobnicate"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_corral({"image", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("corral image import NAME FILE"), std::string::npos) << r.out;
  EXPECT_TRUE(entries(images_).empty());
}

TEST_F(ImageCli, ImportListRunRemove) {
  NEED_TINY(tarball);
  RunOutcome r = run_corral({"image", "import", "tiny", tarball});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("image tiny imported in"), std::string::npos) << r.err;

  r = run_corral({"image", "ls"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NAME"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tiny"), std::string::npos) << r.out;

  r = run_corral({"image", "ls", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 1u) << r.out;
  EXPECT_EQ(j[0].value("name", ""), "tiny");
  EXPECT_EQ(j[0].value("rootfs", ""), images_ + "/tiny/rootfs");
  EXPECT_GT(j[0].value("size_bytes", std::uint64_t{0}), 500u * 1024) << r.out;
  EXPECT_NE(j[0].dump().find("CORRAL_IMAGE=tiny"), std::string::npos) << r.out;

  // A second import under the same name is refused, with what to do.
  r = run_corral({"image", "import", "tiny", tarball});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("corral: error: image tiny already exists"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: corral image rm tiny"), std::string::npos) << r.err;

  r = run_sandbox({"--image", "tiny"}, {"/bin/sh", "-c", "echo hi; cat /etc/os-release || true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hi\n"), std::string::npos) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_NE(r.out.find("corral tiny"), std::string::npos) << r.out;

  r = run_corral({"image", "rm", "tiny"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(entries(images_).empty());
  r = run_corral({"image", "ls", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out, nullptr, false), nlohmann::json::array()) << r.out;
  r = run_corral({"image", "rm", "tiny"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no image named tiny"), std::string::npos) << r.err;
}

// Images built FROM scratch carry no /dev, /proc, /sys or /tmp: the sandbox
// has to make its mount points itself (in the writable layer), never in
// the shared image.
TEST_F(ImageCli, RunsOnAScratchImageWithoutMountPoints) {
  NEED_TINY(tarball, TinyKind::kScratch);
  ASSERT_EQ(run_corral({"image", "import", "bare", tarball}).exit_code, 0);
  RunOutcome r = run_sandbox({"--image", "bare"}, {"/bin/sh", "-c", "echo hi; ls /dev/null"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hi\n/dev/null\n") << r.err;
  // The image itself is unchanged.
  EXPECT_NE(access((images_ + "/bare/rootfs/dev").c_str(), F_OK), 0);
  EXPECT_NE(access((images_ + "/bare/rootfs/proc").c_str(), F_OK), 0);
}

TEST_F(ImageCli, RemoveIsRefusedWhileASandboxRunsOnTheImage) {
  NEED_TINY(tarball);
  ASSERT_EQ(run_corral({"image", "import", "busy", tarball}).exit_code, 0);
  Background sandbox =
      start_corral({"run", "--image", "busy", "--", "/bin/sh", "-c", "echo started; sleep 4"});
  // Wait until the sandbox really runs.
  auto until = std::chrono::steady_clock::now() + seconds(30);
  while (sandbox.output.find("started") == std::string::npos &&
         std::chrono::steady_clock::now() < until && sandbox.out_fd >= 0) {
    sandbox.pump(std::chrono::milliseconds(100));
  }
  ASSERT_NE(sandbox.output.find("started"), std::string::npos) << sandbox.output;
  RunOutcome r = run_corral({"image", "rm", "busy"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("image busy is in use by a running sandbox"), std::string::npos) << r.err;
  EXPECT_EQ(sandbox.wait(seconds(60)), 0) << sandbox.output;
  r = run_corral({"image", "rm", "busy"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(entries(images_).empty());
}

TEST_F(ImageCli, ImportRefusesGarbageUnsafeAndDockerArchives) {
  std::string work = make_temp_dir("image-bad");
  // Garbage.
  std::string garbage = work + "/garbage.tar";
  host_sh("head -c 20000 /dev/urandom > " + shq(garbage));
  RunOutcome r = run_corral({"image", "import", "junk", garbage});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("corral: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a readable tar archive"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\nhint: "), std::string::npos) << r.err;
  EXPECT_TRUE(entries(images_).empty());

  // Members that leave the extraction directory.
  host_sh("cd " + shq(work) +
          " && printf '{\"imageLayoutVersion\":\"1.0.0\"}' > oci-layout"
          " && printf '{\"schemaVersion\":2,\"manifests\":[]}' > index.json"
          " && echo pwned > x"
          " && tar -cPf evil.tar --transform='s,^x$,../../corral-image-test-escape,' "
          "oci-layout index.json x");
  r = run_corral({"image", "import", "evil", work + "/evil.tar"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("refusing"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(".."), std::string::npos) << r.err;
  EXPECT_TRUE(entries(images_).empty());
  EXPECT_NE(access((data_ + "/corral-image-test-escape").c_str(), F_OK), 0);
  EXPECT_NE(access("/tmp/corral-image-test-escape", F_OK), 0);

  // A missing file.
  r = run_corral({"image", "import", "none", work + "/missing.tar"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(entries(images_).empty());

  // A docker-archive: refused with the skopeo command that converts it,
  // and that command's output imports.
  if (!have("skopeo")) {
    host_sh("rm -rf " + shq(work));
    CORRAL_SKIP_OR_FAIL("skopeo missing (apt-get install -y skopeo)");
  }
  NEED_TINY(tarball);
  std::string layout = work + "/layout";
  host_sh("mkdir -p " + shq(layout) + " && tar -C " + shq(layout) + " -xf " + shq(tarball));
  std::string docker = work + "/docker.tar";
  std::string out = host_sh("skopeo copy oci:" + layout + ":latest docker-archive:" + docker +
                            ":tiny:latest 2>&1");
  ASSERT_EQ(access(docker.c_str(), F_OK), 0) << out;
  r = run_corral({"image", "import", "dock", docker});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("docker-archive"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: convert it: skopeo copy docker-archive:" + docker), std::string::npos)
      << r.err;
  EXPECT_TRUE(entries(images_).empty());
  std::string converted = work + "/converted.tar";
  out = host_sh("skopeo copy docker-archive:" + docker + " oci-archive:" + converted + " 2>&1");
  ASSERT_EQ(access(converted.c_str(), F_OK), 0) << out;
  r = run_corral({"image", "import", "dock", converted});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(entries(images_), std::vector<std::string>{"dock"});
  host_sh("rm -rf " + shq(work));
}

// --- needs deb.debian.org ---------------------------------------------------

bool debian_reachable(std::string* why) {
  if (!have("mmdebstrap")) {
    *why = "mmdebstrap missing (apt-get install -y mmdebstrap)";
    return false;
  }
  int st = 0;
  host_sh("timeout 10 bash -c 'exec 3<>/dev/tcp/deb.debian.org/80' 2>/dev/null", &st);
  if (st != 0) {
    *why = "deb.debian.org:80 is not reachable";
    return false;
  }
  return true;
}

using ImageBuildNet = ImageCli;

TEST_F(ImageBuildNet, BuildRunRemove) {
  const char* skip = std::getenv("CORRAL_SKIP_SLOW");
  if (skip != nullptr && std::string_view(skip) == "1") {
    // A plain skip: asked for by whoever runs the tests (a quick local run);
    // not a host that lacks something. .ci/run never sets it.
    GTEST_SKIP() << "CORRAL_SKIP_SLOW=1: mmdebstrap build (about a minute) skipped";
  }
  std::string why;
  if (!debian_reachable(&why)) CORRAL_SKIP_OR_FAIL(why);
  RunOutcome r = run_corral({"image", "build", "deb"}, {}, seconds(900));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[build] I: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("image deb built in"), std::string::npos) << r.err;
  std::cerr << "mmdebstrap build took " << r.wall.count() / 1000.0 << " s\n";

  r = run_corral({"image", "ls", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array() && j.size() == 1) << r.out;
  EXPECT_EQ(j[0].value("source", ""), "mmdebstrap bookworm");
  std::uint64_t size = j[0].value("size_bytes", std::uint64_t{0});
  EXPECT_GT(size, 50u << 20);
  std::cerr << "image size " << size / (1024.0 * 1024.0) << " MiB\n";
  EXPECT_TRUE(mounts_under(data_).empty()) << mounts_under(data_);

  r = run_sandbox({"--image", "deb"}, {"cat", "/etc/debian_version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("12.", 0), 0u) << r.out;

  r = run_corral({"image", "rm", "deb"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(entries(images_).empty());
}

TEST_F(ImageBuildNet, InterruptedBuildLeavesNothing) {
  std::string why;
  if (!debian_reachable(&why)) CORRAL_SKIP_OR_FAIL(why);
  Background build = start_corral({"image", "build", "intr"});
  // Let mmdebstrap get going (downloading or unpacking), then Ctrl-C.
  auto until = std::chrono::steady_clock::now() + seconds(60);
  while (build.output.find("[build] I: downloading") == std::string::npos &&
         std::chrono::steady_clock::now() < until && build.out_fd >= 0) {
    build.pump(std::chrono::milliseconds(200));
  }
  build.pump(std::chrono::milliseconds(2000));
  ASSERT_EQ(kill(build.pid, SIGINT), 0);
  int code = build.wait(seconds(180));
  EXPECT_NE(code, 0) << build.output;
  EXPECT_NE(code, -1) << "corral did not stop after SIGINT:\n" << build.output;
  EXPECT_NE(build.output.find("interrupted by SIGINT"), std::string::npos) << build.output;
  EXPECT_TRUE(entries(images_).empty()) << "left behind in " << images_;
  EXPECT_TRUE(mounts_under(data_).empty()) << mounts_under(data_);
  EXPECT_EQ(host_sh("ps -eo args | grep -F " + shq(images_) + " | grep -v grep"), "");
  RunOutcome r = run_corral({"image", "ls", "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out, nullptr, false), nlohmann::json::array()) << r.out;
}

}  // namespace
}  // namespace corral::testing
