#include "objstore/local_object_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <tuple>
#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/json_text.h"
#include "base/random.h"
#include "base/sha256.h"
#include "base/strings.h"
#include "objstore/object_checks.h"

namespace corral::objstore {
namespace {

constexpr const char* kTmpDir = "~tmp";
constexpr const char* kMetaSuffix = "~meta";
constexpr std::size_t kChunk = 1024 * 1024;  // fewer syscalls: ~2x faster puts than 256 KiB
constexpr std::size_t kDirectAlign = 4096;  // a multiple of any block size a direct write needs
constexpr off_t kMaxMetaFile = 64 * 1024;
// A key has at most 256 segments (512 bytes); deeper trees are not ours.
constexpr int kMaxDepth = 260;

std::string meta_name(const std::string& leaf) { return leaf + kMetaSuffix; }
std::string data_name(const std::string& leaf, const std::string& sha256) {
  return leaf + "~" + sha256;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string random_name(std::string_view what) {
  std::uint64_t r = random_u64();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(what);
  out += '-';
  for (int i = 0; i < 16; ++i) out += kHex[(r >> (i * 4)) & 0xf];
  return out;
}

// ENOSPC/EDQUOT are the store being full, the rest the host's trouble.
tl::unexpected<Error> write_error(std::string_view call, int err) {
  auto e = errno_error(call, err);
  if (err == ENOSPC || err == EDQUOT) e.value().code = ErrorCode::kResourceExhausted;
  return e;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A put's content from `fd`, from its offset to its end.
LocalObjectStore::ChunkSource read_from(int fd) {
  return [fd](char* buf, std::size_t capacity) -> Result<std::size_t> {
    for (;;) {
      ssize_t n = ::read(fd, buf, capacity);
      if (n >= 0) return static_cast<std::size_t>(n);
      if (errno != EINTR) return errno_error("read(source fd)");
    }
  };
}

// Writes a put's content chunk by chunk from one aligned buffer. The first
// chunk goes through the page cache; the chunks after it, when the file
// system takes O_DIRECT, go around it: an object this large is written once
// and read rarely (a download, a replay), so caching it would only evict
// what sandboxes start from, and on a guest whose fresh page-cache pages
// are slow to touch it halves the time of a large put (docs/performance.md
// "Tasks"). The last, partial chunk goes through the cache again (a direct
// write's length must be a multiple of the block size).
class ContentWriter {
 public:
  explicit ContentWriter(int fd)
      : fd_(fd), buf_(static_cast<char*>(std::aligned_alloc(kDirectAlign, kChunk))) {}
  ~ContentWriter() { std::free(buf_); }
  ContentWriter(const ContentWriter&) = delete;
  ContentWriter& operator=(const ContentWriter&) = delete;

  char* buffer() const { return buf_; }

  // Writes the first `n` bytes of the buffer; returns 0 or an errno.
  int write(std::size_t n) {
    const std::string_view bytes(buf_, n);
    const bool whole = n == kChunk;
    const bool first = chunks_++ == 0;
    if (whole && !first && !direct_tried_) {
      direct_tried_ = true;
      direct_ = set_direct(true);  // false: this file system caches it all
    }
    if (!whole && direct_) {
      if (!set_direct(false)) return errno;
      direct_ = false;
    }
    if (direct_) {
      if (write_all(fd_, bytes)) return 0;
      // Refused before anything was written (a device whose blocks are
      // larger than the alignment, say): the rest goes through the cache.
      if (errno != EINVAL || !set_direct(false)) return errno;
      direct_ = false;
    }
    return write_all(fd_, bytes) ? 0 : errno;
  }

 private:
  bool set_direct(bool on) {
    int flags = fcntl(fd_, F_GETFL);
    if (flags < 0) return false;
    flags = on ? (flags | O_DIRECT) : (flags & ~O_DIRECT);
    return fcntl(fd_, F_SETFL, flags) == 0;
  }

  int fd_;
  char* buf_;
  std::size_t chunks_ = 0;
  bool direct_tried_ = false;
  bool direct_ = false;
};

// Hashes a put's chunks on a helper thread, started at the second chunk,
// while the put writes them: a large put then takes about as long as the
// slower of hashing and writing, not their sum.
class OverlappedHash {
 public:
  explicit OverlappedHash(Sha256& hasher) : hasher_(hasher) {}
  ~OverlappedHash() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  OverlappedHash(const OverlappedHash&) = delete;
  OverlappedHash& operator=(const OverlappedHash&) = delete;

  void start(const char* data, std::size_t size) {
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    {
      std::lock_guard lock(mu_);
      job_ = std::string_view(data, size);
      busy_ = true;
    }
    cv_.notify_all();
  }
  // Until the chunk last started is hashed (at once if none is).
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !busy_; });
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return busy_ || stopping_; });
      if (!busy_) return;
      const std::string_view job = job_;
      lock.unlock();
      hasher_.update(job.data(), job.size());
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  Sha256& hasher_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string_view job_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<LocalObjectStore>> LocalObjectStore::open(const std::string& root,
                                                                 bool power_loss_durable) {
  if (root.empty() || root.front() != '/') {
    return make_error(ErrorCode::kInvalidArgument,
                      "object store path " + quote_for_message(root) + " is not absolute");
  }
  CORRAL_TRY_CTX(mkdir_p(root, 0700), "creating the local object store");
  auto root_fd = open_dir(root);
  if (!root_fd) return tl::unexpected(root_fd.error().wrap("opening the local object store"));
  if (mkdirat(root_fd->get(), kTmpDir, 0700) != 0 && errno != EEXIST) {
    return errno_error("mkdir(" + root + "/" + kTmpDir + ")");
  }
  auto tmp_fd = open_dir_at(root_fd->get(), kTmpDir, root + "/" + kTmpDir);
  if (!tmp_fd) return tl::unexpected(tmp_fd.error().wrap("opening the local object store"));
  // Nothing else writes here: what is left is from puts a crash cut short.
  auto names = read_dir_names(tmp_fd->get(), root + "/" + kTmpDir);
  if (!names) return tl::unexpected(names.error());
  for (const auto& name : *names) {
    CORRAL_TRY(remove_tree_at(tmp_fd->get(), name, root + "/" + kTmpDir + "/" + name));
  }
  return std::unique_ptr<LocalObjectStore>(
      new LocalObjectStore(root, std::move(*root_fd), std::move(*tmp_fd), power_loss_durable));
}

LocalObjectStore::LocalObjectStore(std::string root, UniqueFd root_fd, UniqueFd tmp_fd, bool sync)
    : root_(std::move(root)),
      root_fd_(std::move(root_fd)),
      tmp_fd_(std::move(tmp_fd)),
      sync_(sync) {}

int LocalObjectStore::durable_sync(int fd) const { return sync_ ? fsync(fd) : 0; }

std::string LocalObjectStore::shown(std::string_view key) const {
  return "object " + std::string(key) + " in local store " + root_;
}

std::mutex& LocalObjectStore::lock_for(std::string_view key) {
  return locks_[std::hash<std::string_view>{}(key) % locks_.size()];
}

int LocalObjectStore::leaf_dir(const KeyPath& path) const {
  return path.dirs.empty() ? root_fd_.get() : path.dirs.back().get();
}

Result<LocalObjectStore::KeyPath> LocalObjectStore::open_key_path(std::string_view key,
                                                                  bool create) const {
  KeyPath path;
  std::size_t start = 0;
  for (std::size_t slash = key.find('/'); slash != std::string_view::npos;
       slash = key.find('/', start)) {
    path.segments.emplace_back(key.substr(start, slash - start));
    start = slash + 1;
  }
  path.leaf = std::string(key.substr(start));
  std::string so_far = root_;
  for (const auto& segment : path.segments) {
    int parent = path.dirs.empty() ? root_fd_.get() : path.dirs.back().get();
    so_far += "/" + segment;
    int fd = -1;
    // A remove of another key prunes directories it leaves empty: one may
    // vanish between its mkdir and its open here. Make it again.
    for (int attempt = 0; attempt < 8; ++attempt) {
      if (create) {
        if (mkdirat(parent, segment.c_str(), 0700) == 0) {
          durable_sync(parent);  // the new directory's name is durable before a put commits under it
        } else if (errno != EEXIST) {
          return write_error("mkdir(" + so_far + ")", errno);
        }
      }
      fd = openat(parent, segment.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0 || errno != ENOENT || !create) break;
    }
    if (fd < 0) {
      int err = errno;
      if (err == ENOENT) {
        return make_error(ErrorCode::kNotFound, shown(key) + " not found");
      }
      if (err == ELOOP || err == ENOTDIR) {
        // A symlink or a file where the store has a directory: never followed.
        return make_error(ErrorCode::kPermissionDenied,
                          shown(key) + ": " + so_far + " is not a directory of the store",
                          "something other than corral wrote into the store; remove it");
      }
      return errno_error("open(" + so_far + ")", err);
    }
    path.dirs.emplace_back(fd);
  }
  return path;
}

Result<ObjectInfo> LocalObjectStore::read_meta(int dirfd, const std::string& leaf,
                                               std::string_view key) const {
  std::string name = meta_name(leaf);
  UniqueFd fd(openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    int err = errno;
    if (err == ENOENT) return make_error(ErrorCode::kNotFound, shown(key) + " not found");
    if (err == ELOOP) {
      return make_error(ErrorCode::kPermissionDenied, shown(key) + ": its meta file is a symlink",
                        "something other than corral wrote into the store; remove it");
    }
    return errno_error("open(" + shown(key) + " meta)", err);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return errno_error("fstat(" + shown(key) + " meta)");
  if (!S_ISREG(st.st_mode) || st.st_size > kMaxMetaFile) {
    return make_error(ErrorCode::kInvalidArgument,
                      shown(key) + " is corrupted: its meta file is not a small regular file");
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = pread(fd.get(), text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read(" + shown(key) + " meta)");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  auto corrupted = [&](std::string_view why) {
    return make_error(ErrorCode::kInvalidArgument,
                      shown(key) + " is corrupted: its meta file " + std::string(why));
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return corrupted("is not a JSON object");
  auto k = j.find("key");
  auto size = j.find("size");
  auto sha = j.find("sha256");
  auto modified = j.find("modified_ms");
  auto metadata = j.find("metadata");
  if (k == j.end() || !k->is_string() || k->get<std::string>() != key) {
    return corrupted("names another key");
  }
  if (size == j.end() || !size->is_number_unsigned()) return corrupted("has no size");
  if (sha == j.end() || !sha->is_string()) return corrupted("has no sha256");
  if (modified == j.end() || !modified->is_number_integer()) return corrupted("has no time");
  if (metadata == j.end() || !metadata->is_object()) return corrupted("has no metadata");
  ObjectInfo info;
  info.key = std::string(key);
  info.size = size->get<std::uint64_t>();
  auto digest = normalize_sha256(sha->get<std::string>());
  if (!digest || *digest != sha->get<std::string>()) return corrupted("has a bad sha256");
  info.sha256 = *digest;
  info.modified_ms = modified->get<std::int64_t>();
  for (const auto& [name, value] : metadata->items()) {
    if (!value.is_string()) return corrupted("has a metadata value that is not a string");
    info.metadata[name] = value.get<std::string>();
  }
  if (!check_metadata(info.metadata)) return corrupted("has invalid metadata");
  return info;
}

Result<ObjectInfo> LocalObjectStore::put_fd(std::string_view key, int fd,
                                            const PutOptions& options) {
  return put_stream(key, read_from(fd), options);
}

Result<ObjectInfo> LocalObjectStore::put_bytes(std::string_view key, std::string_view bytes,
                                               const PutOptions& options) {
  std::size_t offset = 0;
  return put_stream(
      key,
      [&](char* buf, std::size_t capacity) -> Result<std::size_t> {
        std::size_t n = std::min(capacity, bytes.size() - offset);
        std::copy_n(bytes.data() + offset, n, buf);
        offset += n;
        return n;
      },
      options);
}

class LocalObjectStore::Pending final : public PendingPut {
 public:
  Pending(LocalObjectStore& store, std::string key, PutOptions options,
          std::optional<std::string> expected)
      : store_(store),
        key_(std::move(key)),
        options_(std::move(options)),
        expected_(std::move(expected)) {}
  // Uncommitted: its temp files go, and the directories begin_put made if
  // nothing else has come to live in them.
  ~Pending() override {
    if (committed_) return;
    for (const std::string& name : {data_tmp_, meta_tmp_})
      if (!name.empty()) unlinkat(store_.tmp_fd_.get(), name.c_str(), 0);
    if (made_dirs_)
      if (auto path = store_.open_key_path(key_, /*create=*/false); path)
        store_.prune_empty_dirs(*path);
  }

  Result<ObjectInfo> put_fd(int fd) override {
    if (used_)
      return make_error(ErrorCode::kInvalidArgument,
                        "the pending put of " + store_.shown(key_) + " was already used");
    return store_.finish_put(*this, read_from(fd));
  }

 private:
  friend class LocalObjectStore;
  LocalObjectStore& store_;
  std::string key_;
  PutOptions options_;
  std::optional<std::string> expected_;
  std::string data_tmp_, meta_tmp_;  // in ~tmp
  UniqueFd data_, meta_;
  bool made_dirs_ = false;
  bool used_ = false;
  bool committed_ = false;
};

Result<std::unique_ptr<PendingPut>> LocalObjectStore::begin_put(std::string_view key,
                                                                const PutOptions& options) {
  auto put = start_put(key, options, /*make_dirs=*/true);
  if (!put) return tl::unexpected(put.error());
  return std::unique_ptr<PendingPut>(std::move(*put));
}

Result<ObjectInfo> LocalObjectStore::put_stream(std::string_view key, const ChunkSource& source,
                                                const PutOptions& options) {
  auto put = start_put(key, options, /*make_dirs=*/false);
  if (!put) return tl::unexpected(put.error());
  return finish_put(**put, source);
}

Result<std::unique_ptr<LocalObjectStore::Pending>> LocalObjectStore::start_put(
    std::string_view key, const PutOptions& options, bool make_dirs) {
  CORRAL_TRY(check_key(key));
  auto expected = check_put_options(options);
  if (!expected) return tl::unexpected(expected.error().wrap("putting " + shown(key)));
  auto put = std::make_unique<Pending>(*this, std::string(key), options, std::move(*expected));
  for (auto [name, fd, what] : {std::tuple{&put->data_tmp_, &put->data_, "data"},
                                std::tuple{&put->meta_tmp_, &put->meta_, "meta"}}) {
    std::string tmp = random_name(what);
    fd->reset(openat(tmp_fd_.get(), tmp.c_str(),
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!*fd) return write_error("create(" + root_ + "/" + kTmpDir + "/" + tmp + ")", errno);
    *name = std::move(tmp);
  }
  if (make_dirs) {
    auto path = open_key_path(key, /*create=*/true);
    if (!path) return tl::unexpected(path.error().wrap("putting " + shown(key)));
    put->made_dirs_ = true;
  }
  return put;
}

Result<ObjectInfo> LocalObjectStore::finish_put(Pending& put, const ChunkSource& source) {
  put.used_ = true;
  const std::string& key = put.key_;
  const PutOptions& options = put.options_;
  // The content, hashed as it is written.
  Sha256 hasher;
  std::uint64_t size = 0;
  ContentWriter writer(put.data_.get());
  OverlappedHash overlapped(hasher);  // destroyed first: its thread stops reading the buffer
  if (!writer.buffer())
    return errno_error("putting " + shown(key) + ": allocating a buffer", ENOMEM);
  for (bool end = false; !end;) {
    // Whole chunks until the last: every write but the last starts and
    // ends on a chunk boundary, as a write around the page cache must.
    std::size_t got = 0;
    while (got < kChunk) {
      auto n = source(writer.buffer() + got, kChunk - got);
      if (!n) return tl::unexpected(n.error().wrap("putting " + shown(key)));
      if (*n == 0) {
        end = true;
        break;
      }
      got += *n;
    }
    if (got == 0) break;
    size += got;
    if (options.max_size && size > *options.max_size) {
      return over_max_size("putting " + shown(key) + ": the content is over its limit of " +
                            std::to_string(*options.max_size) + " bytes; nothing stored");
    }
    // The first chunk is hashed here; the chunks after it on a helper
    // thread while they are written (both only read the buffer).
    if (size == got)
      hasher.update(writer.buffer(), got);
    else
      overlapped.start(writer.buffer(), got);
    const int err = writer.write(got);
    overlapped.wait();
    if (err != 0) return write_error("putting " + shown(key) + ": write", err);
  }
  std::string sha256 = Sha256::hex(hasher.final());
  if (put.expected_ && *put.expected_ != sha256) {
    return make_error(ErrorCode::kInvalidArgument,
                      "putting " + shown(key) + ": the content's sha256 is " + sha256 +
                          ", not the expected " + *put.expected_ + "; nothing stored");
  }
  if (durable_sync(put.data_.get()) != 0)
    return write_error("putting " + shown(key) + ": fsync", errno);
  put.data_.reset();

  ObjectInfo info;
  info.key = key;
  info.size = size;
  info.sha256 = sha256;
  info.modified_ms = now_ms();
  info.metadata = options.metadata;
  nlohmann::json meta = {{"key", info.key},
                         {"size", info.size},
                         {"sha256", info.sha256},
                         {"modified_ms", info.modified_ms},
                         {"metadata", info.metadata}};
  if (!write_all(put.meta_.get(), json_text(meta)) || durable_sync(put.meta_.get()) != 0) {
    return write_error("putting " + shown(key) + ": write meta", errno);
  }
  put.meta_.reset();
  CORRAL_TRY(commit(key, put.data_tmp_, put.meta_tmp_, sha256));
  put.committed_ = true;
  return info;
}

Status LocalObjectStore::commit(std::string_view key, const std::string& data_tmp,
                                const std::string& meta_tmp, const std::string& sha256) {
  std::lock_guard<std::mutex> lock(lock_for(key));
  // A remove of another key may prune a directory of ours between opening
  // and renaming into it (it was empty then): open again.
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto path = open_key_path(key, /*create=*/true);
    if (!path && path.error().code == ErrorCode::kNotFound) continue;
    if (!path) return tl::unexpected(path.error().wrap("putting " + shown(key)));
    int dir = leaf_dir(*path);
    auto old = read_meta(dir, path->leaf, key);
    std::string data = data_name(path->leaf, sha256);
    if (renameat(tmp_fd_.get(), data_tmp.c_str(), dir, data.c_str()) != 0) {
      if (errno == ENOENT) continue;
      return write_error("putting " + shown(key) + ": rename", errno);
    }
    if (renameat(tmp_fd_.get(), meta_tmp.c_str(), dir, meta_name(path->leaf).c_str()) != 0) {
      int err = errno;
      if (!old || old->sha256 != sha256) unlinkat(dir, data.c_str(), 0);
      return write_error("putting " + shown(key) + ": rename meta", err);
    }
    durable_sync(dir);
    if (old && old->sha256 != sha256) {
      unlinkat(dir, data_name(path->leaf, old->sha256).c_str(), 0);
    }
    return ok();
  }
  return make_error(ErrorCode::kUnavailable,
                    "putting " + shown(key) + ": its directory kept disappearing");
}

Result<ObjectInfo> LocalObjectStore::get(std::string_view key, const ObjectSink& sink) {
  CORRAL_TRY(check_key(key));
  UniqueFd in;
  ObjectInfo info;
  // A put that replaces the object deletes the content the old meta named:
  // read the meta again and take the new one.
  for (int attempt = 0; attempt < 5 && !in; ++attempt) {
    auto path = open_key_path(key, /*create=*/false);
    if (!path) return tl::unexpected(path.error());
    auto meta = read_meta(leaf_dir(*path), path->leaf, key);
    if (!meta) return tl::unexpected(meta.error());
    info = std::move(*meta);
    in.reset(openat(leaf_dir(*path), data_name(path->leaf, info.sha256).c_str(),
                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!in && errno != ENOENT) return errno_error("open(" + shown(key) + ")");
  }
  if (!in) {
    return make_error(ErrorCode::kInvalidArgument,
                      shown(key) + " is corrupted: its content file is missing");
  }
  struct stat st {};
  if (fstat(in.get(), &st) != 0) return errno_error("fstat(" + shown(key) + ")");
  if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != info.size) {
    return make_error(ErrorCode::kInvalidArgument,
                      shown(key) + " is corrupted: its content is not the size recorded at put");
  }
  Sha256 hasher;
  std::vector<char> buf(kChunk);
  std::uint64_t delivered = 0;
  for (;;) {
    ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read(" + shown(key) + ")");
    if (n == 0) break;
    hasher.update(buf.data(), static_cast<std::size_t>(n));
    delivered += static_cast<std::uint64_t>(n);
    CORRAL_TRY(sink(std::span<const char>(buf.data(), static_cast<std::size_t>(n))));
  }
  std::string sha256 = Sha256::hex(hasher.final());
  if (sha256 != info.sha256 || delivered != info.size) {
    return make_error(ErrorCode::kInvalidArgument,
                      shown(key) + " is corrupted: its content's sha256 is " + sha256 +
                          ", not the " + info.sha256 + " recorded at put");
  }
  return info;
}

Result<ObjectInfo> LocalObjectStore::head(std::string_view key) {
  CORRAL_TRY(check_key(key));
  auto path = open_key_path(key, /*create=*/false);
  if (!path) return tl::unexpected(path.error());
  return read_meta(leaf_dir(*path), path->leaf, key);
}

Status LocalObjectStore::remove(std::string_view key) {
  CORRAL_TRY(check_key(key));
  std::lock_guard<std::mutex> lock(lock_for(key));
  auto path = open_key_path(key, /*create=*/false);
  if (!path && path.error().code == ErrorCode::kNotFound) return ok();
  if (!path) return tl::unexpected(path.error().wrap("removing"));
  int dir = leaf_dir(*path);
  auto meta = read_meta(dir, path->leaf, key);
  if (!meta && meta.error().code == ErrorCode::kNotFound) return ok();
  if (!meta) return tl::unexpected(meta.error().wrap("removing"));
  if (unlinkat(dir, meta_name(path->leaf).c_str(), 0) != 0 && errno != ENOENT) {
    return errno_error("removing " + shown(key));
  }
  unlinkat(dir, data_name(path->leaf, meta->sha256).c_str(), 0);
  durable_sync(dir);
  prune_empty_dirs(*path);
  return ok();
}

void LocalObjectStore::prune_empty_dirs(KeyPath& path) const {
  // rmdir refuses a directory that is not empty, which ends the climb.
  while (!path.segments.empty()) {
    path.dirs.pop_back();
    int parent = path.dirs.empty() ? root_fd_.get() : path.dirs.back().get();
    if (unlinkat(parent, path.segments.back().c_str(), AT_REMOVEDIR) != 0) return;
    path.segments.pop_back();
  }
}

Result<std::vector<ObjectInfo>> LocalObjectStore::list(std::string_view prefix) {
  CORRAL_TRY(check_prefix(prefix));
  std::vector<ObjectInfo> out;
  // Open the prefix's complete segments; the walk filters on the rest.
  std::string_view dir_part = prefix.substr(0, prefix.rfind('/') + 1);
  UniqueFd start;
  int dirfd = root_fd_.get();
  if (!dir_part.empty()) {
    auto path = open_key_path(std::string(dir_part) + "x", /*create=*/false);
    if (!path && path.error().code == ErrorCode::kNotFound) return out;
    if (!path) return tl::unexpected(path.error().wrap("listing " + std::string(prefix)));
    start = std::move(path->dirs.back());
    dirfd = start.get();
  }
  CORRAL_TRY(walk(dirfd, std::string(dir_part), prefix, 0, &out));
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

Status LocalObjectStore::walk(int dirfd, const std::string& key_so_far, std::string_view prefix,
                              int depth, std::vector<ObjectInfo>* out) const {
  if (depth > kMaxDepth) {
    return make_error(ErrorCode::kResourceExhausted,
                      "listing local store " + root_ + ": directories nested too deep");
  }
  auto names = read_dir_names(dirfd, root_ + "/" + key_so_far);
  if (!names) return tl::unexpected(names.error());
  for (const auto& name : *names) {
    if (ends_with(name, kMetaSuffix)) {
      std::string key = key_so_far + name.substr(0, name.size() - std::strlen(kMetaSuffix));
      if (!valid_object_key(key) || key.compare(0, prefix.size(), prefix) != 0) continue;
      auto info = read_meta(dirfd, key.substr(key_so_far.size()), key);
      if (!info && info.error().code == ErrorCode::kNotFound) continue;  // removed meanwhile
      if (!info) return tl::unexpected(info.error().wrap("listing"));
      out->push_back(std::move(*info));
      continue;
    }
    if (name.find('~') != std::string::npos) continue;  // content and temp files
    std::string sub = key_so_far + name + "/";
    std::size_t common = std::min(sub.size(), prefix.size());
    if (sub.compare(0, common, prefix.substr(0, common)) != 0) continue;
    UniqueFd child(openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!child) {
      if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) continue;  // not a store dir
      return errno_error("open(" + root_ + "/" + sub + ")");
    }
    CORRAL_TRY(walk(child.get(), sub, prefix, depth + 1, out));
  }
  return ok();
}

}  // namespace corral::objstore
