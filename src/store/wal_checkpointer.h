// The state store's WAL checkpoints, moved off the commit path.
//
// SQLite checkpoints a WAL database from the connection whose commit took
// the WAL past wal_autocheckpoint pages, inside that commit, and a
// checkpoint fsyncs the database file. A task's inline input (up to
// serve.tasks.max_body) is one commit of hundreds of pages, so every few
// submits a request paid a checkpoint and its fsync: 12-17 ms on this
// project's test host against 2 ms for the commit itself (docs/performance.md
// "Tasks"). Here the store's connection never checkpoints
// (wal_autocheckpoint=0); its commit hook wakes this thread, which runs a
// PASSIVE checkpoint on a connection of its own: it copies what no reader
// still needs and never blocks a writer. What a commit survives is
// unchanged (ADR 0003): a checkpoint only moves committed pages.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "base/result.h"

namespace corral {

class WalCheckpointer {
 public:
  // How many WAL pages wake the thread (SQLite's default autocheckpoint),
  // and how often it runs anyway.
  static constexpr int kWakePages = 1000;
  static constexpr std::chrono::milliseconds kInterval{1000};

  WalCheckpointer() = default;
  ~WalCheckpointer();  // stop()
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // Opens a second connection to `path` and starts the thread; installs
  // the commit hook on `writer` (whose autocheckpoint it turns off).
  Status start(const std::string& path, sqlite3* writer);
  // Stops the thread and closes its connection; the writer's own close
  // then checkpoints what is left, as SQLite does for the last connection.
  void stop();

  // Checkpoints done and failed so far (for tests and a log line).
  std::uint64_t runs() const;
  std::uint64_t failures() const;

 private:
  static int on_commit(void* self, sqlite3*, const char*, int pages);
  void loop();

  sqlite3* handle_ = nullptr;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool due_ = false;
  std::uint64_t runs_ = 0, failures_ = 0;
};

}  // namespace corral
