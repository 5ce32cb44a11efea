// An ObjectStore in memory for unit tests that need to make the store
// fail on purpose (a full disk, an unreachable service) at a chosen call:
// the real back-ends (src/objstore) are tested on their own and by the
// integration tests. Follows the interface's contract: whole or nothing,
// sha256 of the content, list in key order.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>

#include "base/sha256.h"
#include "objstore/object_store.h"

namespace corral::test {

class MemoryObjectStore : public objstore::ObjectStore {
 public:
  std::string_view kind() const override { return "memory"; }
  std::string describe() const override { return "memory (test)"; }

  // The next put whose key contains `needle` fails with `code` (and stores
  // nothing); empty needle: none.
  void fail_next_put(std::string needle, ErrorCode code = ErrorCode::kResourceExhausted) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_needle_ = std::move(needle);
    fail_code_ = code;
  }

  Result<objstore::ObjectInfo> put_fd(std::string_view key, int fd,
                                      const objstore::PutOptions& options) override {
    std::string bytes;
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) bytes.append(buf, static_cast<std::size_t>(n));
    if (n < 0) return errno_error("read");
    return put_bytes(key, bytes, options);
  }

  Result<objstore::ObjectInfo> put_bytes(std::string_view key, std::string_view bytes,
                                         const objstore::PutOptions& options) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fail_needle_.empty() && std::string(key).find(fail_needle_) != std::string::npos) {
      fail_needle_.clear();
      return make_error(fail_code_, "memory store: injected failure for " + std::string(key));
    }
    if (options.max_size && bytes.size() > *options.max_size)
      return make_error(ErrorCode::kResourceExhausted, "too large");
    objstore::ObjectInfo info;
    info.key = std::string(key);
    info.size = bytes.size();
    info.sha256 = sha256_hex(bytes);
    info.metadata = options.metadata;
    if (options.expected_sha256 && *options.expected_sha256 != info.sha256)
      return make_error(ErrorCode::kInvalidArgument, "sha256 mismatch");
    objects_[info.key] = {info, std::string(bytes)};
    return info;
  }

  Result<objstore::ObjectInfo> get(std::string_view key, const objstore::ObjectSink& sink) override {
    std::pair<objstore::ObjectInfo, std::string> o;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = objects_.find(std::string(key));
      if (it == objects_.end()) return make_error(ErrorCode::kNotFound, "no " + std::string(key));
      o = it->second;
    }
    CORRAL_TRY(sink(std::span<const char>(o.second.data(), o.second.size())));
    return o.first;
  }

  Result<objstore::ObjectInfo> head(std::string_view key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects_.find(std::string(key));
    if (it == objects_.end()) return make_error(ErrorCode::kNotFound, "no " + std::string(key));
    return it->second.first;
  }

  Status remove(std::string_view key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    objects_.erase(std::string(key));
    return ok();
  }

  Result<std::vector<objstore::ObjectInfo>> list(std::string_view prefix) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<objstore::ObjectInfo> out;
    for (const auto& [k, o] : objects_)
      if (k.compare(0, prefix.size(), prefix) == 0) out.push_back(o.first);
    return out;
  }

  std::size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return objects_.size();
  }
  std::string bytes(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects_.find(key);
    return it == objects_.end() ? std::string() : it->second.second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::pair<objstore::ObjectInfo, std::string>> objects_;
  std::string fail_needle_;
  ErrorCode fail_code_ = ErrorCode::kResourceExhausted;
};

}  // namespace corral::test
