// MeteredObjectStore: the daemon's object store (D5) with its failures
// counted, so that an operator sees a store going bad before the tasks
// and snapshots that need it fail (docs/operations.md):
//   corral_object_store_errors_total{op="put"|"get"|"head"|"list"|"delete"}
// Every ObjectStore call of the daemon (tasks, snapshots, downloads) goes
// through this wrapper; daemon_main.cc wraps the store it opened.
//
// Counted: a call that failed because of the store (unreachable, full,
// refusing, corrupted at rest). Not counted: answers that are not faults of
// the store: a missing key (kNotFound), a put refused by the caller's own
// PutOptions (over max_size, a sha256 other than expected_sha256, a bad
// key: kInvalidArgument), and a get stopped by the caller's sink (the
// sandbox's disk being full while an input is written, say).
#pragma once

#include <memory>

#include "daemon/metrics.h"
#include "objstore/object_store.h"

namespace corral::daemon {

class MeteredObjectStore : public objstore::ObjectStore {
 public:
  MeteredObjectStore(std::unique_ptr<objstore::ObjectStore> inner, MetricsRegistry& metrics);

  std::string_view kind() const override { return inner_->kind(); }
  std::string describe() const override { return inner_->describe(); }
  Result<objstore::ObjectInfo> put_fd(std::string_view key, int fd,
                                      const objstore::PutOptions& options) override;
  Result<objstore::ObjectInfo> put_bytes(std::string_view key, std::string_view bytes,
                                         const objstore::PutOptions& options) override;
  Result<std::unique_ptr<objstore::PendingPut>> begin_put(
      std::string_view key, const objstore::PutOptions& options) override;
  Result<objstore::ObjectInfo> get(std::string_view key, const objstore::ObjectSink& sink) override;
  Result<objstore::ObjectInfo> head(std::string_view key) override;
  Status remove(std::string_view key) override;
  Result<std::vector<objstore::ObjectInfo>> list(std::string_view prefix) override;

 private:
  class MeteredPending;
  enum Op { kPut, kGet, kHead, kList, kDelete, kOps };
  void count(Op op);
  template <typename T>
  T counted_put(T result);

  std::unique_ptr<objstore::ObjectStore> inner_;
  Counter* errors_[kOps];
};

}  // namespace corral::daemon
