// Detection of the cgroup layout from mountinfo, and the file, directory
// and kill helpers both backends share (cgroup_files.h).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <thread>

#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/cgroup_files.h"
#include "sys/syscalls.h"

namespace corral {

namespace cgroup_internal {

// ---------------------------------------------------------------------------
// Control files

std::string join_path(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (out.empty() || out.back() != '/') out.push_back('/');
  out.append(name);
  return out;
}

Result<std::string> read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error("open(" + path + ")");
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("read(" + path + ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Result<std::optional<std::string>> read_optional_file(const std::string& path) {
  auto r = read_file(path);
  if (!r) {
    if (r.error().sys_errno == ENOENT) return std::optional<std::string>();
    return tl::unexpected<Error>(std::move(r).error());
  }
  return std::optional<std::string>(std::move(*r));
}

Status write_file(const std::string& path, std::string_view value, std::string hint) {
  std::string call = "write(" + path + ", \"" + std::string(value) + "\")";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd) return errno_error(call, errno, std::move(hint));
  ssize_t n;
  do {
    n = ::write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno_error(call, errno, std::move(hint));
  if (static_cast<size_t>(n) != value.size()) {
    return make_error(ErrorCode::kSystem, call + ": short write of " + std::to_string(n) + " bytes",
                      std::move(hint));
  }
  return ok();
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

Result<std::uint64_t> parse_u64(std::string_view text, std::string_view what) {
  std::string_view t = trim(text);
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
    return make_error(ErrorCode::kSystem,
                      std::string(what) + ": expected a number, got \"" + std::string(t) + "\"");
  }
  return v;
}

Result<std::uint64_t> read_u64(const std::string& path) {
  auto text = read_file(path);
  if (!text) return tl::unexpected<Error>(std::move(text).error());
  return parse_u64(*text, path);
}

Result<std::uint64_t> read_optional_u64(const std::string& path) {
  auto text = read_optional_file(path);
  if (!text) return tl::unexpected<Error>(std::move(text).error());
  if (!text->has_value()) return std::uint64_t{0};
  return parse_u64(**text, path);
}

Result<std::uint64_t> read_keyed(const std::string& path, std::string_view key) {
  auto text = read_file(path);
  if (!text) return tl::unexpected<Error>(std::move(text).error());
  std::string_view rest = *text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    line = trim(line);
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.substr(0, sp) != key) continue;
    return parse_u64(line.substr(sp + 1), path + " (" + std::string(key) + ")");
  }
  return std::uint64_t{0};
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\n' && text[i] != '\t') ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

namespace {

Status collect_procs_into(const std::string& dir, std::vector<pid_t>& out) {
  auto text = read_file(join_path(dir, "cgroup.procs"));
  if (!text) return tl::unexpected<Error>(std::move(text).error());
  for (const std::string& w : split_words(*text)) {
    auto v = parse_u64(w, join_path(dir, "cgroup.procs"));
    if (!v) return tl::unexpected<Error>(std::move(v).error());
    out.push_back(static_cast<pid_t>(*v));
  }
  // Child cgroups: a sandbox cannot make them (no cgroupfs inside), but a
  // stale tree might have some, and their processes count too.
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno_error("opendir(" + dir + ")");
  std::vector<std::string> subdirs;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_DIR) continue;
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    subdirs.emplace_back(n);
  }
  ::closedir(d);
  for (const std::string& s : subdirs) {
    std::string sub = join_path(dir, s);
    if (!file_exists(join_path(sub, "cgroup.procs"))) continue;  // not a cgroup
    CORRAL_TRY(collect_procs_into(sub, out));
  }
  return ok();
}

void sort_unique(std::vector<pid_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

Result<std::vector<pid_t>> collect_procs(const std::string& dir) {
  std::vector<pid_t> out;
  CORRAL_TRY(collect_procs_into(dir, out));
  sort_unique(out);
  return out;
}

Result<std::vector<pid_t>> collect_procs(const std::vector<std::string>& dirs) {
  std::vector<pid_t> out;
  for (const std::string& d : dirs) CORRAL_TRY(collect_procs_into(d, out));
  sort_unique(out);
  return out;
}

std::string pids_to_string(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) {
    if (!s.empty()) s.push_back(' ');
    s += std::to_string(p);
  }
  return s;
}

// ---------------------------------------------------------------------------
// Directories

Result<bool> make_dir(const std::string& path, const CgroupFakeKernel& fake) {
  if (::mkdir(path.c_str(), 0755) != 0) {
    if (errno == EEXIST) return false;
    return errno_error("mkdir(" + path + ")");
  }
  if (fake.after_mkdir) fake.after_mkdir(path);
  return true;
}

Status make_parent_dirs(const std::string& mount_point, std::string_view parent_name,
                        const CgroupFakeKernel& fake,
                        const std::function<Status(const std::string&)>& on_each) {
  std::string dir = mount_point;
  if (on_each) CORRAL_TRY(on_each(dir));
  size_t i = 0;
  while (i < parent_name.size()) {
    size_t slash = parent_name.find('/', i);
    if (slash == std::string_view::npos) slash = parent_name.size();
    dir = join_path(dir, parent_name.substr(i, slash - i));
    auto made = make_dir(dir, fake);
    if (!made) return tl::unexpected<Error>(std::move(made).error());
    if (on_each) CORRAL_TRY(on_each(dir));
    i = slash + 1;
  }
  return ok();
}

Status remove_cgroup_dir(const std::string& path, const CgroupFakeKernel& fake,
                         Clock::time_point deadline) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return ok();
    return errno_error("opendir(" + path + ")");
  }
  std::vector<std::string> subdirs;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_DIR) continue;
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    subdirs.emplace_back(n);
  }
  ::closedir(d);
  for (const std::string& s : subdirs) {
    CORRAL_TRY(remove_cgroup_dir(join_path(path, s), fake, deadline));
  }
  if (fake.before_rmdir) fake.before_rmdir(path);
  for (;;) {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return ok();
    int err = errno;
    // A cgroup whose last process has just died can be busy for a moment.
    if (err != EBUSY || Clock::now() >= deadline) {
      return errno_error("rmdir(" + path + ")", err,
                         err == EBUSY ? "processes are still in the cgroup (see its cgroup.procs)"
                                      : std::string());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status verify_removed(const std::vector<std::string>& paths) {
  std::string left;
  for (const std::string& p : paths) {
    if (!file_exists(p)) continue;
    if (!left.empty()) left += ", ";
    left += p;
  }
  if (left.empty()) return ok();
  return make_error(ErrorCode::kSystem, "cgroup directories left after removal: " + left,
                    "look for processes in their cgroup.procs and remove the directories "
                    "with rmdir");
}

Result<std::vector<std::string>> list_children(const std::vector<std::string>& parent_dirs) {
  std::vector<std::string> names;
  for (const std::string& parent : parent_dirs) {
    DIR* d = ::opendir(parent.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) continue;  // parent not created yet: no sandboxes
      return errno_error("opendir(" + parent + ")");
    }
    while (dirent* e = ::readdir(d)) {
      if (e->d_type != DT_DIR) continue;
      std::string_view n = e->d_name;
      if (!valid_cgroup_name(n)) continue;
      names.emplace_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// ---------------------------------------------------------------------------
// Validation

Status check_name(std::string_view name) {
  if (valid_cgroup_name(name)) return ok();
  return make_error(ErrorCode::kInvalidArgument,
                    "invalid cgroup name \"" + std::string(name) + "\"",
                    "use 1-128 characters from [A-Za-z0-9_.-], without \"..\"");
}

Status check_parent_name(std::string_view parent_name) {
  bool good = !parent_name.empty() && parent_name.front() != '/' && parent_name.back() != '/';
  size_t i = 0;
  while (good && i < parent_name.size()) {
    size_t slash = parent_name.find('/', i);
    if (slash == std::string_view::npos) slash = parent_name.size();
    good = valid_cgroup_name(parent_name.substr(i, slash - i));
    i = slash + 1;
  }
  if (good) return ok();
  return make_error(ErrorCode::kInvalidArgument,
                    "invalid cgroup parent \"" + std::string(parent_name) + "\"",
                    "use relative components from [A-Za-z0-9_.-] separated by '/'");
}

Result<std::uint64_t> cpu_quota_us(double cpus) {
  if (cpus == 0) return std::uint64_t{0};
  if (!(cpus >= 0.01) || !(cpus <= 1e6)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "cpu limit " + std::to_string(cpus) + " is out of range",
                      "use 0 (unlimited) or a number of cores from 0.01 up");
  }
  auto q = static_cast<std::uint64_t>(std::llround(cpus * static_cast<double>(kCpuPeriodUs)));
  return std::max(q, kMinCpuQuotaUs);
}

bool swap_active() {
  auto text = read_file("/proc/swaps");
  if (!text) return true;  // unknown: assume the worst, callers fail closed
  // The first line is a header; any further non-empty line is a swap area.
  size_t nl = text->find('\n');
  if (nl == std::string::npos) return false;
  return !trim(std::string_view(*text).substr(nl + 1)).empty();
}

// ---------------------------------------------------------------------------
// Killing

Status kill_loop(const std::vector<std::string>& dirs, const FreezeOps* freezer,
                 Clock::time_point deadline) {
  for (;;) {
    // Nothing left (the usual case after the pid namespace died): skip the
    // freeze, which patches kernel text on every CPU and costs ~0.2 ms.
    if (auto quick = collect_procs(dirs); quick && quick->empty()) return ok();
    bool frozen = freezer != nullptr && freezer->freeze(deadline);
    auto thaw = [&] {
      if (frozen) freezer->thaw();
      frozen = false;
    };
    auto before = collect_procs(dirs);
    if (!before) {
      thaw();
      return tl::unexpected<Error>(std::move(before).error());
    }
    if (before->empty()) {
      thaw();
      return ok();
    }
    // Pin each process with a pidfd, then re-read the cgroup, and signal
    // only pids listed both times. If a pid was recycled before pidfd_open,
    // the new owner is signalled only if it is in the cgroup too; if the
    // pinned process dies later, its pidfd fails with ESRCH, whoever holds
    // the number now. So no process outside the cgroup is ever signalled.
    std::vector<std::pair<pid_t, UniqueFd>> pinned;
    bool have_pidfd = true;
    for (pid_t pid : *before) {
      int fd = sys::pidfd_open(pid, 0);
      if (fd < 0 && errno == ENOSYS) {
        have_pidfd = false;
        break;
      }
      if (fd >= 0) pinned.emplace_back(pid, UniqueFd(fd));
    }
    if (!have_pidfd) {
      // Kernels before 5.3: plain kill(2). Race-free only while frozen
      // (frozen processes cannot exit, so their pids cannot be recycled).
      for (pid_t pid : *before) ::kill(pid, SIGKILL);
    } else {
      auto after = collect_procs(dirs);
      if (!after) {
        thaw();
        return tl::unexpected<Error>(std::move(after).error());
      }
      for (auto& [pid, fd] : pinned) {
        if (std::binary_search(after->begin(), after->end(), pid)) {
          sys::pidfd_send_signal(fd.get(), SIGKILL, nullptr, 0);
        }
      }
    }
    thaw();  // v1: killed processes stay frozen until thawed
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (Clock::now() >= deadline) {
      auto left = collect_procs(dirs);
      if (left && left->empty()) return ok();
      std::string which = left ? pids_to_string(*left) : left.error().message;
      return make_error(ErrorCode::kTimeout,
                        "processes still alive in the cgroup after SIGKILL: " + which,
                        "a process in uninterruptible sleep (D state, e.g. stuck I/O) cannot "
                        "die until it wakes; look at /proc/<pid>/stack");
    }
  }
}

}  // namespace cgroup_internal

// ---------------------------------------------------------------------------
// Names

bool valid_cgroup_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (name.find("..") != std::string_view::npos) return false;
  if (name == ".") return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// mountinfo

namespace {

using cgroup_internal::join_path;
using cgroup_internal::split_words;

// The v1 controllers the kernel knows; other super options (rw, name=,
// noprefix, clone_children, release_agent=, xattr, ...) are not controllers.
constexpr std::array<std::string_view, 14> kV1Controllers = {
    "cpu",   "cpuacct",    "cpuset",   "memory",  "devices", "freezer", "net_cls",
    "blkio", "perf_event", "net_prio", "hugetlb", "pids",    "rdma",    "misc"};

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_octal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(
          static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::vector<std::string_view> split_on(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t i = 0;
  for (;;) {
    size_t j = s.find(sep, i);
    if (j == std::string_view::npos) {
      out.push_back(s.substr(i));
      return out;
    }
    out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool has(const std::vector<std::string>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string join_words(const std::vector<std::string>& v, std::string_view sep = " ") {
  std::string s;
  for (const auto& w : v) {
    if (!s.empty()) s.append(sep);
    s += w;
  }
  return s;
}

}  // namespace

Result<std::vector<CgroupMount>> parse_cgroup_mounts(std::string_view mountinfo) {
  std::vector<CgroupMount> mounts;
  size_t line_no = 0;
  std::string_view rest = mountinfo;
  while (!rest.empty()) {
    ++line_no;
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (line.empty()) continue;
    auto bad = [&](std::string_view why) {
      return make_error(ErrorCode::kSystem,
                        "mountinfo line " + std::to_string(line_no) + ": " + std::string(why) +
                            ": \"" + std::string(line) + "\"",
                        "expected /proc/self/mountinfo format (man 5 proc): ID PARENT MAJ:MIN "
                        "ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS");
    };
    std::vector<std::string_view> f = split_on(line, ' ');
    auto dash = std::find(f.begin(), f.end(), "-");
    if (dash == f.end()) return bad("no \" - \" separator");
    size_t before = static_cast<size_t>(dash - f.begin());
    size_t after = f.size() - before - 1;
    if (before < 6) return bad("fewer than 6 fields before \" - \"");
    if (after < 3) return bad("fewer than 3 fields after \" - \"");
    if (!all_digits(f[0]) || !all_digits(f[1])) return bad("mount ids are not numbers");
    if (f[2].find(':') == std::string_view::npos) return bad("no MAJ:MIN device");
    if (f[4].empty() || f[4].front() != '/') return bad("mount point is not absolute");

    std::string mount_point = unescape_octal(f[4]);
    // A later mount on the same point hides the earlier one.
    std::erase_if(mounts, [&](const CgroupMount& m) { return m.mount_point == mount_point; });

    std::string_view fstype = dash[1];
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    CgroupMount m;
    m.version = fstype == "cgroup2" ? CgroupVersion::kV2 : CgroupVersion::kV1;
    m.mount_point = std::move(mount_point);
    m.root = unescape_octal(f[3]);
    if (m.version == CgroupVersion::kV1) {
      for (std::string_view opt : split_on(dash[3], ',')) {
        if (opt.substr(0, 5) == "name=") {
          m.name = std::string(opt.substr(5));
        } else if (std::find(kV1Controllers.begin(), kV1Controllers.end(), opt) !=
                   kV1Controllers.end()) {
          m.controllers.emplace_back(opt);
        }
      }
    }
    mounts.push_back(std::move(m));
  }
  return mounts;
}

Result<std::unique_ptr<CgroupManager>> CgroupManager::detect(const CgroupOptions& options) {
  CORRAL_TRY(cgroup_internal::check_parent_name(options.parent_name));
  auto text = cgroup_internal::read_file(options.mountinfo_path);
  if (!text) return tl::unexpected<Error>(std::move(text).error().wrap("detecting cgroups"));
  auto parsed = parse_cgroup_mounts(*text);
  if (!parsed) {
    return tl::unexpected<Error>(
        std::move(parsed).error().wrap("detecting cgroups: " + options.mountinfo_path));
  }
  std::vector<CgroupMount>& mounts = *parsed;
  const std::vector<std::string> needed_v2 = {"memory", "pids", "cpu"};
  const std::vector<std::string> needed_v1 = {"memory", "pids", "cpu", "cpuacct"};

  // cgroup v2: the first cgroup2 mount that offers all three controllers.
  std::string v2_seen;
  for (CgroupMount& m : mounts) {
    if (m.version != CgroupVersion::kV2) continue;
    auto ctl = cgroup_internal::read_file(join_path(m.mount_point, "cgroup.controllers"));
    if (ctl) m.controllers = split_words(*ctl);
    bool all = std::all_of(needed_v2.begin(), needed_v2.end(),
                           [&](const std::string& c) { return has(m.controllers, c); });
    if (all) return cgroup_internal::make_v2_manager(m.mount_point, needed_v2, options);
    if (!v2_seen.empty()) v2_seen += "; ";
    v2_seen += "cgroup2 at " + m.mount_point + " offers [" + join_words(m.controllers) + "]";
    if (!ctl) v2_seen += " (" + ctl.error().message + ")";
  }

  // cgroup v1: one hierarchy (the first mount) per needed controller. cpu
  // and cpuacct are often co-mounted as one hierarchy; then they share it.
  std::vector<cgroup_internal::V1Hierarchy> hierarchies;
  std::vector<std::string> missing_v1;
  auto add_v1 = [&](const std::string& controller) {
    for (const CgroupMount& m : mounts) {
      if (m.version != CgroupVersion::kV1 || !has(m.controllers, controller)) continue;
      bool known = std::any_of(hierarchies.begin(), hierarchies.end(),
                               [&](const auto& h) { return h.mount_point == m.mount_point; });
      if (!known) hierarchies.push_back({m.mount_point, m.controllers});
      return true;
    }
    return false;
  };
  for (const std::string& c : needed_v1) {
    if (!add_v1(c)) missing_v1.push_back(c);
  }
  if (missing_v1.empty()) {
    add_v1("freezer");  // optional: lets kill_all stop forks while it kills
    return cgroup_internal::make_v1_manager(std::move(hierarchies), options);
  }

  std::string v1_seen;
  for (const CgroupMount& m : mounts) {
    if (m.version == CgroupVersion::kV1 && !m.controllers.empty()) {
      if (!v1_seen.empty()) v1_seen += ", ";
      v1_seen += join_words(m.controllers, ",");
    }
  }
  std::string msg = "no usable cgroup controllers: ";
  msg += v2_seen.empty() ? "no cgroup2 mount" : v2_seen;
  msg += "; cgroup v1 hierarchies [" + v1_seen + "] lack [" + join_words(missing_v1) + "]";
  std::string hint;
  if (!v2_seen.empty()) {
    hint =
        "enable memory, pids and cpu in cgroup2 (a controller bound to a v1 hierarchy is not "
        "offered in cgroup.controllers: boot with systemd.unified_cgroup_hierarchy=1, or ask "
        "for them to be delegated), or mount the missing v1 hierarchies";
  } else {
    hint =
        "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup), or mount the missing v1 "
        "hierarchies";
  }
  hint += ", e.g. mount -t cgroup -o " + missing_v1.front() + " cgroup /sys/fs/cgroup/" +
          missing_v1.front();
  return make_error(ErrorCode::kUnavailable, std::move(msg), std::move(hint));
}

Result<std::unique_ptr<CgroupManager>> CgroupManager::v2_at(std::string mount_point,
                                                            std::vector<std::string> controllers,
                                                            const CgroupOptions& options) {
  CORRAL_TRY(cgroup_internal::check_parent_name(options.parent_name));
  auto ctl = cgroup_internal::read_file(join_path(mount_point, "cgroup.controllers"));
  if (!ctl) {
    return tl::unexpected<Error>(std::move(ctl).error().wrap("opening cgroup2 at " + mount_point));
  }
  std::vector<std::string> offered = split_words(*ctl);
  for (const std::string& c : controllers) {
    if (!has(offered, c)) {
      return make_error(ErrorCode::kUnavailable,
                        "cgroup2 at " + mount_point + " does not offer the " + c +
                            " controller (it offers [" + join_words(offered) + "])",
                        "a controller bound to a cgroup v1 hierarchy is not available in v2");
    }
  }
  return cgroup_internal::make_v2_manager(std::move(mount_point), std::move(controllers), options);
}

}  // namespace corral
