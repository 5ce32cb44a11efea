#include "daemon/object_store_open.h"

#include <cstdio>

#include "objstore/s3_object_store.h"

namespace corral::daemon {

Result<std::unique_ptr<objstore::ObjectStore>> open_object_store(
    const DaemonConfig& config, const secrets::SecretStore& secrets) {
  auto lookup = [&secrets](std::string_view name) -> std::optional<std::string> {
    const secrets::SecretValue* value = secrets.find(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value->view());
  };
  objstore::ObjectStoreConfig settings = config.object_store;
  settings.power_loss_durable = config.power_loss_durable;  // serve.durability
  auto store = objstore::make_object_store(settings, config.data_dir, lookup);
  if (!store) return tl::unexpected(store.error().wrap("config: serve.object_store"));
  if ((*store)->kind() == "s3") {
    auto* s3 = static_cast<objstore::S3ObjectStore*>(store->get());
    if (auto st = s3->probe(); !st) {
      if (st.error().code != ErrorCode::kUnavailable) {
        return tl::unexpected(st.error().wrap("config: serve.object_store"));
      }
      fprintf(stderr, "corral serve: warning: object store %s: %s\n", (*store)->describe().c_str(),
              st.error().message.c_str());
    }
  }
  return store;
}

}  // namespace corral::daemon
