// The self-check's own network probes (T3, self_check.cc), told apart from
// a sandbox's requests: before it asks the sandbox's resolver a name or
// opens a connection to its proxy, the self-check says so here; the
// engine's event for it (the first of that sandbox, layer and name, within
// a few seconds) is then audited with "self_check": true and never counted
// as a blocked request (corral_network_blocked_total, the sandbox's
// diagnostics). Nothing runs in the sandbox while it is checked, so the
// first matching event is the probe's.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace corral::daemon {

class SelfCheckProbes {
 public:
  using Clock = std::chrono::steady_clock;
  // How long an expected probe waits for its event; an event that never
  // comes (a probe that failed to send) must not hide a later request.
  static constexpr auto kWait = std::chrono::seconds(10);

  // Sandbox `sandbox` will send a probe on `layer` ("dns", "proxy") about
  // `name` (the DNS name; "" for a proxy connection that sends nothing).
  void expect(const std::string& sandbox, std::string_view layer, std::string_view name);
  // True, and the expectation used up, when this event is a probe's.
  bool take(std::string_view sandbox, std::string_view layer, std::string_view name);

 private:
  struct Probe {
    std::string sandbox, layer, name;
    Clock::time_point until;
  };
  std::mutex mu_;  // a leaf
  std::vector<Probe> expected_;
};

}  // namespace corral::daemon
