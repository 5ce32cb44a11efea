// LocalObjectStore: the embedded object store, a directory under the data
// dir (default <data_dir>/objects; docs/config.md "object_store", ADR 0009).
//
// Layout: a key's segments are directories, and its last segment names two
// files in the last of them: "<leaf>~meta" (JSON: size, sha256, modified
// time, user metadata) and "<leaf>~<sha256>" (the content). '~' is outside
// the key alphabet, so these names never collide with a key's directories
// ("a" and "a/b" can both exist). "~tmp/" holds puts under way.
//
// A put streams into ~tmp (hashing as it writes), fsyncs (power-loss
// durability only: see open), renames the
// content into place and then the meta file over the old one: the meta file
// is the commit point, so a reader sees the old object or the new one,
// whole, and a put that fails or is killed leaves the old object. Every
// directory and file is opened one name at a time with O_NOFOLLOW, so a
// symlink planted inside the store is never followed out of it.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "objstore/object_store.h"

namespace corral::objstore {

class LocalObjectStore final : public ObjectStore {
 public:
  // Opens the store at `root`, creating it (mode 0700, parents too) if
  // needed, and removes the temp files of puts a crash interrupted.
  // `power_loss_durable`: a put or remove fsyncs its files and directories
  // before it returns, so it survives a power loss; otherwise it survives a
  // crash or kill -9 of the process (renames are atomic, the page cache
  // keeps the bytes), the daemon's default durability (serve.durability,
  // ADR 0003), and costs no fsync.
  static Result<std::unique_ptr<LocalObjectStore>> open(const std::string& root,
                                                        bool power_loss_durable = true);

  std::string_view kind() const override { return "local"; }
  std::string describe() const override { return root_; }

  Result<ObjectInfo> put_fd(std::string_view key, int fd, const PutOptions& options) override;
  Result<ObjectInfo> put_bytes(std::string_view key, std::string_view bytes,
                               const PutOptions& options) override;
  // Makes the key's directories and the put's temp files now.
  Result<std::unique_ptr<PendingPut>> begin_put(std::string_view key,
                                                const PutOptions& options) override;
  Result<ObjectInfo> get(std::string_view key, const ObjectSink& sink) override;
  Result<ObjectInfo> head(std::string_view key) override;
  Status remove(std::string_view key) override;
  Result<std::vector<ObjectInfo>> list(std::string_view prefix) override;

  // Reads up to `capacity` bytes into `buf`; 0 at the end.
  using ChunkSource = std::function<Result<std::size_t>(char* buf, std::size_t capacity)>;

 private:
  // The directories of a key, opened from the root down, and its leaf name.
  struct KeyPath {
    std::vector<std::string> segments;
    std::vector<UniqueFd> dirs;  // dirs[i] is segments[i]
    std::string leaf;
  };

  LocalObjectStore(std::string root, UniqueFd root_fd, UniqueFd tmp_fd, bool sync);
  // fsync(fd) when the store is power-loss durable; 0 (done) otherwise.
  int durable_sync(int fd) const;

  // A put between its temp files' creation and its commit.
  class Pending;
  Result<ObjectInfo> put_stream(std::string_view key, const ChunkSource& source,
                                const PutOptions& options);
  Result<std::unique_ptr<Pending>> start_put(std::string_view key, const PutOptions& options,
                                             bool make_dirs);
  Result<ObjectInfo> finish_put(Pending& put, const ChunkSource& source);
  Result<KeyPath> open_key_path(std::string_view key, bool create) const;
  int leaf_dir(const KeyPath& path) const;
  Result<ObjectInfo> read_meta(int dirfd, const std::string& leaf, std::string_view key) const;
  Status commit(std::string_view key, const std::string& data_tmp, const std::string& meta_tmp,
                const std::string& sha256);
  void prune_empty_dirs(KeyPath& path) const;
  Status walk(int dirfd, const std::string& key_so_far, std::string_view prefix, int depth,
              std::vector<ObjectInfo>* out) const;
  std::mutex& lock_for(std::string_view key);
  std::string shown(std::string_view key) const;

  std::string root_;
  UniqueFd root_fd_;
  UniqueFd tmp_fd_;
  bool sync_ = true;
  // Puts and removes of one key are serialized (striped by the key's hash):
  // replacing the meta file and deleting the content it replaced is one step.
  std::array<std::mutex, 64> locks_;
};

}  // namespace corral::objstore
