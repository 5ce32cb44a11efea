#include "objstore/local_object_store.h"
#include "objstore/object_store_config.h"
#include "objstore/s3_object_store.h"

namespace corral::objstore {

std::string_view kind_name(ObjectStoreConfig::Kind kind) {
  return kind == ObjectStoreConfig::Kind::kS3 ? "s3" : "local";
}

Result<std::unique_ptr<ObjectStore>> make_object_store(const ObjectStoreConfig& config,
                                                       const std::string& data_dir,
                                                       const SecretLookup& secrets) {
  if (config.kind == ObjectStoreConfig::Kind::kLocal) {
    std::string path = config.path.empty() ? data_dir + "/objects" : config.path;
    auto store = LocalObjectStore::open(path, config.power_loss_durable);
    if (!store) return tl::unexpected(store.error().wrap("opening the object store"));
    return std::unique_ptr<ObjectStore>(std::move(*store));
  }
  // Credentials come from the secret store, by the names the config gives.
  auto secret = [&](const std::string& name, std::string_view setting) -> Result<std::string> {
    if (name.empty()) {
      return make_error(ErrorCode::kInvalidArgument,
                        "serve.object_store." + std::string(setting) + " is not set",
                        "an s3 object store names its credentials in the secret store "
                        "(serve.secrets): set access_key_secret and secret_key_secret");
    }
    std::optional<std::string> value = secrets ? secrets(name) : std::nullopt;
    if (!value || value->empty()) {
      return make_error(ErrorCode::kInvalidArgument,
                        "serve.object_store." + std::string(setting) + " names secret " + name +
                            ", which the secret store does not have",
                        "add it to a source of serve.secrets (file, env, encrypted_file)");
    }
    return std::move(*value);
  };
  auto id = secret(config.access_key_secret, "access_key_secret");
  if (!id) return tl::unexpected(id.error());
  auto key = secret(config.secret_key_secret, "secret_key_secret");
  if (!key) return tl::unexpected(key.error());
  S3Config s3;
  s3.endpoint = config.endpoint;
  s3.bucket = config.bucket;
  s3.prefix = config.prefix;
  s3.region = config.region;
  s3.timeout_ms = config.timeout_ms;
  s3.spool_dir = data_dir;
  auto store = S3ObjectStore::open(std::move(s3), S3Credentials(std::move(*id), std::move(*key)));
  if (!store) return tl::unexpected(store.error().wrap("opening the object store"));
  return std::unique_ptr<ObjectStore>(std::move(*store));
}

}  // namespace corral::objstore
