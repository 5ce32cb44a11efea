// A directory watch of the E2B facade (WatchDir's streams and the polling
// watchers): inotify on directories opened through the sandbox's
// ConfinedRoot (through /proc/self/fd, so a watch never reaches outside
// the sandbox's root, a kernel file system or corral's secret files), and
// the budget of inotify instances the facade may hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"
#include "e2b/envd_messages.h"
#include "fs/confined_root.h"

namespace corral::daemon {

class DirWatcher {
 public:
  // Directories one watcher watches at most (each costs the kernel an
  // inotify watch of the daemon's user: fs.inotify.max_user_watches).
  static constexpr std::size_t kMaxWatches = 1024;

  DirWatcher(const ConfinedRoot& root, std::string base, bool recursive);
  int fd() const { return fd_.get(); }
  bool ready() const { return static_cast<bool>(fd_); }

  // Watches `rel` (relative to the base) and, recursive, what is below it.
  Status add(const std::string& rel);
  // Reads what the kernel has; calls `emit(name, type)` for each change
  // (name relative to the base). False when the watched directory itself
  // went away.
  bool drain(const std::function<void(const std::string&, e2b::FsEventType)>& emit);

 private:
  const ConfinedRoot& root_;
  std::string base_;
  bool recursive_;
  UniqueFd fd_;
  std::map<int, std::string> dirs_;  // watch descriptor -> directory, relative to the base
};

// inotify instances are counted per user, and the daemon's user is root:
// fs.inotify.max_user_instances (128 by default) is shared with the host's
// own services. The facade's watches take a ticket from this budget, at
// most kPerSandbox per sandbox and kTotal in all, so no client can use up
// the host's instances.
class WatchBudget {
 public:
  static constexpr std::size_t kPerSandbox = 8;
  static constexpr std::size_t kTotal = 48;

  class Ticket {
   public:
    Ticket(WatchBudget* budget, std::string sandbox)
        : budget_(budget), sandbox_(std::move(sandbox)) {}
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    WatchBudget* budget_;
    std::string sandbox_;
  };

  // A ticket, or nullptr when the sandbox's share or the total is used up.
  std::unique_ptr<Ticket> take(const std::string& sandbox);

 private:
  std::mutex mu_;
  std::size_t total_ = 0;
  std::map<std::string, std::size_t> per_sandbox_;
};

}  // namespace corral::daemon
