#include "netns/sandbox_link.h"

#include <linux/netlink.h>
#include <sys/socket.h>

#include <string>
#include <string_view>

#include "netns/netlink.h"

namespace corral::net {

namespace {

// The largest MTU a veth takes (ETH_MAX_MTU), on both ends. Every packet
// on the link is between the sandbox and corral's own sockets on the host
// end (the firewall forwards nothing), so the size is never seen past the
// host: it only makes the sandbox's bulk TCP to the proxy cost per 64 KiB
// segment rather than per 1.5 KiB one (about half the relay's CPU per byte,
// bench/egress_proxy_bench.cc). The proxy's own connections out use the
// host's path MTU as usual.
constexpr std::uint32_t kLinkMtu = 65535;

std::string slot_context(const NetSlot& slot, std::string_view action) {
  return std::string(action) + " the network link of slot " + std::to_string(slot.index()) + " (" +
         slot.host_ifname() + " <-> " + slot.sandbox_ifname() + ")";
}

}  // namespace

Status setup_sandbox_link(const NetSlot& slot, int netns_fd) {
  const std::string ctx = slot_context(slot, "setting up");
  const std::string& host_if = slot.host_ifname();
  const std::string inner_if = slot.sandbox_ifname();

  // Before anything exists: nothing to undo.
  auto early = [&ctx](std::string_view step, Error e) {
    return tl::unexpected<Error>(std::move(e).wrap(step).wrap(ctx));
  };
  if (auto st = netlink::check_netns_fd(netns_fd); !st)
    return early("checking the namespace", std::move(st).error());
  auto own = netlink::is_own_netns(netns_fd);
  if (!own) return early("checking the namespace", std::move(own).error());
  if (*own)
    return early(
        "checking the namespace",
        Error{ErrorCode::kInvalidArgument,
              "netns fd " + std::to_string(netns_fd) + " is the caller's own network namespace",
              "pass the sandbox's namespace (/proc/<init pid>/ns/net)", 0});
  auto host = netlink::Socket::open();
  if (!host) return early("opening a netlink socket", std::move(host).error());
  if (auto st = netlink::create_veth(*host, host_if, inner_if, netns_fd, kLinkMtu); !st)
    return early("creating the veth pair", std::move(st).error());

  // From here on the pair exists: a failure deletes it again (which takes
  // the sandbox end and every address and route with it) and says so.
  auto fail = [&](std::string_view step, Error e) {
    e = std::move(e).wrap(step);
    auto del = netlink::delete_link(*host, host_if);
    if (!del && del.error().code != ErrorCode::kNotFound) {
      e.message += "; undoing it failed too: " + del.error().message;
    } else if (auto still = netlink::link_exists(*host, host_if); !still || *still) {
      e.message += "; undoing it failed too: " + host_if + " is still present";
    }
    return tl::unexpected<Error>(std::move(e).wrap(ctx));
  };

  // One trip into the sandbox's namespace: a netlink socket and the IPv6
  // switch of its end, both bound to that namespace from now on.
  UniqueFd inner_fd;
  UniqueFd inner_ipv6;
  auto entered = netlink::run_in_netns(
      netns_fd, "entering netns fd " + std::to_string(netns_fd), [&]() -> Status {
        inner_fd.reset(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
        if (!inner_fd) return errno_error("socket(AF_NETLINK, NETLINK_ROUTE)");
        auto f = netlink::open_disable_ipv6(inner_if);
        if (!f) return tl::unexpected<Error>(std::move(f).error());
        inner_ipv6 = std::move(*f);
        return ok();
      });
  if (!entered) return fail("entering the sandbox's namespace", std::move(entered).error());
  auto inner = netlink::Socket::adopt(std::move(inner_fd));
  if (!inner) return fail("entering the sandbox's namespace", std::move(inner).error());

  // The host end: IPv6 off before it goes up (no link-local address, no
  // router solicitation), then the address and up.
  const std::string host_step = "configuring " + host_if + " (host end)";
  if (auto st = netlink::disable_ipv6(host_if); !st) return fail(host_step, std::move(st).error());
  auto hlink = netlink::get_link(*host, host_if);
  if (!hlink) return fail(host_step, std::move(hlink).error());
  if (auto st = netlink::add_ipv4_address(*host, *hlink, slot.host_address(), NetSlot::kPrefixLen);
      !st)
    return fail(host_step, std::move(st).error());
  if (auto st = netlink::set_link_up(*host, *hlink); !st)
    return fail(host_step, std::move(st).error());

  // The sandbox end, through the socket opened inside: the same, plus the
  // default route (which needs the link up).
  const std::string inner_step = "configuring " + inner_if + " (sandbox end)";
  if (auto st = netlink::write_disable_ipv6(inner_ipv6.get(), inner_if); !st)
    return fail(inner_step, std::move(st).error());
  auto ilink = netlink::get_link(*inner, inner_if);
  if (!ilink) return fail(inner_step, std::move(ilink).error());
  if (auto st =
          netlink::add_ipv4_address(*inner, *ilink, slot.sandbox_address(), NetSlot::kPrefixLen);
      !st)
    return fail(inner_step, std::move(st).error());
  if (auto st = netlink::set_link_up(*inner, *ilink); !st)
    return fail(inner_step, std::move(st).error());
  if (auto st = netlink::add_default_route(*inner, *ilink, slot.host_address()); !st)
    return fail(inner_step, std::move(st).error());
  return ok();
}

Status teardown_sandbox_link(const NetSlot& slot) {
  const std::string ctx = slot_context(slot, "tearing down");
  auto sock = netlink::Socket::open();
  if (!sock) return tl::unexpected<Error>(std::move(sock).error().wrap(ctx));
  auto del = netlink::delete_link(*sock, slot.host_ifname());
  if (!del && del.error().code != ErrorCode::kNotFound)
    return tl::unexpected<Error>(std::move(del).error().wrap(ctx));
  auto present = netlink::link_exists(*sock, slot.host_ifname());
  if (!present) return tl::unexpected<Error>(std::move(present).error().wrap("checking").wrap(ctx));
  if (*present)
    return make_error(ErrorCode::kSystem,
                      ctx + ": " + slot.host_ifname() + " is still present after RTM_DELLINK");
  return ok();
}

Result<bool> sandbox_link_present(const NetSlot& slot) {
  auto sock = netlink::Socket::open();
  if (!sock) return tl::unexpected<Error>(std::move(sock).error());
  return netlink::link_exists(*sock, slot.host_ifname());
}

}  // namespace corral::net
