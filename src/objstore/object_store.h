// ObjectStore: where task inputs, outputs and failure snapshots live
// (REQUIREMENTS.md D5: storage by access pattern). Two back-ends behind this
// one interface: a directory under the daemon's data dir (the embedded
// default, local_object_store.h) and any S3-compatible service
// (s3_object_store.h, SigV4 by libcurl). docs/config.md "object_store".
//
// Keys are 1..512 bytes of [A-Za-z0-9._/-], with no empty, "." or ".."
// segment and no leading or trailing '/' (valid_object_key): a key is never
// a path a client can steer out of the store.
//
// Errors: kNotFound for a missing key, kInvalidArgument for a bad key or a
// sha256 that does not match, kUnavailable when the store cannot be reached
// or answers with a server error (a task then fails with reason
// storage_unavailable and may be retried), kResourceExhausted when it is
// full, or with sys_errno kOverMaxSize when a put's content is over its
// PutOptions::max_size (the caller's limit, not a full store). Messages name
// the key and the back-end, never a credential.
//
// Implementations are safe to call from many threads at once.
#pragma once

#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::objstore {

struct ObjectInfo {
  std::string key;
  std::uint64_t size = 0;
  std::string sha256;          // lowercase hex of the content
  std::int64_t modified_ms = 0;  // unix ms, as the back-end reports it
  // Small user metadata stored with the object (x-amz-meta-* on S3; a side
  // file locally): names [a-z0-9-]{1,64} except "sha256" (the store records
  // the content digest under it), values printable ASCII, 2 KiB in all.
  std::map<std::string, std::string> metadata;
};

// Error::sys_errno of a put refused for PutOptions::max_size.
inline constexpr int kOverMaxSize = EFBIG;

struct PutOptions {
  // Verified against the content: a mismatch stores nothing (kInvalidArgument).
  std::optional<std::string> expected_sha256;
  std::map<std::string, std::string> metadata;
  // Refuse (kResourceExhausted, nothing stored) content longer than this.
  std::optional<std::uint64_t> max_size;
};

// Receives an object's bytes in order; an error stops the transfer and is
// returned by get().
using ObjectSink = std::function<Status(std::span<const char>)>;

// A put whose bytes come later (ObjectStore::begin_put). Destroyed before
// its put_fd, or after a failed one, it stores nothing and leaves nothing
// behind. It must not outlive its store.
class PendingPut {
 public:
  virtual ~PendingPut() = default;
  // Stores what `fd` holds from its current offset to its end, as
  // ObjectStore::put_fd would with the key and options given to begin_put.
  // Once: a second call is kInvalidArgument.
  virtual Result<ObjectInfo> put_fd(int fd) = 0;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // "local" or "s3", and where ("/var/lib/corral/objects",
  // "http://127.0.0.1:9000/bucket/prefix"): for logs, metrics and errors.
  virtual std::string_view kind() const = 0;
  virtual std::string describe() const = 0;

  // Stores what `fd` holds from its current offset to its end under `key`,
  // as a whole or not at all (a reader sees the old object or the new one,
  // never a part). Returns the stored object's size and sha256.
  virtual Result<ObjectInfo> put_fd(std::string_view key, int fd, const PutOptions& options) = 0;
  virtual Result<ObjectInfo> put_bytes(std::string_view key, std::string_view bytes,
                                       const PutOptions& options) = 0;
  // A put of `key` whose content does not exist yet (a task's output while
  // its command runs): the back-end does now what it can without the bytes
  // (the local store makes the key's directories and its temp files), so
  // that the put itself is only the copy. The default does it all in the
  // PendingPut's put_fd. A bad key or options are refused here.
  virtual Result<std::unique_ptr<PendingPut>> begin_put(std::string_view key,
                                                        const PutOptions& options);
  // Streams the object to `sink`; the returned info's sha256 is that of the
  // bytes delivered (and kInvalidArgument when it differs from the one
  // recorded at put: the object was corrupted at rest).
  virtual Result<ObjectInfo> get(std::string_view key, const ObjectSink& sink) = 0;
  // Size, sha256 and metadata without the content; kNotFound if absent.
  virtual Result<ObjectInfo> head(std::string_view key) = 0;
  // Removes `key`; a key that is already absent is not an error.
  virtual Status remove(std::string_view key) = 0;
  // Every object whose key starts with `prefix` (which must be empty or a
  // valid key prefix), in key order.
  virtual Result<std::vector<ObjectInfo>> list(std::string_view prefix) = 0;
};

// 1..512 bytes of [A-Za-z0-9._/-], no empty, "." or ".." segment, no
// leading or trailing '/'.
bool valid_object_key(std::string_view key);

}  // namespace corral::objstore
