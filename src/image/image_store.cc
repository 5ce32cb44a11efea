#include "image/image_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "base/fs.h"
#include "base/json_text.h"
#include "base/paths.h"
#include "base/scope_guard.h"
#include "base/subprocess.h"

namespace corral {

namespace {

using json = nlohmann::json;

constexpr std::string_view kPartialPrefix = ".partial-";
constexpr std::string_view kRemovingPrefix = ".removing-";
constexpr const char* kSuite = "bookworm";
constexpr int kMaxDepth = 4096;

std::string join_path(std::string_view a, std::string_view b) {
  std::string p(a);
  if (p.empty() || p.back() != '/') p.push_back('/');
  p.append(b);
  return p;
}

std::string dq(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string rfc3339_now() {
  time_t now = time(nullptr);
  struct tm tm_utc {};
  gmtime_r(&now, &tm_utc);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  return buf;
}

// ---------------------------------------------------------------------------
// Running a tool (base/subprocess.h) in its own process group, stdin from
// /dev/null, output lines streamed to a callback. While a build or import
// runs, SIGINT/SIGTERM/SIGHUP are forwarded to the tool's process group;
// the operation then fails and removes its partial tree instead of dying
// half-way.

Status check_interrupted(const ForwardedSignals& signals, std::string_view what) {
  int sig = signals.pending();
  if (sig == 0) return ok();
  const char* name = sigabbrev_np(sig);
  return make_error(ErrorCode::kSystem, std::string(what) + " interrupted by SIG" +
                                            (name != nullptr ? name : "?") +
                                            "; the partial image was removed");
}

struct RunOptions {
  std::string cwd;              // empty: inherit
  bool capture_stdout = false;  // else stdout joins the line stream
  std::size_t stdout_limit = 64u << 20;
  const ForwardedSignals* signals = nullptr;  // forward signals to the tool
  int inherit_fd = -1;                        // an fd the tool and its descendants keep open
};

struct ToolResult {
  int wait_status = 0;
  std::string out;               // stdout when captured
  std::deque<std::string> tail;  // last lines of the stream
  bool ok() const { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }
  // The line that says best what went wrong: mmdebstrap's last "E:" line,
  // else the first line that is not tar's closing "Exiting with failure".
  std::string error_line() const {
    for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
      if (it->rfind("E: ", 0) == 0) return *it;
    }
    for (const auto& l : tail) {
      if (l.find("Exiting with failure status") == std::string::npos) return l;
    }
    return tail.empty() ? std::string() : tail.back();
  }
};

class LineSplitter {
 public:
  explicit LineSplitter(const ProgressFn& progress, std::deque<std::string>& tail)
      : progress_(progress), tail_(tail) {}
  void feed(const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      char c = data[i];
      if (c == '\n' || c == '\r') {
        flush();
      } else if (partial_.size() < 4096) {
        partial_.push_back(c);
      }
    }
  }
  void flush() {
    if (partial_.empty()) return;
    if (progress_) progress_(partial_);
    tail_.push_back(partial_);
    if (tail_.size() > 20) tail_.pop_front();
    partial_.clear();
  }

 private:
  const ProgressFn& progress_;
  std::deque<std::string>& tail_;
  std::string partial_;
};

std::string install_hint(const std::string& tool) {
  if (tool == "tar") return "install GNU tar: apt-get install -y tar";
  return "install it: apt-get install -y " + tool;
}

Result<ToolResult> run_tool(const std::vector<std::string>& args, const ProgressFn& progress,
                            const RunOptions& opts) {
  if (args.empty()) return make_error(ErrorCode::kInternal, "run_tool: empty argv");
  // Looked up in PATH here, so that the child only has to call execve.
  auto exe = find_program(args[0]);
  if (!exe) {
    return errno_error("exec " + args[0] + " (not found in PATH)", ENOENT, install_hint(args[0]));
  }
  if (opts.signals != nullptr) CORRAL_TRY(check_interrupted(*opts.signals, args[0]));

  ToolResult result;
  LineSplitter lines(progress, result.tail);
  SubprocessOptions sub;
  sub.argv = args;
  sub.program = *exe;
  sub.cwd = opts.cwd;
  sub.on_stderr = [&](std::string_view chunk) { lines.feed(chunk.data(), chunk.size()); };
  sub.merge_stdout = !opts.capture_stdout;
  sub.output_limit = opts.stdout_limit;
  sub.death_signal = SIGTERM;  // mmdebstrap cleans up its mounts on SIGTERM
  sub.new_process_group = true;
  sub.forward_signals = opts.signals;
  sub.keep_fd = opts.inherit_fd;
  sub.exec_hint = [&](int err) { return err == ENOENT ? install_hint(args[0]) : std::string(); };
  auto run = run_subprocess(sub);
  lines.flush();
  if (!run) return tl::unexpected(run.error());
  result.wait_status = run->wait_status;
  result.out = std::move(run->out);
  return result;
}

Status tool_failed(const std::vector<std::string>& args, const ToolResult& r,
                   std::string hint = {}) {
  std::string msg = args[0] + " failed (" + describe_wait_status(r.wait_status) + ")";
  std::string detail = r.error_line();
  if (!detail.empty()) msg += ": " + detail;
  return make_error(ErrorCode::kSystem, std::move(msg), std::move(hint));
}

// ---------------------------------------------------------------------------
// File system helpers. Everything below works relative to directory fds,
// never follows symlinks and never crosses into another mount.

Result<UniqueFd> open_dir(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_error("open(" + path + ")");
  return UniqueFd(fd);
}

Result<UniqueFd> open_dir_at(int dirfd, const std::string& name, const std::string& shown) {
  int fd = openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_error("open(" + shown + ")");
  return UniqueFd(fd);
}

// Visits every entry under `dirfd` (not the directory itself) without
// following symlinks or entering other mounts.
using VisitFn = std::function<Status(const std::string& rel, const FileStat& st)>;

Status walk_at(int dirfd, const FileStat& dir_st, const std::string& rel, const std::string& shown,
               const VisitFn& visit, int depth) {
  if (depth > kMaxDepth) {
    return make_error(ErrorCode::kResourceExhausted,
                      "tree deeper than " + std::to_string(kMaxDepth) + ": " + shown);
  }
  auto names = read_dir_names(dirfd, shown);
  if (!names) return tl::unexpected(names.error());
  for (const auto& name : *names) {
    std::string child_rel = rel.empty() ? name : rel + "/" + name;
    std::string child_shown = join_path(shown, name);
    FileStat st;
    if (stat_at(dirfd, name.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return errno_error("statx(" + child_shown + ")");
    }
    CORRAL_TRY(visit(child_rel, st));
    if (!st.is_dir() || crosses_mount(dir_st, st)) continue;
    auto sub = open_dir_at(dirfd, name, child_shown);
    if (!sub) return tl::unexpected(sub.error());
    CORRAL_TRY(walk_at(sub->get(), st, child_rel, child_shown, visit, depth + 1));
  }
  return ok();
}

Status walk(const std::string& path, const VisitFn& visit) {
  auto dir = open_dir(path);
  if (!dir) return tl::unexpected(dir.error());
  FileStat st;
  if (stat_at(dir->get(), "", &st) != 0) return errno_error("statx(" + path + ")");
  return walk_at(dir->get(), st, "", path, visit, 0);
}

// Allocated size of a tree: st_blocks * 512, hard-linked files once.
Result<std::uint64_t> tree_size(const std::string& path) {
  std::uint64_t total = 0;
  auto root = open_dir(path);
  if (!root) return tl::unexpected(root.error());
  FileStat root_st;
  if (stat_at(root->get(), "", &root_st) != 0) return errno_error("statx(" + path + ")");
  total += root_st.stx.stx_blocks * 512;
  std::unordered_set<std::uint64_t> seen_inodes;
  Status r = walk(path, [&](const std::string&, const FileStat& st) -> Status {
    if (!st.is_dir() && st.stx.stx_nlink > 1 && !seen_inodes.insert(st.stx.stx_ino).second) {
      return ok();
    }
    total += st.stx.stx_blocks * 512;
    return ok();
  });
  if (!r) return tl::unexpected(r.error());
  return total;
}

// Mount points at or below `path` according to /proc/self/mountinfo,
// deepest first. Fields are octal-escaped (\040 for a space).
std::vector<std::string> mounts_under(const std::string& path) {
  std::vector<std::string> found;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mount_point;
    if (!(fields >> id >> parent >> devno >> root >> mount_point)) continue;
    std::string mp;
    for (size_t i = 0; i < mount_point.size(); ++i) {
      if (mount_point[i] == '\\' && i + 3 < mount_point.size() &&
          std::isdigit(static_cast<unsigned char>(mount_point[i + 1]))) {
        mp.push_back(
            static_cast<char>(std::strtol(mount_point.substr(i + 1, 3).c_str(), nullptr, 8)));
        i += 3;
      } else {
        mp.push_back(mount_point[i]);
      }
    }
    if (mp == path || mp.rfind(path + "/", 0) == 0) found.push_back(mp);
  }
  std::sort(found.begin(), found.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return found;
}

// A tool killed half-way (mmdebstrap mounts /proc, /sys and /dev in its
// target) can leave mounts inside a partial tree: detach them before the
// tree is deleted. Only ever called on corral's own partial trees.
void detach_mounts_under(const std::string& path) {
  char real[PATH_MAX];
  if (realpath(path.c_str(), real) == nullptr) return;
  for (const auto& mp : mounts_under(real)) {
    umount2(mp.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  }
}

// ".partial-<name>-<pid>" / ".removing-<name>-<pid>" -> pid, or 0.
pid_t owner_pid(std::string_view entry) {
  if (entry.rfind(kPartialPrefix, 0) != 0 && entry.rfind(kRemovingPrefix, 0) != 0) return 0;
  size_t dash = entry.rfind('-');
  if (dash == std::string_view::npos || dash + 1 >= entry.size()) return 0;
  long pid = 0;
  for (char c : entry.substr(dash + 1)) {
    if (c < '0' || c > '9') return 0;
    pid = pid * 10 + (c - '0');
    if (pid > INT_MAX) return 0;
  }
  return static_cast<pid_t>(pid);
}

bool process_alive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// A build or import in progress: <images>/.partial-<name>-<pid>. Removed
// on destruction unless committed. Its .building file is flock()ed by us and
// inherited by the tools we run, so a partial tree counts as stale only when
// its owner is gone *and* no tool it started is still writing into it (a
// SIGKILLed corral can leave mmdebstrap running for a while).
constexpr const char* kBuildingFile = ".building";

class PartialDir {
 public:
  PartialDir(const std::string& images_dir, int images_fd, std::string_view name)
      : images_dir_(images_dir), images_fd_(images_fd), name_(name) {
    entry_ = std::string(kPartialPrefix) + std::string(name) + "-" + std::to_string(getpid());
    path_ = join_path(images_dir_, entry_);
  }
  ~PartialDir() {
    if (created_ && !done_) (void)discard();
  }
  PartialDir(const PartialDir&) = delete;
  PartialDir& operator=(const PartialDir&) = delete;

  Status create() {
    // A leftover of ours (same pid, earlier call in this process) goes first.
    CORRAL_TRY(remove_tree_at(images_fd_, entry_, path_));
    // 0755 so that apt inside mmdebstrap can drop to its _apt user.
    if (mkdirat(images_fd_, entry_.c_str(), 0755) != 0) return errno_error("mkdir(" + path_ + ")");
    created_ = true;
    auto fd = open_dir_at(images_fd_, entry_, path_);
    if (!fd) return tl::unexpected(fd.error());
    fd_ = std::move(*fd);
    int lock = openat(fd_.get(), kBuildingFile,
                      O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (lock < 0) return errno_error("create(" + path(kBuildingFile) + ")");
    lock_.reset(lock);
    if (flock(lock_.get(), LOCK_EX) != 0) return errno_error("flock(" + path(kBuildingFile) + ")");
    return ok();
  }
  // Passed to the tools as RunOptions::inherit_fd.
  int lock_fd() const { return lock_.get(); }
  const std::string& path() const { return path_; }
  std::string path(std::string_view sub) const { return join_path(path_, sub); }
  int fd() const { return fd_.get(); }

  Status discard() {
    done_ = true;
    fd_.reset();
    lock_.reset();
    detach_mounts_under(path_);
    return remove_tree_at(images_fd_, entry_, path_);
  }

  // Writes image.json and .lock, then renames the tree to <images>/<name>.
  Status commit(const ImageInfo& info) {
    json j = {{"name", info.name},       {"source", info.source},
              {"created", info.created}, {"size_bytes", info.size_bytes},
              {"env", info.env},         {"workdir", info.workdir}};
    std::string text = json_text(j, 2) + "\n";
    CORRAL_TRY(write_file("image.json", text, 0644));
    CORRAL_TRY(write_file(".lock", "", 0644));
    if (unlinkat(fd_.get(), kBuildingFile, 0) != 0) {
      return errno_error("unlink(" + path(kBuildingFile) + ")");
    }
    if (fchmod(fd_.get(), 0755) != 0) return errno_error("chmod(" + path_ + ")");
    if (fsync(fd_.get()) != 0) return errno_error("fsync(" + path_ + ")");
    if (renameat2(images_fd_, entry_.c_str(), images_fd_, name_.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST || errno == ENOTEMPTY) {
        return make_error(ErrorCode::kAlreadyExists,
                          "image " + name_ + " was created by another process meanwhile",
                          "corral image rm " + name_ + " first");
      }
      return errno_error("rename(" + path_ + " -> " + join_path(images_dir_, name_) + ")");
    }
    done_ = true;
    fsync(images_fd_);
    return ok();
  }

 private:
  Status write_file(const char* name, const std::string& text, mode_t mode) {
    std::string shown = path(name);
    int fd = openat(fd_.get(), name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) return errno_error("create(" + shown + ")");
    UniqueFd f(fd);
    CORRAL_TRY(write_all(f.get(), text, shown));
    if (fsync(f.get()) != 0) return errno_error("fsync(" + shown + ")");
    return ok();
  }

  std::string images_dir_;
  int images_fd_;
  std::string name_;
  std::string entry_;
  std::string path_;
  UniqueFd fd_;
  UniqueFd lock_;
  bool created_ = false;
  bool done_ = false;
};

Result<json> read_json_file(int dirfd, const std::string& name, const std::string& shown,
                            size_t limit = 16u << 20) {
  int fd = openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_error("open(" + shown + ")");
  UniqueFd f(fd);
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = read(f.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read(" + shown + ")");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > limit) {
      return make_error(ErrorCode::kInvalidArgument,
                        shown + " is larger than " + std::to_string(limit) + " bytes");
    }
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return make_error(ErrorCode::kInvalidArgument, shown + " is not valid JSON");
  }
  return j;
}

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string string_member(const json& j, const char* key) {
  const json* v = member(j, key);
  return (v != nullptr && v->is_string()) ? v->get<std::string>() : std::string();
}

std::vector<std::string> string_list_member(const json& j, const char* key) {
  std::vector<std::string> out;
  const json* v = member(j, key);
  if (v == nullptr || !v->is_array()) return out;
  for (const auto& e : *v) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

// OCI tags as umoci accepts them in --image LAYOUT:TAG.
bool valid_tag(std::string_view tag) {
  if (tag.empty() || tag.size() > 128) return false;
  for (size_t i = 0; i < tag.size(); ++i) {
    char c = tag[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum || c == '_') continue;
    if (i > 0 && (c == '.' || c == '-')) continue;
    return false;
  }
  return true;
}

Status replace_file(int dirfd, const std::string& name, const std::string& text,
                    const std::string& shown) {
  std::string tmp = name + ".tmp";
  int fd = openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("create(" + shown + ".tmp)");
  UniqueFd f(fd);
  CORRAL_TRY(write_all(f.get(), text, shown + ".tmp"));
  if (renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    return errno_error("rename(" + shown + ".tmp)");
  }
  return ok();
}

constexpr const char* kRefNameAnnotation = "org.opencontainers.image.ref.name";

// "sha256:<hex>" -> "blobs/sha256/<hex>", or "" if it is not that shape.
std::string blob_path(const std::string& digest) {
  size_t colon = digest.find(':');
  if (colon == std::string::npos || colon == 0 || digest.size() - colon - 1 < 32 ||
      digest.size() - colon - 1 > 128) {
    return "";
  }
  for (size_t i = 0; i < digest.size(); ++i) {
    char c = digest[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (i != colon && !ok) return "";
  }
  return "blobs/" + digest.substr(0, colon) + "/" + digest.substr(colon + 1);
}

// The "config" object (Env, WorkingDir, ...) of the image `tag` names in
// the extracted layout.
Result<json> oci_image_config(int layout_fd, const json& index, const std::string& tag) {
  const json* manifests = member(index, "manifests");
  if (manifests == nullptr || !manifests->is_array()) {
    return make_error(ErrorCode::kInvalidArgument, "index.json has no manifests");
  }
  std::string manifest_digest;
  for (const auto& desc : *manifests) {
    const json* ann = member(desc, "annotations");
    if (ann != nullptr && string_member(*ann, kRefNameAnnotation) == tag) {
      manifest_digest = string_member(desc, "digest");
    }
  }
  std::string path = blob_path(manifest_digest);
  if (path.empty()) return make_error(ErrorCode::kInvalidArgument, "no manifest for " + tag);
  auto manifest = read_json_file(layout_fd, path, path);
  if (!manifest) return manifest;
  const json* config_desc = member(*manifest, "config");
  path = config_desc != nullptr ? blob_path(string_member(*config_desc, "digest")) : "";
  if (path.empty()) return make_error(ErrorCode::kInvalidArgument, "manifest has no config");
  auto config = read_json_file(layout_fd, path, path);
  if (!config) return config;
  const json* inner = member(*config, "config");
  if (inner == nullptr || !inner->is_object()) return json::object();
  return *inner;
}

std::string convert_hint() {
  return "an OCI image tarball is made with `skopeo copy SOURCE oci-archive:IMAGE.tar:latest` "
         "or, from an OCI layout directory, `tar -C LAYOUT -cf IMAGE.tar .` (docs/images.md)";
}

}  // namespace

// ---------------------------------------------------------------------------

ImageStore::ImageStore(std::string images_dir) : dir_(std::move(images_dir)) {
  if (!dir_.empty() && dir_[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) != nullptr) dir_ = join_path(cwd, dir_);
  }
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

std::string ImageStore::default_dir() { return join_path(data_dir(), "images"); }

Status ImageStore::validate_name(std::string_view name) {
  auto bad = [&](std::string why) {
    return make_error(ErrorCode::kInvalidArgument, "invalid image name " + dq(name) + ": " + why,
                      "use 1-63 characters from a-z 0-9 . _ - starting with a letter or digit");
  };
  if (name.empty()) return bad("empty");
  if (name.size() > 63) return bad("longer than 63 characters");
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(name[0])) return bad("must start with a-z or 0-9");
  for (char c : name) {
    if (!lower_alnum(c) && c != '.' && c != '_' && c != '-') {
      return bad("character " + dq(std::string(1, c)) + " is not allowed");
    }
  }
  return ok();
}

Status ImageStore::validate_package(std::string_view pkg) {
  auto bad = [&](std::string why) {
    return make_error(ErrorCode::kInvalidArgument, "invalid package name " + dq(pkg) + ": " + why,
                      "Debian package names use a-z 0-9 + . - and start with a letter or digit");
  };
  if (pkg.empty()) return bad("empty");
  if (pkg.size() > 100) return bad("longer than 100 characters");
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(pkg[0])) return bad("must start with a-z or 0-9");
  for (char c : pkg) {
    if (!lower_alnum(c) && c != '+' && c != '.' && c != '-') {
      return bad("character " + dq(std::string(1, c)) + " is not allowed");
    }
  }
  return ok();
}

Result<ImageInfo> ImageStore::get(std::string_view name) const {
  CORRAL_TRY(validate_name(name));
  std::string n(name);
  std::string image_dir = join_path(dir_, n);
  auto not_found = [&] {
    return make_error(ErrorCode::kNotFound, "no image named " + n + " in " + dir_,
                      "corral image ls lists images; corral image build " + n + " makes one");
  };
  auto dfd = open_dir(dir_);
  if (!dfd) {
    if (dfd.error().sys_errno == ENOENT) return not_found();
    return tl::unexpected(dfd.error());
  }
  auto ifd = open_dir_at(dfd->get(), n, image_dir);
  if (!ifd) {
    if (ifd.error().sys_errno == ENOENT) return not_found();
    return tl::unexpected(ifd.error());
  }
  ImageInfo info;
  info.name = n;
  info.rootfs = join_path(image_dir, "rootfs");
  auto j = read_json_file(ifd->get(), "image.json", join_path(image_dir, "image.json"));
  if (!j) return tl::unexpected(j.error().wrap("reading image " + n));
  info.source = string_member(*j, "source");
  info.created = string_member(*j, "created");
  info.env = string_list_member(*j, "env");
  info.workdir = string_member(*j, "workdir");
  const json* size = member(*j, "size_bytes");
  if (size != nullptr && size->is_number_unsigned()) info.size_bytes = size->get<std::uint64_t>();
  FileStat st;
  if (stat_at(ifd->get(), "rootfs", &st) != 0 || !st.is_dir()) {
    return make_error(ErrorCode::kNotFound, "image " + n + " has no rootfs directory",
                      "remove it with corral image rm " + n + " and build it again");
  }
  return info;
}

Result<std::vector<ImageInfo>> ImageStore::list() const {
  std::vector<ImageInfo> images;
  auto dfd = open_dir(dir_);
  if (!dfd) {
    if (dfd.error().sys_errno == ENOENT) return images;
    return tl::unexpected(dfd.error());
  }
  (void)remove_stale();  // best effort: a failure here must not hide the list
  auto names = read_dir_names(dfd->get(), dir_);
  if (!names) return tl::unexpected(names.error());
  std::sort(names->begin(), names->end());
  for (const auto& n : *names) {
    if (!validate_name(n)) continue;  // dot entries and foreign files
    auto info = get(n);
    struct stat st {};
    if (info) {
      images.push_back(std::move(*info));
    } else if (fstatat(dfd->get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      // Listed anyway (it did not vanish meanwhile) so that the user can
      // see it and remove it.
      ImageInfo broken;
      broken.name = n;
      broken.rootfs = join_path(join_path(dir_, n), "rootfs");
      broken.source = "(broken: " + info.error().message + ")";
      images.push_back(std::move(broken));
    }
  }
  return images;
}

Status ImageStore::remove_stale() const {
  auto dfd = open_dir(dir_);
  if (!dfd) {
    if (dfd.error().sys_errno == ENOENT) return ok();
    return tl::unexpected(dfd.error());
  }
  auto names = read_dir_names(dfd->get(), dir_);
  if (!names) return tl::unexpected(names.error());
  Status first_error = ok();
  for (const auto& entry : *names) {
    pid_t pid = owner_pid(entry);
    if (pid <= 0 || process_alive(pid)) continue;
    std::string path = join_path(dir_, entry);
    // Held while we remove it, so that two cleaners do not race.
    UniqueFd building(openat(dfd->get(), (entry + "/" + kBuildingFile).c_str(),
                             O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (building.valid() && flock(building.get(), LOCK_EX | LOCK_NB) != 0) {
      continue;  // a tool of that build is still running
    }
    detach_mounts_under(path);
    Status r = remove_tree_at(dfd->get(), entry, path);
    if (!r && first_error) first_error = tl::unexpected(r.error().wrap("removing stale " + path));
  }
  return first_error;
}

Result<UniqueFd> ImageStore::lock_shared(std::string_view name) const {
  CORRAL_TRY(validate_name(name));
  std::string n(name);
  auto not_found = [&] {
    return make_error(ErrorCode::kNotFound, "no image named " + n + " in " + dir_,
                      "corral image ls lists images; corral image build " + n + " makes one");
  };
  auto dfd = open_dir(dir_);
  if (!dfd) return dfd.error().sys_errno == ENOENT ? not_found() : tl::unexpected(dfd.error());
  std::string rel = n + "/.lock";
  std::string shown = join_path(dir_, rel);
  // O_NOFOLLOW covers the last component; the image directory itself is
  // checked below (fstatat of the same path must give the same inode).
  int fd = openat(dfd->get(), rel.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? not_found() : errno_error("open(" + shown + ")");
  UniqueFd lock(fd);
  while (flock(lock.get(), LOCK_SH | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) {
      return make_error(ErrorCode::kUnavailable, "image " + n + " is being removed",
                        "build or import it again, or choose another image");
    }
    return errno_error("flock(" + shown + ", LOCK_SH)");
  }
  // remove() renames the image away while holding LOCK_EX: if that
  // happened between our open and our flock, the path no longer leads here.
  struct stat held {
  }, now{};
  if (fstat(lock.get(), &held) != 0) return errno_error("fstat(" + shown + ")");
  FileStat image_dir_st;
  if (fstatat(dfd->get(), rel.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 ||
      held.st_dev != now.st_dev || held.st_ino != now.st_ino ||
      stat_at(dfd->get(), n.c_str(), &image_dir_st) != 0 || !image_dir_st.is_dir()) {
    return not_found();
  }
  return lock;
}

Status ImageStore::remove(std::string_view name) {
  CORRAL_TRY(validate_name(name));
  std::string n(name);
  std::string image_dir = join_path(dir_, n);
  auto not_found = [&] {
    return make_error(ErrorCode::kNotFound, "no image named " + n + " in " + dir_,
                      "corral image ls lists images");
  };
  auto dfd = open_dir(dir_);
  if (!dfd) return dfd.error().sys_errno == ENOENT ? not_found() : tl::unexpected(dfd.error());
  auto ifd = open_dir_at(dfd->get(), n, image_dir);
  if (!ifd) return ifd.error().sys_errno == ENOENT ? not_found() : tl::unexpected(ifd.error());
  int fd = openat(ifd->get(), ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("open(" + join_path(image_dir, ".lock") + ")");
  UniqueFd lock(fd);
  while (flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) {
      return make_error(
          ErrorCode::kUnavailable, "image " + n + " is in use by a running sandbox",
          "wait until the sandboxes using it have ended, then run corral image rm " + n + " again");
    }
    return errno_error("flock(" + join_path(image_dir, ".lock") + ", LOCK_EX)");
  }
  // Out of sight first: from here on nobody can start using it.
  std::string removing = std::string(kRemovingPrefix) + n + "-" + std::to_string(getpid());
  std::string removing_path = join_path(dir_, removing);
  if (renameat2(dfd->get(), n.c_str(), dfd->get(), removing.c_str(), RENAME_NOREPLACE) != 0) {
    return errno_error("rename(" + image_dir + " -> " + removing_path + ")");
  }
  ifd->reset();
  Status r = remove_tree_at(dfd->get(), removing, removing_path);
  if (!r) return tl::unexpected(r.error().wrap("removing image " + n));
  return ok();
}

namespace {

Status refuse_existing(int images_fd, const std::string& name) {
  struct stat st {};
  if (fstatat(images_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return make_error(ErrorCode::kAlreadyExists, "image " + name + " already exists",
                      "corral image rm " + name + " first");
  }
  if (errno != ENOENT) return errno_error("stat(" + name + ")");
  return ok();
}

}  // namespace

Status ImageStore::build(std::string_view name, const std::vector<std::string>& packages,
                         const ProgressFn& progress) {
  CORRAL_TRY(validate_name(name));
  for (const auto& p : packages) CORRAL_TRY(validate_package(p));
  std::string n(name);
  CORRAL_TRY_CTX(mkdir_p(dir_, 0755), "creating the image store");
  auto dfd = open_dir(dir_);
  if (!dfd) return tl::unexpected(dfd.error());
  (void)remove_stale();
  CORRAL_TRY(refuse_existing(dfd->get(), n));

  ForwardedSignals signals;
  PartialDir partial(dir_, dfd->get(), n);
  CORRAL_TRY_CTX(partial.create(), "building image " + n);

  std::string include;
  for (const auto& p : packages) include += (include.empty() ? "" : ",") + p;
  std::vector<std::string> argv = {"mmdebstrap", "--variant=minbase", "--mode=root",
                                   "--format=directory"};
  if (!include.empty()) argv.push_back("--include=" + include);
  argv.push_back(kSuite);
  argv.push_back(partial.path("rootfs"));

  RunOptions opts;
  opts.signals = &signals;
  opts.inherit_fd = partial.lock_fd();
  auto r = run_tool(argv, progress, opts);
  CORRAL_TRY(check_interrupted(signals, "build of image " + n));
  if (!r) return tl::unexpected(r.error().wrap("building image " + n));
  if (!r->ok()) {
    std::string hint =
        "check the package names and that deb.debian.org is reachable; the lines above are "
        "mmdebstrap's own output";
    return tool_failed(argv, *r, hint);
  }

  ImageInfo info;
  info.name = n;
  info.source = std::string("mmdebstrap ") + kSuite + (include.empty() ? "" : " +" + include);
  info.created = rfc3339_now();
  auto size = tree_size(partial.path("rootfs"));
  if (!size) return tl::unexpected(size.error().wrap("measuring image " + n));
  info.size_bytes = *size;
  CORRAL_TRY(check_interrupted(signals, "build of image " + n));
  CORRAL_TRY_CTX(partial.commit(info), "building image " + n);
  return ok();
}

Status ImageStore::import_oci(std::string_view name, const std::string& tarball,
                              const ProgressFn& progress) {
  CORRAL_TRY(validate_name(name));
  std::string n(name);
  struct stat tst {};
  if (stat(tarball.c_str(), &tst) != 0) {
    return errno_error("stat(" + tarball + ")", errno, "give the path of an OCI image tarball");
  }
  if (!S_ISREG(tst.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument, tarball + " is not a regular file",
                      convert_hint());
  }
  char real[PATH_MAX];
  if (realpath(tarball.c_str(), real) == nullptr) return errno_error("realpath(" + tarball + ")");
  std::string file = real;

  CORRAL_TRY_CTX(mkdir_p(dir_, 0755), "creating the image store");
  auto dfd = open_dir(dir_);
  if (!dfd) return tl::unexpected(dfd.error());
  (void)remove_stale();
  CORRAL_TRY(refuse_existing(dfd->get(), n));

  ForwardedSignals signals;
  std::string what = "import of image " + n;
  RunOptions opts;
  opts.signals = &signals;

  // 1. What is in the tarball, before anything is written.
  RunOptions list_opts = opts;
  list_opts.capture_stdout = true;
  std::vector<std::string> list_argv = {"tar", "-t", "-f", file};
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  say("checking " + file);
  auto listing = run_tool(list_argv, nullptr, list_opts);
  CORRAL_TRY(check_interrupted(signals, what));
  if (!listing) return tl::unexpected(listing.error().wrap("listing " + file));
  if (!listing->ok()) {
    return make_error(ErrorCode::kInvalidArgument,
                      file + " is not a readable tar archive (" + listing->error_line() + ")",
                      convert_hint());
  }
  bool has_layout = false, has_index = false, has_manifest = false;
  std::istringstream members(listing->out);
  std::string m;
  while (std::getline(members, m)) {
    if (m.empty()) continue;
    if (m[0] == '/') {
      return make_error(ErrorCode::kInvalidArgument,
                        "refusing " + file + ": member " + dq(m) + " is an absolute path",
                        "an OCI image tarball holds only relative paths; " + convert_hint());
    }
    std::string rel = m;
    std::istringstream parts(m);
    std::string part;
    while (std::getline(parts, part, '/')) {
      if (part == "..") {
        return make_error(
            ErrorCode::kInvalidArgument,
            "refusing " + file + ": member " + dq(m) + " leads outside the archive with '..'",
            "an OCI image tarball never needs '..'; " + convert_hint());
      }
    }
    while (rel.rfind("./", 0) == 0) rel.erase(0, 2);
    if (rel == "oci-layout") has_layout = true;
    if (rel == "index.json") has_index = true;
    if (rel == "manifest.json") has_manifest = true;
  }
  if (!has_layout && has_manifest) {
    return make_error(ErrorCode::kInvalidArgument,
                      file +
                          " is a docker-archive (manifest.json without oci-layout), not an "
                          "OCI image layout",
                      "convert it: skopeo copy docker-archive:" + file +
                          " oci-archive:IMAGE.tar:latest, then corral image import " + n +
                          " IMAGE.tar");
  }
  if (!has_layout || !has_index) {
    return make_error(
        ErrorCode::kInvalidArgument,
        file + " is not an OCI image layout (no oci-layout and index.json at its top)",
        convert_hint());
  }

  PartialDir partial(dir_, dfd->get(), n);
  CORRAL_TRY_CTX(partial.create(), what);
  opts.inherit_fd = partial.lock_fd();

  // 2. Extract into the private partial tree. GNU tar also refuses '..' and
  // strips leading '/' on its own; the listing check above makes it an error.
  if (mkdirat(partial.fd(), "layout", 0700) != 0) {
    return errno_error("mkdir(" + partial.path("layout") + ")");
  }
  std::vector<std::string> x_argv = {"tar",
                                     "-x",
                                     "-f",
                                     file,
                                     "-C",
                                     partial.path("layout"),
                                     "--no-same-owner",
                                     "--no-overwrite-dir"};
  say("extracting the OCI layout");
  auto extracted = run_tool(x_argv, progress, opts);
  CORRAL_TRY(check_interrupted(signals, what));
  if (!extracted) return tl::unexpected(extracted.error().wrap("extracting " + file));
  if (!extracted->ok()) return tool_failed(x_argv, *extracted, convert_hint());

  // 3. The layout holds only directories and regular files: a symlink or
  // device in it would make umoci read something outside the archive.
  Status shape =
      walk(partial.path("layout"), [&](const std::string& rel, const FileStat& st) -> Status {
        if (st.is_dir() || st.is_reg()) return ok();
        return make_error(ErrorCode::kInvalidArgument,
                          "refusing " + file + ": " + dq(rel) +
                              " is neither a file nor a directory (an OCI layout has only those)",
                          convert_hint());
      });
  if (!shape) return shape;

  // 4. Which tag to unpack.
  auto layout_fd = open_dir_at(partial.fd(), "layout", partial.path("layout"));
  if (!layout_fd) return tl::unexpected(layout_fd.error());
  auto index = read_json_file(layout_fd->get(), "index.json", "index.json in " + file);
  if (!index) return tl::unexpected(index.error());
  std::set<std::string> tags;
  const json* manifests = member(*index, "manifests");
  if (manifests != nullptr && manifests->is_array()) {
    for (const auto& desc : *manifests) {
      const json* ann = member(desc, "annotations");
      std::string ref = ann != nullptr ? string_member(*ann, kRefNameAnnotation) : "";
      if (!ref.empty()) tags.insert(ref);
    }
  }
  std::string tag;
  bool tagged_here = false;
  if (tags.count("latest") != 0) {
    tag = "latest";
  } else if (tags.size() == 1) {
    tag = *tags.begin();
  } else if (tags.empty() && manifests != nullptr && manifests->is_array() &&
             manifests->size() == 1 && (*manifests)[0].is_object()) {
    // `skopeo copy X oci-archive:FILE` without a tag leaves the only
    // manifest unnamed; umoci needs a name, so give it one in our copy.
    tag = "latest";
    tagged_here = true;
    json& desc = (*index)["manifests"][0];
    if (!desc.contains("annotations") || !desc["annotations"].is_object()) {
      desc["annotations"] = json::object();
    }
    desc["annotations"][kRefNameAnnotation] = tag;
    CORRAL_TRY(replace_file(layout_fd->get(), "index.json", json_text(*index),
                            partial.path("layout/index.json")));
  } else if (tags.empty()) {
    return make_error(ErrorCode::kInvalidArgument, file + " has no tagged image in index.json",
                      "tag it while converting: skopeo copy oci-archive:" + file +
                          " oci-archive:IMAGE.tar:latest");
  } else {
    std::string all;
    for (const auto& t : tags) all += (all.empty() ? "" : ", ") + t;
    return make_error(
        ErrorCode::kInvalidArgument,
        file + " holds several tags (" + all + ") and none is \"latest\"",
        "keep one: skopeo copy oci-archive:" + file + ":TAG oci-archive:IMAGE.tar:latest");
  }
  if (!valid_tag(tag)) {
    return make_error(ErrorCode::kInvalidArgument,
                      file + ": tag " + dq(tag) + " is not a valid OCI tag");
  }

  // 5. Unpack (umoci checks every blob's digest). Relative paths, run from
  // inside the partial tree, so that no ':' in the store path can confuse
  // umoci's LAYOUT:TAG syntax.
  RunOptions umoci_opts = opts;
  umoci_opts.cwd = partial.path();
  std::vector<std::string> u_argv = {"umoci", "unpack", "--image", "layout:" + tag, "bundle"};
  say("unpacking tag " + tag + " with umoci");
  auto unpacked = run_tool(u_argv, progress, umoci_opts);
  CORRAL_TRY(check_interrupted(signals, what));
  if (!unpacked) return tl::unexpected(unpacked.error().wrap("unpacking " + file));
  if (!unpacked->ok()) return tool_failed(u_argv, *unpacked, convert_hint());

  // 6. env and workdir: from the image's own config blob (umoci checked
  // its digest), else from the runtime config umoci generated, which adds
  // defaults of its own (cwd "/", TERM) that are dropped here.
  auto bundle_fd = open_dir_at(partial.fd(), "bundle", partial.path("bundle"));
  if (!bundle_fd) return tl::unexpected(bundle_fd.error());
  ImageInfo info;
  auto image_config = oci_image_config(layout_fd->get(), *index, tag);
  if (image_config) {
    info.env = string_list_member(*image_config, "Env");
    info.workdir = string_member(*image_config, "WorkingDir");
  } else {
    auto config =
        read_json_file(bundle_fd->get(), "config.json", partial.path("bundle/config.json"));
    if (!config) return tl::unexpected(config.error().wrap(what));
    if (const json* process = member(*config, "process")) {
      for (auto& e : string_list_member(*process, "env")) {
        if (e != "TERM=xterm") info.env.push_back(std::move(e));
      }
      info.workdir = string_member(*process, "cwd");
      if (info.workdir == "/") info.workdir.clear();
    }
  }

  // 7. Keep the rootfs, drop the rest.
  if (renameat(bundle_fd->get(), "rootfs", partial.fd(), "rootfs") != 0) {
    return errno_error("rename(" + partial.path("bundle/rootfs") + " -> " + partial.path("rootfs") +
                       ")");
  }
  bundle_fd->reset();
  layout_fd->reset();
  CORRAL_TRY(remove_tree_at(partial.fd(), "bundle", partial.path("bundle")));
  CORRAL_TRY(remove_tree_at(partial.fd(), "layout", partial.path("layout")));

  info.name = n;
  info.source = "oci:" + file + ":" + tag + (tagged_here ? " (untagged)" : "");
  info.created = rfc3339_now();
  auto size = tree_size(partial.path("rootfs"));
  if (!size) return tl::unexpected(size.error().wrap("measuring image " + n));
  info.size_bytes = *size;
  CORRAL_TRY(check_interrupted(signals, what));
  CORRAL_TRY_CTX(partial.commit(info), what);
  return ok();
}

}  // namespace corral
