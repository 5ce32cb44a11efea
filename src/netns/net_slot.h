// A networked sandbox's place in the address plan (ADR 0005): slot n of a
// pool (default subnet 10.211.0.0/16) is the /30 at subnet + 4n, with the
// host end at .4n+1 on interface "<prefix><n>" (default "crl<n>") in the
// host namespace and the sandbox end at .4n+2 on "eth0" in the sandbox's.
//
// Like uid blocks (jail/uid_range.h), a slot is held by an flock on a lock
// file, <lock dir>/<host interface name> (lock dir default
// <run_dir>/net, i.e. /run/corral/net). The creator passes lock_fd() to the
// sandbox's init, which keeps it: the slot is free again when both are
// gone, whoever dies first. Lock files are keyed by the interface name,
// which is what must be unique on the host: two pools that share a lock
// dir must differ in their interface prefix, and pools in use at the same
// time must not overlap in addresses.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral::net {

struct NetSlotPool {
  // 10.211.0.0/16, host byte order.
  static constexpr std::uint32_t kDefaultSubnet = 0x0ad30000;
  static constexpr int kDefaultPrefixLen = 16;
  static constexpr std::string_view kDefaultIfPrefix = "crl";
  // Smallest pool: one /30. Largest: a /8 (4,194,304 slots; names stay
  // short enough for a 7-digit slot number and a prefix of up to 8).
  static constexpr int kMinPrefixLen = 8;
  static constexpr int kMaxPrefixLen = 30;

  std::uint32_t subnet = kDefaultSubnet;  // network address, host order
  int prefix_len = kDefaultPrefixLen;
  std::string if_prefix = std::string(kDefaultIfPrefix);
  std::string lock_dir;  // empty: <run_dir>/net

  // From "10.211.0.0/16" and an interface prefix; validated.
  static Result<NetSlotPool> make(std::string_view cidr,
                                  std::string_view if_prefix = kDefaultIfPrefix,
                                  std::string lock_dir = {});
  // The subnet is aligned to its prefix, the prefix is in
  // [kMinPrefixLen, kMaxPrefixLen], the interface prefix is 1+ characters
  // of [a-z0-9_-] starting with a letter, and "<prefix><last slot>" fits
  // in 15 characters.
  Status validate() const;
  std::uint32_t slot_count() const;
  std::string lock_directory() const;
  std::string cidr() const;  // "10.211.0.0/16"
};

class NetSlot {
 public:
  // The interface name of the sandbox end, inside its namespace.
  static constexpr std::string_view kSandboxIfName = "eth0";
  // Every slot is a /30.
  static constexpr int kPrefixLen = 30;

  // Takes a free slot: tries the lock files from a random slot on (so
  // concurrent creators rarely contend), and skips a slot whose lock is
  // free but whose host interface still exists in the caller's namespace
  // (a sandbox whose namespace the kernel has not finished tearing down).
  static Result<NetSlot> acquire(const NetSlotPool& pool);
  // Slot `index` of a sandbox that already holds it (a daemon re-attaching
  // after a restart): the lock is held by the sandbox's init, so it is
  // checked, not taken. kNotFound when nobody holds it (the sandbox is
  // gone) or, with holder > 0, when that process does not hold it. The
  // returned slot holds no lock (holds_lock() is false).
  static Result<NetSlot> reattach(const NetSlotPool& pool, std::uint32_t index, pid_t holder = 0);
  // The addresses and names of slot `index`, without looking at its lock
  // (for arithmetic, and for tearing down what a gone sandbox left).
  static Result<NetSlot> at(const NetSlotPool& pool, std::uint32_t index);

  std::uint32_t index() const { return index_; }
  std::uint32_t network() const { return network_; }              // subnet + 4n
  std::uint32_t host_address() const { return network_ + 1; }     // .4n+1
  std::uint32_t sandbox_address() const { return network_ + 2; }  // .4n+2
  const std::string& host_ifname() const { return host_ifname_; }
  std::string sandbox_ifname() const { return std::string(kSandboxIfName); }
  std::string host_cidr() const;     // "10.211.0.1/30"
  std::string sandbox_cidr() const;  // "10.211.0.2/30"
  const std::string& lock_path() const { return lock_path_; }
  // The flock that reserves the slot (-1 unless acquired here): whoever
  // holds it keeps the slot.
  int lock_fd() const { return lock_.get(); }
  bool holds_lock() const { return lock_.valid(); }

 private:
  NetSlot(const NetSlotPool& pool, std::uint32_t index, UniqueFd lock);
  UniqueFd lock_;
  std::uint32_t index_ = 0;
  std::uint32_t network_ = 0;
  std::string host_ifname_;
  std::string lock_path_;
};

}  // namespace corral::net
