#include "egress/egress_verdict.h"

namespace corral::net::egress_detail {

namespace {

Verdict refused(const Decision& d) { return Verdict{false, false, d.rule, d.reason}; }

}  // namespace

Verdict decide_target(const NetworkPolicy& policy, const Target& t) {
  std::optional<Decision> allowed, refusal;
  for (const auto& name : t.names) {
    Decision d = decide(policy, EgressQuery{name, std::nullopt, t.port, t.protocol});
    if (!d.allowed && !d.rule.empty()) return refused(d);  // a deny rule wins over all
    if (d.allowed && !allowed) allowed = d;
    if (!d.allowed && !refusal) refusal = d;
  }
  if (allowed) return Verdict{true, !t.names_from_dns, allowed->rule, allowed->reason};
  if (!t.address || (!t.names.empty() && !t.address_fallback)) {
    if (refusal) return refused(*refusal);
    return Verdict{false, false, "", "no destination name or address"};
  }
  Decision d = decide(policy, EgressQuery{"", t.address, t.port, t.protocol});
  if (d.allowed) return Verdict{true, false, d.rule, d.reason};
  if (refusal && d.rule.empty()) return refused(*refusal);  // the name's reason says more
  Verdict v = refused(d);
  if (t.protocol == kTcp && t.names.empty() && t.address_fallback)
    v.reason += " (corral's DNS gave this sandbox no name for " + t.address->str() + ")";
  return v;
}

// Still allowed under `policy`: the decision and the address connected to.
Verdict reevaluate(const NetworkPolicy& policy, const Target& t, const IpAddress& connected) {
  Verdict v = decide_target(policy, t);
  if (!v.allowed) return v;
  Decision a = check_address(policy, connected, t.port, t.protocol);
  if (!a.allowed) return refused(a);
  return v;
}

}  // namespace corral::net::egress_detail
