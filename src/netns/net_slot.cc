#include "netns/net_slot.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <charconv>
#include <fstream>
#include <optional>
#include <random>

#include "base/random.h"
#include "base/paths.h"
#include "netns/ip_address.h"
#include "netns/netlink.h"

namespace corral::net {

namespace {

std::size_t decimal_digits(std::uint32_t v) {
  std::size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

Status make_dir(const std::string& path) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return errno_error("mkdir(" + path + ")");
  return ok();
}

// Whether `pid` has an open file description of `path` that holds an
// flock on it (/proc/<pid>/fdinfo lists the locks held through each fd).
Result<bool> holds_flock(pid_t pid, const std::string& path) {
  struct stat want;
  if (stat(path.c_str(), &want) != 0) return errno_error("stat(" + path + ")");
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(fd_dir.c_str());
  if (dir == nullptr) return errno_error("opendir(" + fd_dir + ")");
  bool found = false;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    struct stat st;
    if (stat((fd_dir + "/" + e->d_name).c_str(), &st) != 0) continue;  // closed meanwhile
    if (st.st_dev != want.st_dev || st.st_ino != want.st_ino) continue;
    std::ifstream info("/proc/" + std::to_string(pid) + "/fdinfo/" + e->d_name);
    std::string line;
    while (std::getline(info, line)) {
      if (line.rfind("lock:", 0) == 0 && line.find("FLOCK") != std::string::npos) {
        found = true;
        break;
      }
    }
    if (found) break;
  }
  closedir(dir);
  return found;
}

}  // namespace

// --- NetSlotPool ----------------------------------------------------------

Result<NetSlotPool> NetSlotPool::make(std::string_view cidr, std::string_view if_prefix,
                                      std::string lock_dir) {
  const std::string what = "network slot pool \"" + std::string(cidr) + "\"";
  auto slash = cidr.find('/');
  if (slash == std::string_view::npos)
    return make_error(ErrorCode::kInvalidArgument, what + ": expected ADDRESS/PREFIX",
                      "for example 10.211.0.0/16");
  std::string addr(cidr.substr(0, slash));
  in_addr a{};
  if (inet_pton(AF_INET, addr.c_str(), &a) != 1)
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": \"" + addr + "\" is not an IPv4 address");
  std::string_view len_text = cidr.substr(slash + 1);
  int len = -1;
  auto [end, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
  if (ec != std::errc() || end != len_text.data() + len_text.size() || len_text.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": \"" + std::string(len_text) + "\" is not a prefix length");
  NetSlotPool pool;
  pool.subnet = ntohl(a.s_addr);
  pool.prefix_len = len;
  pool.if_prefix = std::string(if_prefix);
  pool.lock_dir = std::move(lock_dir);
  CORRAL_TRY(pool.validate());
  return pool;
}

Status NetSlotPool::validate() const {
  const std::string what = "network slot pool " + cidr();
  if (prefix_len < kMinPrefixLen || prefix_len > kMaxPrefixLen)
    return make_error(ErrorCode::kInvalidArgument, what + ": the prefix length must be between " +
                                                       std::to_string(kMinPrefixLen) + " and " +
                                                       std::to_string(kMaxPrefixLen));
  const std::uint32_t host_mask = (std::uint32_t{1} << (32 - prefix_len)) - 1;
  if ((subnet & host_mask) != 0)
    return make_error(
        ErrorCode::kInvalidArgument, what + ": not a network address (host bits are set)",
        "use the first address of the subnet, e.g. " + IpAddress::v4(subnet & ~host_mask).str() +
            "/" + std::to_string(prefix_len));
  if (if_prefix.empty() || !(if_prefix[0] >= 'a' && if_prefix[0] <= 'z'))
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": interface prefix \"" + if_prefix + "\" must start with a-z");
  for (char c : if_prefix) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return make_error(ErrorCode::kInvalidArgument, what + ": interface prefix \"" + if_prefix +
                                                         "\" may only contain a-z, 0-9, _ and -");
  }
  const std::size_t longest = if_prefix.size() + decimal_digits(slot_count() - 1);
  if (longest > netlink::kMaxIfNameLen)
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": interface prefix \"" + if_prefix + "\" is too long: \"" +
                          if_prefix + std::to_string(slot_count() - 1) + "\" has " +
                          std::to_string(longest) + " characters, more than " +
                          std::to_string(netlink::kMaxIfNameLen),
                      "use a shorter prefix or a smaller subnet");
  return ok();
}

std::uint32_t NetSlotPool::slot_count() const { return std::uint32_t{1} << (32 - prefix_len - 2); }

std::string NetSlotPool::lock_directory() const {
  return lock_dir.empty() ? run_dir() + "/net" : lock_dir;
}

std::string NetSlotPool::cidr() const {
  return IpAddress::v4(subnet).str() + "/" + std::to_string(prefix_len);
}

// --- NetSlot ----------------------------------------------------------------

NetSlot::NetSlot(const NetSlotPool& pool, std::uint32_t index, UniqueFd lock)
    : lock_(std::move(lock)),
      index_(index),
      network_(pool.subnet + 4 * index),
      host_ifname_(pool.if_prefix + std::to_string(index)),
      lock_path_(pool.lock_directory() + "/" + host_ifname_) {}

std::string NetSlot::host_cidr() const {
  return IpAddress::v4(host_address()).str() + "/" + std::to_string(kPrefixLen);
}

std::string NetSlot::sandbox_cidr() const {
  return IpAddress::v4(sandbox_address()).str() + "/" + std::to_string(kPrefixLen);
}

Result<NetSlot> NetSlot::at(const NetSlotPool& pool, std::uint32_t index) {
  CORRAL_TRY(pool.validate());
  if (index >= pool.slot_count())
    return make_error(ErrorCode::kInvalidArgument,
                      "network slot " + std::to_string(index) + " is outside pool " + pool.cidr() +
                          " (" + std::to_string(pool.slot_count()) + " slots)");
  return NetSlot(pool, index, UniqueFd());
}

Result<NetSlot> NetSlot::acquire(const NetSlotPool& pool) {
  CORRAL_TRY(pool.validate());
  const std::string dir = pool.lock_directory();
  if (pool.lock_dir.empty()) CORRAL_TRY(make_dir(run_dir()));
  CORRAL_TRY(make_dir(dir));
  std::optional<netlink::Socket> nl;  // opened on the first free lock
  const std::uint32_t count = pool.slot_count();
  const auto start = static_cast<std::uint32_t>(random_below(count));
  std::uint32_t lingering = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t index = (start + i) % count;
    NetSlot slot(pool, index, UniqueFd());
    const std::string& path = slot.lock_path_;
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return errno_error("open(" + path + ")");
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return errno_error("flock(" + path + ")");
      continue;
    }
    if (!nl) {
      auto s = netlink::Socket::open();
      if (!s) return tl::unexpected<Error>(std::move(s).error().wrap("taking a network slot"));
      nl.emplace(std::move(*s));
    }
    auto present = netlink::link_exists(*nl, slot.host_ifname_);
    if (!present)
      return tl::unexpected<Error>(std::move(present).error().wrap("taking a network slot"));
    if (*present) {
      ++lingering;  // its lock is released when fd closes here
      continue;
    }
    slot.lock_ = std::move(fd);
    return slot;
  }
  std::string msg =
      "all " + std::to_string(count) + " network slots of " + pool.cidr() + " are in use";
  if (lingering > 0)
    msg += " (" + std::to_string(lingering) + " free ones still have their interface " +
           pool.if_prefix + "<n>)";
  return make_error(ErrorCode::kResourceExhausted, msg,
                    "too many networked sandboxes at once: use a larger subnet");
}

Result<NetSlot> NetSlot::reattach(const NetSlotPool& pool, std::uint32_t index, pid_t holder) {
  auto slot = at(pool, index);
  if (!slot) return slot;
  const std::string& path = slot->lock_path_;
  const std::string what = "re-attaching network slot " + std::to_string(index) + " (" + path + ")";
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT)
      return make_error(ErrorCode::kNotFound, what + ": no lock file: its sandbox is gone");
    return errno_error(what + ": open");
  }
  // A probe, never kept: if the lock can be taken, nobody held it.
  if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
    return make_error(ErrorCode::kNotFound, what + ": nobody holds it: its sandbox is gone",
                      "tear the slot's interface down (teardown_sandbox_link) and forget it");
  }
  if (errno != EWOULDBLOCK) return errno_error(what + ": flock");
  if (holder > 0) {
    auto held = holds_flock(holder, path);
    if (!held) return tl::unexpected<Error>(std::move(held).error().wrap(what));
    if (!*held)
      return make_error(ErrorCode::kNotFound,
                        what + ": held, but not by process " + std::to_string(holder));
  }
  return slot;
}

}  // namespace corral::net
