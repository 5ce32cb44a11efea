#include "daemon/metered_object_store.h"

#include <cerrno>

namespace corral::daemon {

MeteredObjectStore::MeteredObjectStore(std::unique_ptr<objstore::ObjectStore> inner,
                                       MetricsRegistry& metrics)
    : inner_(std::move(inner)) {
  static constexpr const char* kNames[kOps] = {"put", "get", "head", "list", "delete"};
  // Registered at 0: an alert on the rate works before the first failure.
  for (int op = 0; op < kOps; ++op)
    errors_[op] = &metrics.counter("corral_object_store_errors_total",
                                   "Object store calls that failed, by operation",
                                   {{"op", kNames[op]}});
}

void MeteredObjectStore::count(Op op) { errors_[op]->inc(); }

template <typename T>
T MeteredObjectStore::counted_put(T result) {
  if (!result) {
    const Error& e = result.error();
    // The caller's own limits (objstore::kOverMaxSize) and arguments are
    // not the store's fault.
    const bool refused_by_caller = e.code == ErrorCode::kInvalidArgument ||
                                   (e.code == ErrorCode::kResourceExhausted &&
                                    e.sys_errno == objstore::kOverMaxSize);
    if (!refused_by_caller) count(kPut);
  }
  return result;
}

Result<objstore::ObjectInfo> MeteredObjectStore::put_fd(std::string_view key, int fd,
                                                        const objstore::PutOptions& options) {
  return counted_put(inner_->put_fd(key, fd, options));
}

Result<objstore::ObjectInfo> MeteredObjectStore::put_bytes(std::string_view key,
                                                           std::string_view bytes,
                                                           const objstore::PutOptions& options) {
  return counted_put(inner_->put_bytes(key, bytes, options));
}

// A pending put's failures count as a put's.
class MeteredObjectStore::MeteredPending final : public objstore::PendingPut {
 public:
  MeteredPending(MeteredObjectStore& store, std::unique_ptr<objstore::PendingPut> inner)
      : store_(store), inner_(std::move(inner)) {}
  Result<objstore::ObjectInfo> put_fd(int fd) override {
    return store_.counted_put(inner_->put_fd(fd));
  }

 private:
  MeteredObjectStore& store_;
  std::unique_ptr<objstore::PendingPut> inner_;
};

Result<std::unique_ptr<objstore::PendingPut>> MeteredObjectStore::begin_put(
    std::string_view key, const objstore::PutOptions& options) {
  auto inner = counted_put(inner_->begin_put(key, options));
  if (!inner) return tl::unexpected(inner.error());
  return std::unique_ptr<objstore::PendingPut>(new MeteredPending(*this, std::move(*inner)));
}

Result<objstore::ObjectInfo> MeteredObjectStore::get(std::string_view key,
                                                     const objstore::ObjectSink& sink) {
  bool sink_failed = false;
  auto got = inner_->get(key, [&](std::span<const char> chunk) -> Status {
    Status st = sink(chunk);
    if (!st) sink_failed = true;
    return st;
  });
  if (!got && !sink_failed && got.error().code != ErrorCode::kNotFound) count(kGet);
  return got;
}

Result<objstore::ObjectInfo> MeteredObjectStore::head(std::string_view key) {
  auto info = inner_->head(key);
  if (!info && info.error().code != ErrorCode::kNotFound) count(kHead);
  return info;
}

Status MeteredObjectStore::remove(std::string_view key) {
  Status st = inner_->remove(key);
  if (!st) count(kDelete);
  return st;
}

Result<std::vector<objstore::ObjectInfo>> MeteredObjectStore::list(std::string_view prefix) {
  auto listed = inner_->list(prefix);
  if (!listed) count(kList);
  return listed;
}

}  // namespace corral::daemon
