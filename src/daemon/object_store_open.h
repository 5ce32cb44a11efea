// Opening serve.object_store when the daemon starts (D5; docs/config.md
// "object_store"): the local directory is created, the S3 credentials are
// taken from the secret store by the names the config gives, and an S3
// bucket is probed once. Refused credentials or a missing bucket stop the
// daemon with what to fix; an unreachable service is a warning (tasks that
// need it then fail with storage_unavailable and can be retried).
#pragma once

#include <memory>

#include "base/result.h"
#include "daemon/daemon_config.h"
#include "objstore/object_store.h"
#include "secrets/secret_store.h"

namespace corral::daemon {

Result<std::unique_ptr<objstore::ObjectStore>> open_object_store(
    const DaemonConfig& config, const secrets::SecretStore& secrets);

}  // namespace corral::daemon
