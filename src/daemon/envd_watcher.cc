#include "daemon/envd_watcher.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <deque>

namespace corral::daemon {

namespace {

constexpr std::uint32_t kMask = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM |
                                IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF |
                                IN_ONLYDIR | IN_EXCL_UNLINK;

std::string join_rel(const std::string& dir, const char* name) {
  return dir.empty() ? std::string(name) : dir + "/" + name;
}

}  // namespace

DirWatcher::DirWatcher(const ConfinedRoot& root, std::string base, bool recursive)
    : root_(root),
      base_(std::move(base)),
      recursive_(recursive),
      fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {}

Status DirWatcher::add(const std::string& rel) {
  std::deque<std::string> todo{rel};
  while (!todo.empty()) {
    const std::string dir = todo.front();
    todo.pop_front();
    if (dirs_.size() >= kMaxWatches)
      return make_error(ErrorCode::kResourceExhausted,
                        "more than " + std::to_string(kMaxWatches) + " directories to watch");
    const std::string path = dir.empty() ? base_ : base_ + "/" + dir;
    auto opened = root_.open_directory(path);
    if (!opened) {
      if (dir.empty()) return tl::unexpected(opened.error());
      continue;  // gone meanwhile, or not to be watched (a kernel fs, a secret)
    }
    const std::string proc = "/proc/self/fd/" + std::to_string(opened->get());
    const int wd = inotify_add_watch(fd_.get(), proc.c_str(), kMask);
    if (wd < 0) {
      if (dir.empty()) return errno_error("inotify_add_watch(" + path + ")");
      continue;
    }
    dirs_[wd] = dir;
    if (!recursive_) continue;
    auto listing = root_.list(path, kMaxWatches);
    if (!listing) continue;
    for (const FileInfo& f : listing->entries)
      if (f.type == FileType::kDirectory) todo.push_back(join_rel(dir, f.name.c_str()));
  }
  return ok();
}

bool DirWatcher::drain(const std::function<void(const std::string&, e2b::FsEventType)>& emit) {
  alignas(inotify_event) char buf[16 * 1024];
  for (;;) {
    ssize_t n = read(fd_.get(), buf, sizeof buf);
    if (n <= 0) return true;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      p += sizeof(inotify_event) + ev->len;
      auto it = dirs_.find(ev->wd);
      if (ev->mask & IN_IGNORED) {
        if (it != dirs_.end() && it->second.empty()) return false;
        if (it != dirs_.end()) dirs_.erase(it);
        continue;
      }
      if (it == dirs_.end()) continue;
      if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) && it->second.empty()) return false;
      if (ev->len == 0) continue;  // an event of the directory itself
      const std::string name = join_rel(it->second, ev->name);
      const bool dir = ev->mask & IN_ISDIR;
      if (ev->mask & IN_CREATE) emit(name, e2b::FsEventType::kCreate);
      if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) emit(name, e2b::FsEventType::kWrite);
      if (ev->mask & IN_DELETE) emit(name, e2b::FsEventType::kRemove);
      if (ev->mask & (IN_MOVED_FROM | IN_MOVED_TO)) emit(name, e2b::FsEventType::kRename);
      if (ev->mask & IN_ATTRIB) emit(name, e2b::FsEventType::kChmod);
      if (recursive_ && dir && (ev->mask & (IN_CREATE | IN_MOVED_TO))) (void)add(name);
    }
  }
}

std::unique_ptr<WatchBudget::Ticket> WatchBudget::take(const std::string& sandbox) {
  std::lock_guard lock(mu_);
  std::size_t& mine = per_sandbox_[sandbox];
  if (mine >= kPerSandbox || total_ >= kTotal) {
    if (mine == 0) per_sandbox_.erase(sandbox);
    return nullptr;
  }
  ++mine;
  ++total_;
  return std::make_unique<Ticket>(this, sandbox);
}

WatchBudget::Ticket::~Ticket() {
  std::lock_guard lock(budget_->mu_);
  --budget_->total_;
  auto it = budget_->per_sandbox_.find(sandbox_);
  if (it != budget_->per_sandbox_.end() && --it->second == 0) budget_->per_sandbox_.erase(it);
}

}  // namespace corral::daemon
