#include "jail/dry_run_writes.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>

#include "base/line_diff.h"
#include "base/unique_fd.h"
#include "base/utf8.h"

namespace corral {

namespace {

// Deeper trees are cut off (the report says truncated).
constexpr int kMaxDepth = 128;

std::vector<std::string> list_dir(int dir_fd) {
  std::vector<std::string> names;
  int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return names;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(fdopendir(fd), closedir);
  if (!dir) {
    close(fd);
    return names;
  }
  while (dirent* e = readdir(dir.get())) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A sub-directory, never through a symlink.
UniqueFd open_subdir(int dir_fd, const std::string& name) {
  return UniqueFd(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

const char* type_of(mode_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "dir";
  if (S_ISLNK(mode)) return "symlink";
  return "other";
}

bool is_whiteout(const struct stat& st) { return S_ISCHR(st.st_mode) && st.st_rdev == 0; }

bool is_opaque(int dir_fd) {
  char value[2] = {};
  ssize_t n = fgetxattr(dir_fd, "trusted.overlay.opaque", value, sizeof value);
  return n == 1 && value[0] == 'y';
}

// Bytes of regular files under a directory, bounded like the walk.
std::uint64_t tree_size(int dir_fd, int depth) {
  if (depth > kMaxDepth) return 0;
  std::uint64_t total = 0;
  for (const std::string& name : list_dir(dir_fd)) {
    struct stat st;
    if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) total += static_cast<std::uint64_t>(st.st_size);
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub = open_subdir(dir_fd, name);
      if (sub) total += tree_size(sub.get(), depth + 1);
    }
  }
  return total;
}

// A regular file's content if it is at most kMaxDiffFileBytes.
std::optional<std::string> read_small(int dir_fd, const std::string& name) {
  UniqueFd fd(openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return std::nullopt;
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::uint64_t>(st.st_size) > kMaxDiffFileBytes)
    return std::nullopt;
  std::string data(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < data.size()) {
    ssize_t n = read(fd.get(), data.data() + got, data.size() - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  data.resize(got);
  return data;
}

bool is_text(std::string_view s) {
  return s.find('\0') == std::string_view::npos && is_valid_utf8(s);
}

class Walker {
 public:
  Walker(const std::string& target, const WriteBaseline* baseline, const SecretCheck& has_secret,
         DryRunWrites& out)
      : target_(target), baseline_(baseline), has_secret_(has_secret), out_(out) {}

  void walk(int upper_fd, int lower_fd, const std::string& rel, int depth) {
    if (depth > kMaxDepth) {
      out_.truncated = true;
      return;
    }
    const std::vector<std::string> names = list_dir(upper_fd);
    if (lower_fd >= 0 && is_opaque(upper_fd)) {
      // The directory was removed and made again: what the lower held
      // and the upper does not is gone.
      const std::set<std::string> kept(names.begin(), names.end());
      for (const std::string& name : list_dir(lower_fd))
        if (kept.count(name) == 0) deleted(lower_fd, name, rel);
    }
    for (const std::string& name : names) {
      struct stat us;
      if (fstatat(upper_fd, name.c_str(), &us, AT_SYMLINK_NOFOLLOW) != 0) continue;
      struct stat ls;
      const bool in_lower =
          lower_fd >= 0 && fstatat(lower_fd, name.c_str(), &ls, AT_SYMLINK_NOFOLLOW) == 0;
      const std::string sub_rel = rel.empty() ? name : rel + "/" + name;
      if (is_whiteout(us)) {
        if (in_lower) deleted(lower_fd, name, rel);
        continue;
      }
      if (S_ISDIR(us.st_mode)) {
        UniqueFd up = open_subdir(upper_fd, name);
        if (!up) continue;
        if (in_lower && S_ISDIR(ls.st_mode)) {
          UniqueFd low = open_subdir(lower_fd, name);
          walk(up.get(), low.get(), sub_rel, depth + 1);
        } else {
          if (!baselined(sub_rel, us))
            add(in_lower ? WriteChange::Kind::kModified : WriteChange::Kind::kCreated, sub_rel,
                us, 0);
          walk(up.get(), -1, sub_rel, depth + 1);
        }
        continue;
      }
      if (baselined(sub_rel, us)) continue;
      WriteChange& c = add(in_lower ? WriteChange::Kind::kModified : WriteChange::Kind::kCreated,
                           sub_rel, us, static_cast<std::uint64_t>(us.st_size));
      if (&c != &scratch_ && S_ISREG(us.st_mode) && (!in_lower || S_ISREG(ls.st_mode)))
        add_diff(c, upper_fd, in_lower ? lower_fd : -1, name, sub_rel);
    }
  }

 private:
  std::string absolute(const std::string& rel) const {
    if (target_ == "/") return "/" + rel;
    return rel.empty() ? target_ : target_ + "/" + rel;
  }

  bool baselined(const std::string& rel, const struct stat& st) const {
    if (baseline_ == nullptr) return false;
    auto it = baseline_->find(rel);
    if (it == baseline_->end()) return false;
    const std::int64_t mtime = st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec;
    return it->second.size == static_cast<std::uint64_t>(st.st_size) &&
           it->second.mtime_ns == mtime && it->second.ino == st.st_ino;
  }

  // The change, or a scratch entry once the report is full (counted still).
  WriteChange& add(WriteChange::Kind kind, const std::string& rel, const struct stat& st,
                   std::uint64_t size) {
    switch (kind) {
      case WriteChange::Kind::kCreated: ++out_.created; break;
      case WriteChange::Kind::kModified: ++out_.modified; break;
      case WriteChange::Kind::kDeleted: ++out_.deleted; break;
    }
    if (kind != WriteChange::Kind::kDeleted && S_ISREG(st.st_mode)) out_.bytes_written += size;
    if (out_.changes.size() >= kMaxReportedChanges) {
      out_.truncated = true;
      scratch_ = WriteChange{};
      return scratch_;
    }
    out_.changes.push_back(WriteChange{kind, absolute(rel), type_of(st.st_mode), size, {}, false});
    return out_.changes.back();
  }

  void deleted(int lower_fd, const std::string& name, const std::string& rel) {
    struct stat ls;
    if (fstatat(lower_fd, name.c_str(), &ls, AT_SYMLINK_NOFOLLOW) != 0) return;
    std::uint64_t size = static_cast<std::uint64_t>(ls.st_size);
    if (S_ISDIR(ls.st_mode)) {
      UniqueFd sub = open_subdir(lower_fd, name);
      size = sub ? tree_size(sub.get(), 0) : 0;
    }
    add(WriteChange::Kind::kDeleted, rel.empty() ? name : rel + "/" + name, ls, size);
  }

  void add_diff(WriteChange& c, int upper_fd, int lower_fd, const std::string& name,
                const std::string& rel) {
    auto after = read_small(upper_fd, name);
    if (!after) return;
    std::optional<std::string> before = std::string();
    if (lower_fd >= 0) before = read_small(lower_fd, name);
    if (!before || !is_text(*after) || !is_text(*before)) return;
    if (has_secret_ && (has_secret_(*after) || has_secret_(*before))) {
      c.redacted = true;
      return;
    }
    auto diff = unified_diff(*before, *after, absolute(rel).substr(1), lower_fd < 0);
    if (diff && diff->size() <= kMaxDiffBytes) c.diff = std::move(*diff);
  }

  const std::string& target_;
  const WriteBaseline* baseline_;
  const SecretCheck& has_secret_;
  DryRunWrites& out_;
  WriteChange scratch_;
};

void snapshot_into(int dir_fd, const std::string& rel, int depth, WriteBaseline& out) {
  if (depth > kMaxDepth) return;
  for (const std::string& name : list_dir(dir_fd)) {
    struct stat st;
    if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::string sub_rel = rel.empty() ? name : rel + "/" + name;
    out[sub_rel] = BaselineEntry{static_cast<std::uint64_t>(st.st_size),
                                 st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
                                 st.st_ino};
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub = open_subdir(dir_fd, name);
      if (sub) snapshot_into(sub.get(), sub_rel, depth + 1, out);
    }
  }
}

std::string human_size(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  if (u == 0)
    snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    snprintf(buf, sizeof buf, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

// The directory a change is summarized under: the area for a mount, else
// the first component (/workspace, /tmp, /etc).
std::string group_of(const DryRunWrites& writes, const std::string& path) {
  std::string best;
  for (const WriteArea& a : writes.areas) {
    if (a.kind != "mount") continue;
    if ((path == a.target || path.rfind(a.target + "/", 0) == 0) && a.target.size() > best.size())
      best = a.target;
  }
  if (!best.empty()) return best;
  auto slash = path.find('/', 1);
  return slash == std::string::npos ? std::string("/") : path.substr(0, slash);
}

}  // namespace

WriteBaseline snapshot_upper(int upper_fd) {
  WriteBaseline out;
  snapshot_into(upper_fd, "", 0, out);
  return out;
}

void collect_writes(int upper_fd, int lower_fd, const std::string& target,
                    const WriteBaseline* baseline, const SecretCheck& has_secret,
                    DryRunWrites& out) {
  Walker(target, baseline, has_secret, out).walk(upper_fd, lower_fd, "", 0);
}

const char* change_kind_name(WriteChange::Kind kind) {
  switch (kind) {
    case WriteChange::Kind::kCreated: return "created";
    case WriteChange::Kind::kModified: return "modified";
    case WriteChange::Kind::kDeleted: return "deleted";
  }
  return "?";
}

DryRunWrites collect_layer_writes(int layer_root_fd, int root_lower_fd,
                                  const std::vector<DryMountArea>& mounts,
                                  const WriteBaseline* root_baseline,
                                  const SecretCheck& has_secret) {
  DryRunWrites out;
  auto sub = [layer_root_fd](const std::string& rel) {
    return UniqueFd(
        openat(layer_root_fd, rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  };
  struct Area {
    std::string upper, target;
  };
  for (const Area& a : {Area{"upper", "/"}, Area{"tmp", "/tmp"}, Area{"shm", "/dev/shm"}}) {
    UniqueFd upper = sub(a.upper);
    if (!upper) continue;
    const bool root = a.target == "/";
    out.areas.push_back(WriteArea{a.target, "layer"});
    collect_writes(upper.get(), root ? root_lower_fd : -1, a.target, root ? root_baseline : nullptr,
                   has_secret, out);
  }
  for (const DryMountArea& m : mounts) {
    UniqueFd upper = sub(m.upper);
    // The O_PATH source reopened for reading, never through a symlink.
    UniqueFd lower(openat(m.source_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    out.areas.push_back(WriteArea{m.target, "mount"});
    if (upper)
      collect_writes(upper.get(), lower ? lower.get() : -1, m.target, nullptr, has_secret, out);
  }
  return out;
}

std::string summarize_writes(const DryRunWrites& writes) {
  struct Group {
    std::uint64_t files = 0, bytes = 0;
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> deletions;
  for (const WriteChange& c : writes.changes) {
    if (c.kind == WriteChange::Kind::kDeleted) {
      deletions.push_back(c.path);
    } else if (c.type != "dir") {
      Group& g = groups[group_of(writes, c.path)];
      ++g.files;
      g.bytes += c.size;
    }
  }
  std::vector<std::string> parts;
  for (const auto& [dir, g] : groups)
    parts.push_back("would write " + std::to_string(g.files) + (g.files == 1 ? " file" : " files") +
                    " (" + human_size(g.bytes) + ") under " + dir);
  constexpr std::size_t kListed = 10;
  for (std::size_t i = 0; i < deletions.size() && i < kListed; ++i)
    parts.push_back("would delete " + deletions[i]);
  if (deletions.size() > kListed)
    parts.push_back("and " + std::to_string(deletions.size() - kListed) + " more deletions");
  if (writes.truncated) parts.push_back("(more changes than the report holds)");
  if (parts.empty()) return "would write nothing";
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace corral
