#include "daemon/node_service.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "daemon/metrics.h"
#include "store/state_store.h"

namespace corral::daemon {

using nlohmann::json;

NodeService::NodeService(NodeSettings settings, StateStore& store, MetricsRegistry& metrics,
                         Hooks hooks)
    : settings_(std::move(settings)), store_(store), metrics_(metrics), hooks_(std::move(hooks)) {}

NodeService::~NodeService() { stop(false); }

Status NodeService::start(NodeRegistration registration) {
  registration_ = std::move(registration);
  auto reg = store_.register_node(registration_);
  if (!reg) return tl::unexpected<Error>(std::move(reg).error());
  registered_ = std::move(*reg);
  if (hooks_.audit)
    hooks_.audit(json{{"type", "node.registered"},
                      {"node", registered_.id},
                      {"incarnation", registered_.incarnation},
                      {"address", registered_.address}});
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
    healthy_since_ = last_beat_ = std::chrono::steady_clock::now();
    unready_.clear();
    cordoned_ = registered_.cordoned;  // a cordon outlives a restart
  }
  beater_ = std::thread([this] { every_interval(&NodeService::beat); });
  sweeper_ = std::thread([this] { every_interval(&NodeService::sweep); });
  return ok();
}

void NodeService::stop(bool leave) {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (beater_.joinable()) beater_.join();
  if (sweeper_.joinable()) sweeper_.join();
  if (leave && !registered_.id.empty()) {
    if (auto st = store_.leave(); !st)
      fprintf(stderr, "corral serve: node %s: %s\n", registered_.id.c_str(),
              st.error().message.c_str());
  }
}

void NodeService::every_interval(void (NodeService::*step)()) {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(settings_.heartbeat_interval_ms),
                 [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    (this->*step)();
    lock.lock();
  }
}

void NodeService::beat() {
  auto beat = store_.heartbeat();
  if (!beat && beat.error().code == ErrorCode::kPermissionDenied) {
    // Marked lost while we were away (or stalled): what the sweep handed
    // on is no longer ours. Give it up, then come back as a new incarnation.
    {
      std::lock_guard lock(mu_);
      healthy_since_.reset();  // judge nobody while giving things up
      unready_ = "marked lost by the fleet; giving up what it held";
    }
    metrics_.counter("corral_node_lost_total", "Times this node found itself marked lost").inc();
    const std::string done = hooks_.on_lost ? hooks_.on_lost() : std::string();
    fprintf(stderr, "corral serve: node %s was marked lost by the fleet: %s\n",
            registration_.id.c_str(), done.c_str());
    auto reg = store_.register_node(registration_);
    if (reg && hooks_.audit) {
      hooks_.audit(json{{"type", "node.registered"},
                        {"node", reg->id},
                        {"incarnation", reg->incarnation},
                        {"after", "marked lost"},
                        {"released", done}});
    }
    std::lock_guard lock(mu_);
    if (!reg) {
      unready_ = "registering again after being marked lost: " + reg.error().message;
      return;
    }
    // Back from away: judge nobody yet.
    healthy_since_ = last_beat_ = std::chrono::steady_clock::now();
    unready_.clear();
    return;
  }
  std::lock_guard lock(mu_);
  if (!beat) {
    metrics_.counter("corral_node_heartbeat_errors_total", "Heartbeats the state store refused")
        .inc();
    fprintf(stderr, "corral serve: node %s: %s\n", registration_.id.c_str(),
            beat.error().message.c_str());
    healthy_since_.reset();  // the store is down: nobody can be judged from here
    unready_ = "the state store refused the heartbeat: " + beat.error().message;
    return;
  }
  last_beat_ = std::chrono::steady_clock::now();
  if (!healthy_since_) healthy_since_ = last_beat_;
  unready_.clear();
  cordoned_ = beat->cordoned;
}

NodeService::Readiness NodeService::readiness() const {
  std::lock_guard lock(mu_);
  if (!unready_.empty()) return {false, unready_};
  if (!last_beat_) return {false, "not registered"};
  // A heartbeat that hangs (a dead database connection) refuses nothing:
  // its age says it.
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - *last_beat_);
  if (age.count() > settings_.lost_after_ms)
    return {false, "no heartbeat written for " + std::to_string(age.count()) +
                       " ms (serve.node.lost_after " + std::to_string(settings_.lost_after_ms) +
                       " ms)"};
  // A load balancer that follows /readyz sends clients elsewhere; other
  // nodes still reach it by address for the sandboxes it runs.
  if (cordoned_)
    return {false, "cordoned: it takes no new sandboxes or tasks (POST /v1/nodes/" +
                       registration_.id + "/uncordon lifts it)"};
  return {true, ""};
}

void NodeService::sweep() {
  {
    std::lock_guard lock(mu_);
    // Right after an outage (of the store, or of this node) every other
    // node's last heartbeat looks old: judge them only once they have had
    // lost_after to write one again.
    if (!healthy_since_ || std::chrono::steady_clock::now() - *healthy_since_ <
                               std::chrono::milliseconds(settings_.lost_after_ms))
      return;
  }
  auto sweep = store_.sweep_lost_nodes(settings_.lost_after_ms);
  if (!sweep) return;
  for (const std::string& node : sweep->nodes_lost) {
    metrics_.counter("corral_nodes_marked_lost_total", "Nodes this node marked lost").inc();
    fprintf(stderr, "corral serve: node %s marked lost (no heartbeat for %lld ms)\n", node.c_str(),
            static_cast<long long>(settings_.lost_after_ms));
  }
  if (hooks_.audit && (!sweep->nodes_lost.empty() || !sweep->tasks_requeued.empty() ||
                       !sweep->tasks_failed.empty() || sweep->sandboxes_lost > 0)) {
    hooks_.audit(json{{"type", "node.lost"},
                      {"by", registration_.id},
                      {"nodes", sweep->nodes_lost},
                      {"sandboxes_lost", sweep->sandboxes_lost},
                      {"tasks_requeued", sweep->tasks_requeued},
                      {"tasks_failed", sweep->tasks_failed}});
  }
}

}  // namespace corral::daemon
