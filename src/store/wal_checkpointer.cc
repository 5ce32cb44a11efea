// WalCheckpointer (wal_checkpointer.h).
#include "store/wal_checkpointer.h"

#include <cstdio>

namespace corral {

WalCheckpointer::~WalCheckpointer() { stop(); }

Status WalCheckpointer::start(const std::string& path, sqlite3* writer) {
  int rc = sqlite3_open_v2(path.c_str(), &handle_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string message = "opening the checkpoint connection to " + path + ": " +
                          (handle_ != nullptr ? sqlite3_errmsg(handle_) : sqlite3_errstr(rc));
    sqlite3_close_v2(handle_);
    handle_ = nullptr;
    return make_error(ErrorCode::kSystem, message);
  }
  // A new connection learns that the file is in WAL mode only once it
  // reads it; until then a checkpoint is a no-op.
  rc = sqlite3_exec(handle_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = "the checkpoint connection to " + path + ": journal_mode: " +
                          sqlite3_errmsg(handle_);
    sqlite3_close_v2(handle_);
    handle_ = nullptr;
    return make_error(ErrorCode::kSystem, message);
  }
  // The writer never checkpoints inside a commit again; its commits wake
  // this thread instead (sqlite3_wal_hook replaces the autocheckpoint hook).
  sqlite3_wal_autocheckpoint(writer, 0);
  sqlite3_wal_hook(writer, &WalCheckpointer::on_commit, this);
  thread_ = std::thread([this] { loop(); });
  return ok();
}

void WalCheckpointer::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (handle_ != nullptr) sqlite3_close_v2(handle_);
  handle_ = nullptr;
}

std::uint64_t WalCheckpointer::runs() const {
  std::lock_guard lock(mu_);
  return runs_;
}

std::uint64_t WalCheckpointer::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

// Called by SQLite on the writer's thread after each commit, with the
// WAL's size in pages: only a flag and a notify, never I/O.
int WalCheckpointer::on_commit(void* self, sqlite3*, const char*, int pages) {
  if (pages < kWakePages) return SQLITE_OK;
  auto* c = static_cast<WalCheckpointer*>(self);
  {
    std::lock_guard lock(c->mu_);
    c->due_ = true;
  }
  c->cv_.notify_one();
  return SQLITE_OK;
}

void WalCheckpointer::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, kInterval, [&] { return stop_ || due_; });
    if (stop_) return;
    due_ = false;
    lock.unlock();
    int wal_pages = 0, copied = 0;
    const int rc = sqlite3_wal_checkpoint_v2(handle_, "main", SQLITE_CHECKPOINT_PASSIVE,
                                             &wal_pages, &copied);
    lock.lock();
    if (rc == SQLITE_OK || rc == SQLITE_BUSY) {
      ++runs_;
    } else if (failures_++ == 0) {
      // The WAL keeps every commit until a checkpoint succeeds: nothing is
      // lost, the file grows. Said once, with what SQLite said.
      std::fprintf(stderr, "corral: state store checkpoint failed: %s (the WAL file grows until one "
                           "succeeds; check the data dir's disk)\n",
                   sqlite3_errstr(rc));
    }
  }
}

}  // namespace corral
