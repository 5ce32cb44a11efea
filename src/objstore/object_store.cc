// ObjectStore's default begin_put: nothing to do before the bytes exist,
// so the pending put holds the key and options and puts them later.
#include "objstore/object_store.h"

#include "objstore/object_checks.h"

namespace corral::objstore {
namespace {

class DeferredPut final : public PendingPut {
 public:
  DeferredPut(ObjectStore& store, std::string key, PutOptions options)
      : store_(store), key_(std::move(key)), options_(std::move(options)) {}

  Result<ObjectInfo> put_fd(int fd) override {
    if (used_)
      return make_error(ErrorCode::kInvalidArgument,
                        "the pending put of " + key_ + " was already used");
    used_ = true;
    return store_.put_fd(key_, fd, options_);
  }

 private:
  ObjectStore& store_;
  std::string key_;
  PutOptions options_;
  bool used_ = false;
};

}  // namespace

Result<std::unique_ptr<PendingPut>> ObjectStore::begin_put(std::string_view key,
                                                           const PutOptions& options) {
  CORRAL_TRY(check_key(key));
  if (auto checked = check_put_options(options); !checked) return tl::unexpected(checked.error());
  return std::unique_ptr<PendingPut>(new DeferredPut(*this, std::string(key), options));
}

}  // namespace corral::objstore
