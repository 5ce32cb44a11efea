#include "jail/seccomp_install.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <string>

namespace corral {

int install_seccomp_filter_raw(std::span<const sock_filter> program) noexcept {
  // sock_fprog counts instructions in an unsigned short; the kernel caps
  // programs at BPF_MAXINSNS. Refuse here rather than truncate.
  if (program.empty() || program.size() > BPF_MAXINSNS) {
    errno = EINVAL;
    return -1;
  }
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.size());
  // The kernel copies the program and never writes through this pointer.
  prog.filter = const_cast<sock_filter*>(program.data());
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0 ? 0 : -1;
}

Status install_seccomp_filter(std::span<const sock_filter> program) {
  if (install_seccomp_filter_raw(program) == 0) return ok();
  const int err = errno;
  return errno_error("prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, " +
                         std::to_string(program.size()) + " instructions)",
                     err,
                     err == EACCES ? "set PR_SET_NO_NEW_PRIVS before installing the filter" : "");
}

}  // namespace corral
