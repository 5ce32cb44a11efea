// S3ObjectStore: objects in a bucket of any S3-compatible service (AWS S3,
// MinIO, Ceph RGW, ...), reached with path-style URLs
// (<endpoint>/<bucket>/<prefix><key>) and signed by libcurl's SigV4 (ADR
// 0009, docs/config.md "object_store").
//
// A put hashes the content first (reading the fd; a pipe is spooled to an
// unnamed temp file), refuses it there if it is over max_size or not the
// expected sha256, then sends it with x-amz-content-sha256 set to that hash
// (the service checks the bytes against it) and the hash again as
// x-amz-meta-sha256, which a get checks the delivered bytes against.
// Connection failures and 5xx answers are retried a bounded number of
// times, then reported as kUnavailable; nothing is retried once a get has
// delivered bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "objstore/object_store.h"
#include "objstore/s3_request.h"

namespace corral::objstore {

struct S3Config {
  std::string endpoint;  // http(s)://host[:port], no path
  std::string bucket;
  std::string prefix;    // "" or ending in '/'
  std::string region = "us-east-1";
  std::int64_t timeout_ms = 30'000;
  int max_attempts = 3;            // per request, for connection errors and 5xx
  std::int64_t retry_base_ms = 100;  // then x4 per attempt, with jitter
  std::uint32_t list_page_size = 1000;  // max-keys of ListObjectsV2
  std::string spool_dir = "/tmp";  // where a put from a pipe is spooled (O_TMPFILE)
};

class S3ObjectStore final : public ObjectStore {
 public:
  // Checks the settings (an endpoint URL, a bucket name, a prefix of key
  // bytes, a region) without contacting the service.
  static Result<std::unique_ptr<S3ObjectStore>> open(S3Config config, S3Credentials credentials);

  // One HEAD of the bucket: kPermissionDenied for refused credentials,
  // kNotFound for a missing bucket, kUnavailable when unreachable.
  Status probe();

  std::string_view kind() const override { return "s3"; }
  std::string describe() const override;

  Result<ObjectInfo> put_fd(std::string_view key, int fd, const PutOptions& options) override;
  Result<ObjectInfo> put_bytes(std::string_view key, std::string_view bytes,
                               const PutOptions& options) override;
  Result<ObjectInfo> get(std::string_view key, const ObjectSink& sink) override;
  Result<ObjectInfo> head(std::string_view key) override;
  Status remove(std::string_view key) override;
  Result<std::vector<ObjectInfo>> list(std::string_view prefix) override;

 private:
  S3ObjectStore(S3Config config, S3Credentials credentials);

  std::string object_url(std::string_view key) const;
  std::string shown(std::string_view key) const;
  // Sends `request`, again after connection errors and 5xx answers (at
  // most max_attempts, with backoff); the last answer or error.
  Result<S3Response> send(const S3Request& request, const std::string& shown, bool retry);
  Result<ObjectInfo> put_seekable(std::string_view key, int fd, off_t offset,
                                  const PutOptions& options);
  Result<ObjectInfo> info_from_head(std::string_view key, const S3Response& response) const;

  S3Config config_;
  S3Credentials credentials_;
};

// The error an S3 answer `status` (with its XML body) means for `what`:
// 404 kNotFound, 403 kPermissionDenied, 5xx kUnavailable, ...
Error s3_status_error(const S3Response& response, const std::string& what);

}  // namespace corral::objstore
