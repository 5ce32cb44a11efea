#include "jail/host_base.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string_view>

#include "base/paths.h"
#include "base/unique_fd.h"
#include "jail/fs_util.h"

namespace corral {

namespace {

constexpr int kSkeletonVersion = 1;

// Top-level host entries that hold the system; each is either a symlink
// (merged /usr: copied as a symlink) or a directory (bound read-only).
constexpr std::string_view kSystemDirs[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64",
                                            "libx32"};

struct EmptyDir {
  std::string_view path;
  mode_t mode;
};
constexpr EmptyDir kEmptyDirs[] = {
    {"etc", 0755},      {"proc", 0555},    {"dev", 0755},       {"tmp", 01777},
    {"home", 0755},     {"root", 0700},    {"run", 0755},       {"var", 0755},
    {"var/tmp", 01777}, {"var/lib", 0755}, {"var/cache", 0755}, {"var/log", 0755},
    {"opt", 0755},      {"mnt", 0755},     {"srv", 0755},       {"workspace", 0755},
};

// Copies a file, symlink or directory tree from the host /etc, skipping
// anything not readable by everyone (shadow, private keys) and special files.
Status copy_entry(const std::string& from, const std::string& to) {
  struct stat st;
  if (lstat(from.c_str(), &st) != 0) return errno_error("lstat(" + from + ")");
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = readlink(from.c_str(), target, sizeof target - 1);
    if (n < 0) return errno_error("readlink(" + from + ")");
    target[n] = '\0';
    if (symlink(target, to.c_str()) != 0) return errno_error("symlink(" + to + ")");
    return ok();
  }
  if ((st.st_mode & S_IROTH) == 0) return ok();  // not for everyone: not for a sandbox
  if (S_ISDIR(st.st_mode)) {
    if (mkdir(to.c_str(), st.st_mode & 07777) != 0) return errno_error("mkdir(" + to + ")");
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(from.c_str()), closedir);
    if (!dir) return errno_error("opendir(" + from + ")");
    while (dirent* e = readdir(dir.get())) {
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      CORRAL_TRY(copy_entry(from + "/" + e->d_name, to + "/" + e->d_name));
    }
    return ok();
  }
  if (!S_ISREG(st.st_mode)) return ok();
  return copy_file(from, to, st.st_mode & 0777);
}

std::string host_fingerprint() {
  // Changes whenever packages are installed or certificates updated.
  std::string fp = "v" + std::to_string(kSkeletonVersion);
  for (const char* p : {"/etc/ld.so.cache", "/etc/alternatives", "/etc/ssl/certs",
                        "/etc/passwd", "/usr/lib/os-release"}) {
    struct stat st;
    if (stat(p, &st) == 0) fp += "-" + std::to_string(st.st_mtim.tv_sec);
  }
  return fp;
}

Status build_skeleton(const std::string& dir) {
  CORRAL_TRY(mkdir_p(dir + "/rootfs", 0755));
  const std::string root = dir + "/rootfs";
  for (std::string_view name : kSystemDirs) {
    std::string host = "/" + std::string(name);
    struct stat st;
    if (lstat(host.c_str(), &st) != 0) continue;
    std::string to = root + host;
    if (S_ISLNK(st.st_mode)) {
      CORRAL_TRY(copy_entry(host, to));
    } else if (S_ISDIR(st.st_mode)) {
      if (mkdir(to.c_str(), 0755) != 0) return errno_error("mkdir(" + to + ")");
    }
  }
  for (const EmptyDir& d : kEmptyDirs) {
    std::string path = root + "/" + std::string(d.path);
    if (mkdir(path.c_str(), d.mode) != 0) return errno_error("mkdir(" + path + ")");
    if (chmod(path.c_str(), d.mode) != 0) return errno_error("chmod(" + path + ")");
  }
  for (const std::string& entry : host_base_etc_entries()) {
    std::string from = "/etc/" + entry;
    if (access(from.c_str(), F_OK) != 0 && errno == ENOENT) {
      struct stat st;
      if (lstat(from.c_str(), &st) != 0) continue;  // absent on this host
    }
    CORRAL_TRY(copy_entry(from, root + "/etc/" + entry));
  }
  return ok();
}

// Takes the shared "in use" lock of a complete skeleton.
Result<UniqueFd> lock_in_use(const std::string& dir) {
  const std::string path = dir + "/in-use.lock";
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return errno_error("open(" + path + ")");
  if (flock(fd.get(), LOCK_SH) != 0) return errno_error("flock(" + path + ", LOCK_SH)");
  return fd;
}

// Old skeletons no sandbox uses any more, and partial builds of dead
// builders. Called with the base lock held.
void collect_old_skeletons(const std::string& base_dir, const std::string& current) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(base_dir.c_str()), closedir);
  if (!dir) return;
  std::vector<std::string> doomed;
  while (dirent* e = readdir(dir.get())) {
    std::string name = e->d_name;
    if (name.rfind("host-", 0) != 0) continue;
    std::string path = base_dir + "/" + name;
    if (path == current) continue;
    auto partial = name.find(".partial-");
    if (partial != std::string::npos) {
      pid_t pid = static_cast<pid_t>(atoi(name.c_str() + partial + 9));
      if (pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH)) continue;  // still building
      doomed.push_back(path);
      continue;
    }
    UniqueFd lock(open((path + "/in-use.lock").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (lock && flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a sandbox uses it
    doomed.push_back(path);
  }
  for (const std::string& path : doomed) (void)remove_tree(path);
}

}  // namespace

const std::vector<std::string>& host_base_etc_entries() {
  static const std::vector<std::string> entries = {
      "alternatives", "bash.bashrc",  "ca-certificates.conf", "debian_version", "environment",
      "gai.conf",     "host.conf",    "inputrc",              "issue",          "ld.so.cache",
      "ld.so.conf",   "ld.so.conf.d", "locale.alias",         "localtime",      "magic",
      "magic.mime",   "mime.types",   "nsswitch.conf",        "os-release",     "profile",
      "profile.d",    "protocols",    "python3",              "python3.11",     "rpc",
      "services",     "shells",       "skel",                 "ssl",            "timezone",
      "terminfo",     "xdg",
  };
  return entries;
}

Result<HostBase> ensure_host_base() {
  const std::string base_dir = data_dir() + "/base";
  CORRAL_TRY(mkdir_p(base_dir, 0755));
  const std::string dir = base_dir + "/host-" + host_fingerprint();
  HostBase base;
  base.rootfs = dir + "/rootfs";
  for (std::string_view name : kSystemDirs) {
    std::string host = "/" + std::string(name);
    struct stat st;
    if (lstat(host.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) base.bind_dirs.push_back(host);
  }
  if (access((dir + "/complete").c_str(), F_OK) == 0) {
    auto in_use = lock_in_use(dir);
    if (!in_use) return tl::unexpected(in_use.error());
    base.in_use = std::move(*in_use);
    return base;
  }

  // Build under a lock, into a temporary name, and publish with rename.
  UniqueFd lock(open((base_dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock) return errno_error("open(" + base_dir + "/.lock)");
  if (flock(lock.get(), LOCK_EX) != 0) return errno_error("flock(base lock)");
  if (access((dir + "/complete").c_str(), F_OK) != 0) {
    const std::string tmp = dir + ".partial-" + std::to_string(getpid());
    (void)remove_tree(tmp);
    (void)remove_tree(dir);
    Status built = build_skeleton(tmp);
    if (built) built = write_file(tmp + "/in-use.lock", "", 0644);
    if (built) built = write_file(tmp + "/complete", host_fingerprint() + "\n", 0644);
    if (built && rename(tmp.c_str(), dir.c_str()) != 0) built = errno_error("rename(" + dir + ")");
    if (!built) {
      (void)remove_tree(tmp);
      return tl::unexpected(built.error().wrap("building the host base in " + dir));
    }
  }
  auto in_use = lock_in_use(dir);
  if (!in_use) return tl::unexpected(in_use.error());
  base.in_use = std::move(*in_use);
  collect_old_skeletons(base_dir, dir);
  return base;
}

}  // namespace corral
