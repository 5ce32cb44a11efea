// The self-check (daemon/self_check.h). Each check returns an Outcome whose
// detail names what failed (a path, a secret's name, an address), never a
// value; the report keeps the first failure.
#include "daemon/self_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "base/random.h"
#include "base/unique_fd.h"
#include "daemon/file_ops.h"
#include "daemon/sandbox_service.h"
#include "daemon/self_check_fault.h"
#include "egress/dns_message.h"
#include "netns/netlink.h"
#include "sys/syscalls.h"

namespace corral::daemon {
namespace {

using Clock = std::chrono::steady_clock;
namespace dns = net::dns;

// Every answer the checks wait for is local (corral's own resolver and
// proxy on the sandbox's host end): this bounds a wedged engine, not a
// slow internet.
constexpr auto kNetTimeout = std::chrono::milliseconds(2000);
constexpr const char* kLayerProbe = "/.corral-self-check";

struct Outcome {
  bool ok = true;
  std::string detail;
};
Outcome failed(std::string detail) { return {false, std::move(detail)}; }

std::string errno_text(int err) { return std::strerror(err); }

// A small write through the sandbox's root (the same confined path as the
// file API), read back, compared and removed.
Outcome check_layer(SandboxService& service, SandboxEntry& sandbox) {
  auto root = open_sandbox_root(service, sandbox);
  if (!root) return failed("the sandbox's root cannot be opened: " + root.error().message);
  std::array<unsigned char, 16> nonce{};
  fill_random(nonce.data(), nonce.size());
  std::string payload = "corral self-check ";
  for (unsigned char c : nonce) payload += "0123456789abcdef"[c >> 4], payload += "0123456789abcdef"[c & 15];
  WriteOptions w;
  w.mode = 0600;
  auto fd = root->open_write(kLayerProbe, w);
  if (!fd) return failed("the writable layer refused a new file: " + fd.error().message);
  ssize_t n = ::write(fd->get(), payload.data(), payload.size());
  const int write_err = errno;
  fd->reset();
  if (n != static_cast<ssize_t>(payload.size())) {
    (void)root->remove(kLayerProbe);
    return failed(std::string("the writable layer took no write of ") +
                  std::to_string(payload.size()) + " bytes to " + kLayerProbe + ": " +
                  (n < 0 ? errno_text(write_err) : "short write") +
                  " (a full layer: the image or the spec leaves no room under limits.disk)");
  }
  auto back = root->open_read(kLayerProbe);
  if (!back) {
    (void)root->remove(kLayerProbe);
    return failed("the writable layer does not give back what was written: " +
                  back.error().message);
  }
  std::string got(payload.size() + 1, '\0');
  ssize_t r = ::read(back->get(), got.data(), got.size());
  back->reset();
  auto removed = root->remove(kLayerProbe);
  if (r != static_cast<ssize_t>(payload.size()) || got.compare(0, payload.size(), payload) != 0)
    return failed(std::string("the writable layer gave back other bytes than were written to ") +
                  kLayerProbe);
  if (!removed) return failed("the self-check's file could not be removed: " + removed.error().message);
  return {};
}

// The sandbox's network namespace, by its init.
Result<UniqueFd> open_netns(const SandboxEntry& sandbox) {
  const std::string path = "/proc/" + std::to_string(sandbox.live->identity().init_pid) + "/ns/net";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error("open(" + path + ")");
  // The pid was init's when the fd was opened only if init still runs.
  if (!sandbox.live->init_alive())
    return make_error(ErrorCode::kNotFound, "the sandbox's init has exited");
  return fd;
}

sockaddr_in endpoint(const std::string& address, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  return a;
}

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// One A query on the sandbox's own UDP socket (connected to its resolver);
// nullopt with `why` on no answer.
std::optional<dns::Response> ask(int udp, std::string_view name, std::string& why) {
  const std::uint16_t id = dns::random_query_id();
  auto query = dns::build_query(id, name, dns::kTypeA);
  if (!query) {
    why = query.error().message;
    return std::nullopt;
  }
  if (::send(udp, query->data(), query->size(), 0) < 0) {
    why = "send: " + errno_text(errno);
    return std::nullopt;
  }
  const dns::Question question{std::string(name), dns::kTypeA, dns::kClassIn};
  const auto deadline = Clock::now() + kNetTimeout;
  std::array<std::uint8_t, 1500> buf{};
  for (;;) {
    pollfd p{udp, POLLIN, 0};
    int w = ::poll(&p, 1, ms_left(deadline));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      why = w == 0 ? "no answer within " + std::to_string(kNetTimeout.count()) + " ms"
                   : "poll: " + errno_text(errno);
      return std::nullopt;
    }
    ssize_t n = ::recv(udp, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      why = "recv: " + errno_text(errno);  // ECONNREFUSED: nothing listens
      return std::nullopt;
    }
    auto resp = dns::parse_response({buf.data(), static_cast<std::size_t>(n)});
    if (resp && dns::response_matches(*resp, id, question)) return std::move(*resp);
  }
}

std::vector<std::string> addresses_of(const dns::Response& r, std::string_view name) {
  return dns::follow_address_chain(r.answers, name, dns::kTypeA).addresses;
}

struct NetworkChecks {
  Outcome dns, canary, proxy;
  bool canary_run = false;
};

// DNS and the proxy, asked from the sandbox's own network namespace to its
// host end, as its programs do (resolv.conf, HTTP_PROXY): the firewall's
// redirects, the resolver's source check and the proxy's listener are on
// the path.
NetworkChecks check_network(SandboxService& service, SandboxEntry& sandbox) {
  NetworkChecks out;
  NetworkService& network = *service.network_service();
  auto status = network.status(sandbox.id);
  NetworkSpec spec;
  {
    std::lock_guard lock(sandbox.mu);
    spec = sandbox.spec.network;
  }
  auto policy = network.resolve(spec);
  if (!status || status->host_address.empty() || !policy) {
    out.dns = failed("the network engine does not serve this sandbox");
    return out;
  }
  const std::string host = status->host_address;
  auto netns = open_netns(sandbox);
  if (!netns) {
    out.dns = failed("the sandbox's network namespace cannot be opened: " + netns.error().message);
    return out;
  }
  UniqueFd udp, tcp;
  const std::uint16_t proxy_port = network.factory_options().proxy_port;
  auto opened = net::netlink::run_in_netns(netns->get(), "self-check", [&]() -> Status {
    udp.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!udp) return errno_error("socket(UDP)");
    tcp.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!tcp) return errno_error("socket(TCP)");
    return ok();
  });
  if (!opened) {
    out.dns = failed("no socket in the sandbox's network namespace: " + opened.error().message);
    return out;
  }
  // The probes below are the self-check's, not the sandbox's requests:
  // said before they are sent (self_check_probes.h).
  SelfCheckProbes& probes = network.self_check_probes();
  // The proxy's connect goes first and completes while DNS is asked.
  probes.expect(sandbox.id, "proxy", "");
  const sockaddr_in proxy = endpoint(host, proxy_port);
  const int connect_rc = ::connect(tcp.get(), reinterpret_cast<const sockaddr*>(&proxy), sizeof proxy);
  const int connect_err = connect_rc == 0 ? 0 : errno;

  const sockaddr_in resolver = endpoint(host, 53);
  std::string why;
  if (::connect(udp.get(), reinterpret_cast<const sockaddr*>(&resolver), sizeof resolver) != 0) {
    out.dns = failed("the sandbox's resolver " + host + ":53 cannot be addressed: " + errno_text(errno));
  } else {
    // gateway.corral.internal is answered by corral's DNS itself: the host
    // end when a gateway service is granted, NXDOMAIN when not. Either
    // way no upstream is asked, so the check costs no internet round trip.
    const std::string gateway(net::kGatewayName);
    const bool granted = !status->gateway.empty();
    probes.expect(sandbox.id, "dns", gateway);
    auto r = ask(udp.get(), gateway, why);
    if (!r) {
      out.dns = failed("the sandbox's resolver " + host + ":53 did not answer: " + why);
    } else if (granted) {
      auto a = addresses_of(*r, gateway);
      if (r->rcode() != 0 || a.size() != 1 || a[0] != host)
        out.dns = failed("the sandbox's resolver did not resolve " + gateway + " (" +
                         dns::rcode_name(r->rcode()) + ", " + std::to_string(a.size()) +
                         " addresses) though its gateway is granted");
    } else if (r->rcode() != static_cast<unsigned>(dns::Rcode::kNxDomain)) {
      out.dns = failed("the sandbox's resolver answered " + gateway + " with " +
                       dns::rcode_name(r->rcode()) + " though no gateway service is granted");
    }
    // The canary: a name an allowlist without "*" denies. Open mode and
    // a "*" rule deny no such name, so there is no canary to ask.
    bool wildcard = false;
    for (const auto& rule : policy->rules) wildcard |= !rule.deny && rule.domain == "*";
    out.canary_run = out.dns.ok && policy->mode == net::NetworkMode::kAllowlist && !wildcard;
    if (out.canary_run) {
      probes.expect(sandbox.id, "dns", kSelfCheckCanary);
      auto c = ask(udp.get(), kSelfCheckCanary, why);
      if (!c)
        out.canary = failed("the sandbox's resolver did not answer the canary " +
                            std::string(kSelfCheckCanary) + ": " + why);
      else if (auto a = addresses_of(*c, kSelfCheckCanary); !a.empty())
        out.canary = failed("the canary " + std::string(kSelfCheckCanary) + " resolved to " +
                            std::to_string(a.size()) +
                            " address(es) though the sandbox's allowlist must refuse it");
    }
  }
  if (connect_rc != 0 && connect_err != EINPROGRESS) {
    out.proxy = failed("the egress proxy " + host + ":" + std::to_string(proxy_port) +
                       " refused a connection: " + errno_text(connect_err));
  } else if (connect_rc != 0) {
    const auto deadline = Clock::now() + kNetTimeout;
    pollfd p{tcp.get(), POLLOUT, 0};
    int w;
    while ((w = ::poll(&p, 1, ms_left(deadline))) < 0 && errno == EINTR) {
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (w > 0) ::getsockopt(tcp.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (w <= 0 || err != 0)
      out.proxy = failed("the egress proxy " + host + ":" + std::to_string(proxy_port) +
                         " did not accept a connection: " +
                         (w == 0 ? "no answer within " + std::to_string(kNetTimeout.count()) + " ms"
                                 : errno_text(w < 0 ? errno : err)));
  }
  return out;
}

// Opens `path` (absolute, in the sandbox) O_PATH without following any
// symlink out of the sandbox's root: no read, so the read watch of secret
// files sees nothing.
Result<struct stat> stat_in_sandbox(const SandboxEntry& sandbox, const std::string& path) {
  UniqueFd root(::open(sandbox.live->root_path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return errno_error("open(" + sandbox.live->root_path() + ")");
  UniqueFd fd(sys::openat2(root.get(), path.c_str() + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                           RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS));
  if (!fd) return errno_error("openat2(" + path + ")");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error("fstat(" + path + ")");
  return st;
}

std::string octal(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode);
  return buf;
}

// The mode a spec's secret gets: its own, else its tier's (secret_spec.h).
secrets::SecretMode mode_of(const SecretSpec& spec) {
  if (auto m = secrets::parse_secret_mode(spec.mode); !spec.mode.empty() && m) return *m;
  if (spec.tier == "low") return secrets::SecretMode::kEnv;
  if (spec.tier == "high") return secrets::SecretMode::kBroker;
  return secrets::SecretMode::kFile;
}

// Each secret in its mode; `report` gets one check per mode present.
void check_secrets(SandboxService& service, SandboxEntry& sandbox, SelfCheckReport& report) {
  if (sandbox.spec.secrets.empty() || service.secret_service() == nullptr) return;
  auto present = service.secret_service()->presence(sandbox.id);
  struct ModeCheck {
    secrets::SecretMode mode;
    const char* name;
  };
  for (ModeCheck m : {ModeCheck{secrets::SecretMode::kEnv, "secret_env"},
                      ModeCheck{secrets::SecretMode::kFile, "secret_file"},
                      ModeCheck{secrets::SecretMode::kBroker, "secret_broker"}}) {
    bool any = false;
    Outcome o;
    for (const auto& p : present) {
      if (p.mode != m.mode) continue;
      any = true;
      const std::string who = "secret \"" + p.name + "\"";
      if (m.mode == secrets::SecretMode::kEnv && !p.held)
        o = failed(who + " (env) has no value for its variable");
      if (m.mode == secrets::SecretMode::kBroker && !p.held)
        o = failed(who + " (broker) has no active token of this sandbox in its variable");
      if (m.mode == secrets::SecretMode::kFile) {
        auto st = stat_in_sandbox(sandbox, p.path);
        const uid_t owner = file_owner(sandbox);
        if (!st)
          o = failed(who + ": " + p.path + " is missing (" + st.error().message + ")");
        else if (!S_ISREG(st->st_mode))
          o = failed(who + ": " + p.path + " is not a regular file");
        else if ((st->st_mode & 07777) != 0400)
          o = failed(who + ": " + p.path + " has mode " + octal(st->st_mode & 07777) +
                     ", not 0400");
        else if (st->st_uid != owner)
          o = failed(who + ": " + p.path + " belongs to host uid " + std::to_string(st->st_uid) +
                     ", not the sandbox's user (host uid " + std::to_string(owner) + ")");
      }
      if (!o.ok) break;
    }
    // A secret the spec asks for that the service has no record of.
    for (const auto& req : sandbox.spec.secrets) {
      if (!o.ok || mode_of(req) != m.mode) continue;
      bool known = false;
      for (const auto& p : present) known |= p.name == req.name;
      if (!known) o = failed("secret \"" + req.name + "\" was never injected"), any = true;
    }
    if (!any) continue;
    report.checks.emplace_back(m.name, o.ok);
    if (!o.ok && report.ok) {
      report.ok = false;
      report.failed = m.name;
      report.detail = o.detail;
      return;
    }
  }
}

}  // namespace

std::string_view self_check_stage_name(SelfCheckStage stage) {
  return stage == SelfCheckStage::kClaim ? "claim" : "create";
}

SelfCheckReport run_self_check(SandboxService& service, SandboxEntry& sandbox,
                               SelfCheckStage stage) {
  (void)stage;
  const auto t0 = Clock::now();
  SelfCheckReport report;
  auto record = [&](const char* name, const Outcome& o) {
    report.checks.emplace_back(name, o.ok);
    if (o.ok || !report.ok) return;
    report.ok = false;
    report.failed = name;
    report.detail = o.detail;
  };
  try {
    if (sandbox.live == nullptr) {
      record("layer", failed("the sandbox is not running"));
    } else {
      apply_self_check_fault(service, sandbox);
      record("layer", check_layer(service, sandbox));
      bool networked = false;
      {
        std::lock_guard lock(sandbox.mu);
        networked = sandbox.net_slot.has_value();
      }
      if (report.ok && networked && service.network_service() != nullptr) {
        NetworkChecks n = check_network(service, sandbox);
        record("dns", n.dns);
        if (report.ok && n.canary_run) record("canary", n.canary);
        if (report.ok) record("proxy", n.proxy);
      }
      if (report.ok) check_secrets(service, sandbox, report);
    }
  } catch (const std::exception& e) {
    record("internal", failed(std::string("the self-check failed: ") + e.what()));
  }
  report.took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
  return report;
}

void record_self_check(SandboxService& service, const std::string& sandbox_id,
                       const SelfCheckReport& report, SelfCheckStage stage) {
  const std::string stage_name(self_check_stage_name(stage));
  service.metrics()
      .histogram("corral_self_check_seconds", "Time the self-check of a sandbox took (T3)",
                 {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 5},
                 {{"stage", stage_name}})
      .observe(std::chrono::duration<double>(report.took).count());
  if (report.ok) return;
  service.metrics()
      .counter("corral_self_check_failures_total",
               "Sandboxes that failed their self-check, by check and stage (T3)",
               {{"check", report.failed}, {"stage", stage_name}})
      .inc();
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& [name, passed] : report.checks)
    checks.push_back({{"name", name}, {"ok", passed}});
  service.audit_async({{"type", "sandbox.self_check_failed"},
                       {"sandbox", sandbox_id},
                       {"stage", stage_name},
                       {"check", report.failed},
                       {"detail", report.detail},
                       {"checks", std::move(checks)},
                       {"took_us", report.took.count()}});
}

}  // namespace corral::daemon
