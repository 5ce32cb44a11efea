// What `serve.object_store` in the daemon config says (docs/config.md
// "object_store"), and the factory the daemon calls at start
// (make_object_store): a store that cannot be opened, or an S3 store whose
// credentials are missing from the secret store, stops the daemon with a
// message saying what to fix.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "objstore/object_store.h"

namespace corral::objstore {

struct ObjectStoreConfig {
  enum class Kind { kLocal, kS3 };
  Kind kind = Kind::kLocal;
  // kLocal: the directory; empty: <data_dir>/objects.
  std::string path;
  // kS3: "http(s)://host[:port]" (path-style requests: endpoint/bucket/key),
  // the bucket, a key prefix inside it ("" or "corral/", "/" added if
  // missing), the SigV4 region.
  std::string endpoint;
  std::string bucket;
  std::string prefix;
  std::string region = "us-east-1";
  // Names of two entries of the secret store (serve.secrets), never values.
  std::string access_key_secret;
  std::string secret_key_secret;
  // Connecting, and any stall of a transfer, longer than this fails it.
  std::int64_t timeout_ms = 30'000;
  // kLocal: fsync every put and remove (LocalObjectStore::open). Not a key
  // of its own: the daemon sets it from serve.durability.
  bool power_loss_durable = true;
};

std::string_view kind_name(ObjectStoreConfig::Kind kind);

// The S3 settings one by one (the config reader names the line of each):
// "http(s)://host[:port]" (a final '/' dropped), a bucket name (3-63 of
// [a-z0-9.-]), a region ([a-z0-9-]{1,64}), a prefix (the start of a valid
// key).
Result<std::string> check_s3_endpoint(std::string_view endpoint);
Status check_s3_bucket(std::string_view bucket);
Status check_s3_region(std::string_view region);
Status check_s3_prefix(std::string_view prefix);

// A secret's value by name, or nullopt when the store has no such entry.
using SecretLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Opens the configured store: the local directory is created (0700); the S3
// settings are checked and the credentials looked up (no request is made:
// S3ObjectStore::probe does that).
Result<std::unique_ptr<ObjectStore>> make_object_store(const ObjectStoreConfig& config,
                                                       const std::string& data_dir,
                                                       const SecretLookup& secrets);

}  // namespace corral::objstore
