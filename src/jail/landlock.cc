#include "jail/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/syscalls.h"

namespace corral {

namespace {

// Rights newer than Debian 12's <linux/landlock.h> (ABI 2).
constexpr std::uint64_t kAccessFsTruncate = 1ULL << 14;   // ABI 3
constexpr std::uint64_t kAccessFsIoctlDev = 1ULL << 15;   // ABI 5
constexpr std::uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
constexpr std::uint64_t kScopeSignal = 1ULL << 1;              // ABI 6
constexpr std::uint32_t kCreateRulesetVersion = 1U << 0;

// Our own view of struct landlock_ruleset_attr with the fields added after
// ABI 2; the kernel takes the size we pass and ignores nothing silently.
struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;  // ABI 4
  std::uint64_t scoped;              // ABI 6
};

}  // namespace

int landlock_abi() {
  int abi = sys::landlock_create_ruleset(nullptr, 0, kCreateRulesetVersion);
  return abi < 0 ? 0 : abi;
}

LandlockPlan make_landlock_plan(int abi) {
  LandlockPlan plan;
  plan.abi = abi;
  plan.read_rights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                     LANDLOCK_ACCESS_FS_READ_DIR;
  plan.write_rights = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                      LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                      LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                      LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) plan.write_rights |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) plan.write_rights |= kAccessFsTruncate;
  if (abi >= 5) plan.write_rights |= kAccessFsIoctlDev;
  plan.handled_fs = plan.read_rights | plan.write_rights;
  if (abi >= 6) plan.scoped = kScopeAbstractUnixSocket | kScopeSignal;
  return plan;
}

int build_landlock_ruleset(const LandlockPlan& plan) {
  RulesetAttr attr{plan.handled_fs, 0, plan.scoped};
  std::size_t size = plan.abi >= 6 ? sizeof attr : (plan.abi >= 4 ? 16 : 8);
  int ruleset = sys::landlock_create_ruleset(&attr, size, 0);
  if (ruleset < 0) return -1;
  for (const LandlockRule& rule : plan.rules) {
    int fd = open(rule.path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;
      close(ruleset);
      return -1;
    }
    landlock_path_beneath_attr beneath{};
    beneath.allowed_access = plan.read_rights | (rule.writable ? plan.write_rights : 0);
    beneath.parent_fd = fd;
    struct stat st;
    // Directory-only rights may not be granted on a file.
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
      beneath.allowed_access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                                LANDLOCK_ACCESS_FS_WRITE_FILE | kAccessFsTruncate |
                                kAccessFsIoctlDev;
      beneath.allowed_access &= plan.handled_fs;
    }
    int r = sys::landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0);
    int err = errno;
    close(fd);
    if (r != 0) {
      close(ruleset);
      errno = err;
      return -1;
    }
  }
  return ruleset;
}

int restrict_to_landlock_ruleset(int ruleset) { return sys::landlock_restrict_self(ruleset, 0); }

int apply_landlock(const LandlockPlan& plan) {
  int ruleset = build_landlock_ruleset(plan);
  if (ruleset < 0) return -1;
  int r = restrict_to_landlock_ruleset(ruleset);
  int err = errno;
  close(ruleset);
  errno = err;
  return r;
}

}  // namespace corral
