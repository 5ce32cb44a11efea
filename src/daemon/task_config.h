// serve.tasks: the task service's settings (docs/config.md "serve.tasks",
// docs/tasks.md). Read by daemon_config_yaml.cc, used by TaskService.
#pragma once

#include <cstdint>

namespace corral::daemon {

// serve.tasks (docs/config.md).
struct TaskConfig {
  unsigned workers = 4;
  std::int64_t default_timeout_ms = 10 * 60'000;
  std::int64_t max_timeout_ms = 24 * 3600'000;
  std::int64_t retention_ms = 7 * 24 * 3600'000LL;
  std::uint64_t max_body = 64ull << 20;        // POST /v1/tasks, inline inputs included
  std::uint64_t max_output_size = 1ull << 30;  // an output's max_size when it gives none
  std::uint64_t max_log = 16ull << 20;         // per stream, kept after the end
  // Stage timeouts. create's is serve.setup_timeout (inside each create
  // stage), execute's is the task's timeout; destroy is bounded by the
  // sandbox teardown's own waits.
  std::int64_t initialize_timeout_ms = 5 * 60'000;
  std::int64_t collect_timeout_ms = 10 * 60'000;
  // How long after its timeout a command that did not end is given up on.
  std::int64_t kill_grace_ms = 30'000;
  std::int64_t prune_interval_ms = 10 * 60'000;
  // How often the node looks for queued tasks no node holds (submitted to
  // another node that gave them up, or requeued from a lost node; issue
  // 18) and claims what its idle workers can take.
  std::int64_t claim_interval_ms = 1'000;
};

}  // namespace corral::daemon
