// The gateway object (gateway.h): its services, token secret, rate
// buckets, metrics and audit. One request's steps are in
// gateway_session.cc; what the owner declares is parsed in
// gateway_config.cc.
#include "egress/gateway.h"

#include <algorithm>

#include "egress/gateway_token.h"
#include "egress/tls_stream.h"

namespace corral::net {

namespace {
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
}  // namespace

std::string_view gateway_refusal_name(GatewayRefusal r) {
  switch (r) {
    case GatewayRefusal::kNone:
      return "none";
    case GatewayRefusal::kMalformed:
      return "malformed";
    case GatewayRefusal::kPath:
      return "path";
    case GatewayRefusal::kNoToken:
      return "no_token";
    case GatewayRefusal::kBadToken:
      return "bad_token";
    case GatewayRefusal::kUnknownService:
      return "unknown_service";
    case GatewayRefusal::kNotGranted:
      return "not_granted";
    case GatewayRefusal::kMethod:
      return "method";
    case GatewayRefusal::kPathNotAllowed:
      return "path_not_allowed";
    case GatewayRefusal::kRateLimited:
      return "rate_limited";
    case GatewayRefusal::kLengthRequired:
      return "length_required";
    case GatewayRefusal::kUpstreamFailed:
      return "upstream_failed";
    case GatewayRefusal::kUpstreamTimeout:
      return "upstream_timeout";
    case GatewayRefusal::kTimeout:
      return "timeout";
    case GatewayRefusal::kSecretRefused:
      return "secret_refused";
    case GatewayRefusal::kUpstreamTls:
      return "upstream_tls";
    case GatewayRefusal::kDryRun:
      return "dry_run";
    case GatewayRefusal::kCount:
      break;
  }
  return "?";
}

// --- The gateway ---------------------------------------------------------------

Result<std::unique_ptr<Gateway>> Gateway::create(std::vector<GatewayService> services,
                                                 std::string secret,
                                                 std::shared_ptr<Resolver> resolver,
                                                 GatewayAuditSink audit, GatewayOptions options) {
  if (secret.empty())
    return make_error(ErrorCode::kInvalidArgument, "the gateway needs a token secret");
  for (std::size_t i = 0; i < services.size(); ++i) {
    if (!is_valid_gateway_service_name(services[i].name))
      return make_error(ErrorCode::kInvalidArgument,
                        "gateway service \"" + services[i].name + "\": not a valid name");
    for (std::size_t j = 0; j < i; ++j)
      if (services[j].name == services[i].name)
        return make_error(ErrorCode::kInvalidArgument,
                          "gateway service \"" + services[i].name + "\" is declared twice");
  }
  std::unique_ptr<Gateway> g(new Gateway());
  if (std::any_of(services.begin(), services.end(),
                  [](const GatewayService& s) { return s.tls; })) {
    auto ctx = make_upstream_tls_context(options.ca_file);
    if (!ctx) return tl::unexpected(ctx.error().wrap("the gateway's https services"));
    g->tls_ = std::move(*ctx);
  }
  g->services_ = std::move(services);
  g->secret_ = std::move(secret);
  g->resolver_ = std::move(resolver);
  g->audit_ = std::move(audit);
  g->options_ = options;
  return g;
}

std::string Gateway::token(const std::string& sandbox_id, std::int64_t expires_at_unix) const {
  return mint_gateway_token(secret_, sandbox_id, expires_at_unix);
}

void Gateway::forget(const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  const std::string prefix = sandbox_id + "\n";
  for (auto it = buckets_.lower_bound(prefix);
       it != buckets_.end() && it->first.compare(0, prefix.size(), prefix) == 0;)
    it = buckets_.erase(it);
}

GatewayMetrics Gateway::metrics() const {
  std::lock_guard lock(mu_);
  return metrics_;
}

bool Gateway::take(const std::string& sandbox, const GatewayService& service) {
  const RateLimit& rate = service.rate;
  if (rate.per_second <= 0) return true;
  std::lock_guard lock(mu_);
  Bucket& b = buckets_[sandbox + "\n" + service.name];
  const auto now = Clock::now();
  const double burst = std::max(1.0, rate.burst);
  if (b.tokens < 0) {
    b.tokens = burst;
  } else {
    double elapsed = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(burst, b.tokens + elapsed * rate.per_second);
  }
  b.last = now;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

void Gateway::count_and_audit(GatewayEvent& ev, Clock::time_point start) {
  ev.duration_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
  {
    std::lock_guard lock(mu_);
    ++metrics_.requests;
    if (ev.allowed) ++metrics_.forwarded;
    if (ev.refusal != GatewayRefusal::kNone)
      ++metrics_.refused[static_cast<std::size_t>(ev.refusal)];
  }
  if (audit_) audit_(ev);
}

}  // namespace corral::net
