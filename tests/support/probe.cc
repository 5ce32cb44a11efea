// corral_probe: the attacker inside the sandbox.
//
// A small static program that the integration and security tests run
// INSIDE a sandbox (`/probe/corral_probe <command> [args] [+ <command> ...]`).
// It tries what an escaping workload would try and prints what happened,
// one JSON object per line, so the test on the host can compare the
// outcome with the policy.
//
// Safety rule: the tests run as real root, so every probe must stay
// harmless even when the sandbox under test is completely broken (no
// namespaces, no seccomp, full capabilities):
//   * files opened for writing are opened O_WRONLY (never O_TRUNC) and
//     closed without writing; device nodes are refused;
//   * syscalls on the deny list are called with arguments the kernel itself
//     rejects (EINVAL, EBADF, EFAULT, ESRCH...) before it acts, so the call
//     tells "stopped by the filter" (EPERM/ENOSYS) apart from "reached the
//     kernel" without doing anything either way;
//   * network traffic goes to loopback, except one non-blocking connect to
//     a public address that a working sandbox never lets out;
//   * the commands that write (mkfile, mkinodes, link, sleep markers) write only
//     where the test tells them to, inside the sandbox's writable layer.
//
// Only libc and the Linux headers; no allocation-heavy machinery.

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------- output

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          // Non-ASCII bytes are escaped one by one (as U+00XX) so the line
          // is always valid JSON whatever a file name contains.
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

// One JSON object, built key by key and printed as one line.
class Line {
 public:
  explicit Line(const char* cmd) { str("cmd", cmd); }
  Line& str(const char* key, const std::string& value) {
    field(key) += "\"" + json_escape(value) + "\"";
    return *this;
  }
  Line& num(const char* key, long long value) {
    field(key) += std::to_string(value);
    return *this;
  }
  Line& boolean(const char* key, bool value) {
    field(key) += value ? "true" : "false";
    return *this;
  }
  Line& null(const char* key) {
    field(key) += "null";
    return *this;
  }
  Line& raw(const char* key, const std::string& json) {
    field(key) += json;
    return *this;
  }
  Line& err(int e) {  // "errno": "ENOENT" (or null for 0)
    if (e == 0) return null("errno");
    return str("errno", errno_name(e));
  }
  void emit() {
    body_ += "}\n";
    // One write per line, so lines from forked children never interleave.
    size_t off = 0;
    while (off < body_.size()) {
      ssize_t n = write(1, body_.data() + off, body_.size() - off);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        break;
      }
      off += static_cast<size_t>(n);
    }
  }

  static std::string errno_name(int e) {
    const char* name = strerrorname_np(e);
    if (name != nullptr) return name;
    return "E" + std::to_string(e);
  }

 private:
  std::string& field(const char* key) {
    body_ += body_.empty() ? "{" : ",";
    body_ += "\"";
    body_ += key;
    body_ += "\":";
    return body_;
  }
  std::string body_;
};

std::string json_string_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ",";
    out += "\"" + json_escape(items[i]) + "\"";
  }
  return out + "]";
}

void usage_error(const std::string& message) {
  Line("error").str("message", message).emit();
}

// ---------------------------------------------------------------- helpers

bool read_small_file(const char* path, std::string* out, int* err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  char buf[4096];
  out->clear();
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      close(fd);
      return false;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > (1u << 20)) break;
  }
  close(fd);
  *err = 0;
  return true;
}

// Value of "Key:\t..." in a /proc status-like text, trimmed.
std::string status_field(const std::string& text, const std::string& key) {
  std::string needle = key + ":";
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (text.compare(pos, needle.size(), needle) == 0) {
      size_t v = pos + needle.size();
      while (v < eol && (text[v] == ' ' || text[v] == '\t')) ++v;
      return text.substr(v, eol - v);
    }
    pos = eol + 1;
  }
  return "";
}

bool is_number(const char* s) {
  if (*s == '\0') return false;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
  }
  return true;
}

std::vector<long> visible_pids() {
  std::vector<long> pids;
  DIR* d = opendir("/proc");
  if (d == nullptr) return pids;
  while (dirent* e = readdir(d)) {
    if (is_number(e->d_name)) pids.push_back(strtol(e->d_name, nullptr, 10));
  }
  closedir(d);
  return pids;
}

std::string read_link(const std::string& path, int* err) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
  if (n < 0) {
    *err = errno;
    return "";
  }
  *err = 0;
  return std::string(buf, static_cast<size_t>(n));
}

std::string cmdline_of(long pid) {
  std::string text;
  int err = 0;
  if (!read_small_file(("/proc/" + std::to_string(pid) + "/cmdline").c_str(), &text, &err)) {
    return "";
  }
  while (!text.empty() && text.back() == '\0') text.pop_back();
  for (char& c : text) {
    if (c == '\0') c = ' ';
  }
  return text;
}

long parse_long(const char* s, long fallback) {
  if (s == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return fallback;
  return v;
}

// ---------------------------------------------------------------- sha256
// A plain FIPS 180-4 SHA-256, so `read` can say which file it saw without
// printing its content.

class Sha256 {
 public:
  Sha256() { reset(); }
  void update(const unsigned char* data, size_t len) {
    for (size_t i = 0; i < len; ++i) {
      block_[block_len_++] = data[i];
      if (block_len_ == 64) {
        compress();
        block_len_ = 0;
      }
    }
    total_bits_ += static_cast<uint64_t>(len) * 8;
  }
  std::string hex() {
    uint64_t bits = total_bits_;
    unsigned char pad = 0x80;
    update(&pad, 1);
    unsigned char zero = 0;
    while (block_len_ != 56) update(&zero, 1);
    unsigned char len_be[8];
    for (int i = 0; i < 8; ++i) len_be[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    update(len_be, 8);
    std::string out;
    char buf[9];
    for (uint32_t word : state_) {
      snprintf(buf, sizeof buf, "%08x", word);
      out += buf;
    }
    return out;
  }

 private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void reset() {
    static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    for (int i = 0; i < 8; ++i) state_[i] = init[i];
    block_len_ = 0;
    total_bits_ = 0;
  }
  void compress() {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t{block_[4 * i]} << 24) | (uint32_t{block_[4 * i + 1]} << 16) |
             (uint32_t{block_[4 * i + 2]} << 8) | uint32_t{block_[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  uint32_t state_[8];
  unsigned char block_[64];
  size_t block_len_;
  uint64_t total_bits_;
};

// ---------------------------------------------------------------- status

int cmd_status() {
  std::string text;
  int err = 0;
  Line line("status");
  line.num("uid", getuid()).num("gid", getgid()).num("euid", geteuid()).num("egid", getegid());
  if (read_small_file("/proc/self/status", &text, &err)) {
    for (const char* key : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
      line.str(key, status_field(text, key));
    }
    for (const char* key : {"NoNewPrivs", "Seccomp", "Seccomp_filters"}) {
      std::string v = status_field(text, key);
      if (v.empty()) {
        line.null(key);
      } else {
        line.num(key, strtoll(v.c_str(), nullptr, 10));
      }
    }
    line.str("Groups", status_field(text, "Groups"));
  } else {
    line.str("status_errno", Line::errno_name(err));
  }
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) line.str("hostname", host);
  line.num("pid", getpid()).num("ppid", getppid());
  line.num("sid", getsid(0)).num("pgid", getpgid(0));
  std::vector<long> pids = visible_pids();
  line.num("visible_pids", static_cast<long long>(pids.size()));
  std::string cwd = read_link("/proc/self/cwd", &err);
  line.str("cwd", err == 0 ? cwd : "?" + Line::errno_name(err));
  if (read_small_file("/proc/self/uid_map", &text, &err)) line.str("uid_map", text);
  if (read_small_file("/proc/self/gid_map", &text, &err)) line.str("gid_map", text);
  int tty = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  line.boolean("dev_tty_opens", tty >= 0);
  if (tty >= 0) close(tty);
  line.boolean("stdin_is_tty", isatty(0) == 1);
  const char* home = getenv("HOME");
  line.str("HOME", home ? home : "");
  const char* path = getenv("PATH");
  line.str("PATH", path ? path : "");
  line.emit();
  return 0;
}

// ---------------------------------------------------------------- syscalls

// The verdict of one probe call. Stopped by the filter: the policy returns
// EPERM (or ENOSYS for calls whose arguments it cannot inspect, or
// EAFNOSUPPORT for socket families). Every call below is built so the
// kernel itself would answer something else.
struct ProbeResult {
  long ret;
  int err;
};

enum class Group { kDeny, kExtra, kControl };

const char* group_name(Group g) {
  switch (g) {
    case Group::kDeny: return "deny";
    case Group::kExtra: return "extra";
    case Group::kControl: return "control";
  }
  return "?";
}

struct SyscallProbe {
  const char* name;
  Group group;
  // True when the kernel checks a capability before it looks at the
  // arguments: without that capability it answers EPERM on its own, so
  // "blocked" then means "denied", not necessarily "denied by seccomp".
  bool cap_checked_first;
  bool socket_family;  // EAFNOSUPPORT counts as the policy's answer
  ProbeResult (*call)();
};

ProbeResult result_of(long ret) { return ProbeResult{ret, ret < 0 ? errno : 0}; }

// A deliberately unmapped user pointer: the kernel answers EFAULT when it
// copies from it, without doing anything else.
void* bad_ptr() { return reinterpret_cast<void*>(1); }

// Runs `fn` in a forked child (for calls that change the caller, or could
// create a process if they unexpectedly succeeded) and returns its result.
ProbeResult in_child(long (*fn)()) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ProbeResult{-1, errno};
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    return ProbeResult{-1, e};
  }
  if (pid == 0) {
    close(fds[0]);
    long r = fn();
    ProbeResult res{r, r < 0 ? errno : 0};
    if (write(fds[1], &res, sizeof res) != sizeof res) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  ProbeResult res{-1, EIO};
  ssize_t n;
  do {
    n = read(fds[0], &res, sizeof res);
  } while (n < 0 && errno == EINTR);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n != sizeof res) {
    // The child died before answering (a kill action of the filter).
    if (WIFSIGNALED(status)) return ProbeResult{-1, -WTERMSIG(status)};
    return ProbeResult{-1, EIO};
  }
  return res;
}

// clone() through the raw syscall: on x86_64 the argument order is
// (flags, stack, parent_tid, child_tid, tls). Every flag set below carries
// CLONE_THREAD without CLONE_SIGHAND, which copy_process() refuses with
// EINVAL before anything is created; should a broken kernel still return 0,
// the child leaves at once.
ProbeResult raw_clone(unsigned long ns_flag) {
  long r = syscall(SYS_clone, ns_flag | CLONE_THREAD, nullptr, nullptr, nullptr, 0);
  if (r == 0) syscall(SYS_exit, 0);
  return result_of(r);
}

// unshare() with CLONE_VFORK added: check_unshare_flags() answers EINVAL for
// that bit before any namespace is made.
ProbeResult raw_unshare(unsigned long ns_flag) {
  return result_of(syscall(SYS_unshare, ns_flag | CLONE_VFORK));
}

// socket() with a type carrying an unknown flag bit: the kernel answers
// EINVAL before it looks at the family.
ProbeResult raw_socket(int family) {
  long r = syscall(SYS_socket, family, SOCK_RAW | 0x100000, 0);
  if (r >= 0) close(static_cast<int>(r));
  return result_of(r);
}

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#endif
#ifndef __NR_move_mount
#define __NR_move_mount 429
#endif
#ifndef __NR_fsopen
#define __NR_fsopen 430
#endif
#ifndef __NR_fsconfig
#define __NR_fsconfig 431
#endif
#ifndef __NR_fsmount
#define __NR_fsmount 432
#endif
#ifndef __NR_fspick
#define __NR_fspick 433
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_io_uring_enter
#define __NR_io_uring_enter 426
#endif
#ifndef __NR_io_uring_register
#define __NR_io_uring_register 427
#endif
#ifndef __NR_set_mempolicy_home_node
#define __NR_set_mempolicy_home_node 450
#endif
#ifndef __NR_process_madvise
#define __NR_process_madvise 440
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif

const SyscallProbe kSyscallProbes[] = {
    // ---- deny list (ARCHITECTURE.md "Isolation"; what the tests require)
    // mount(2): the target pointer is unmapped, so path lookup fails with
    // EFAULT before the capability check.
    {"mount", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_mount, nullptr, bad_ptr(), nullptr, 0UL, nullptr)); }},
    // umount2(2): unknown flag bits, EINVAL first.
    {"umount2", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_umount2, bad_ptr(), 0x7ff00000)); }},
    {"unshare(CLONE_NEWUSER)", Group::kDeny, false, false,
     [] { return raw_unshare(CLONE_NEWUSER); }},
    {"unshare(CLONE_NEWNS)", Group::kDeny, false, false, [] { return raw_unshare(CLONE_NEWNS); }},
    {"unshare(CLONE_NEWNET)", Group::kDeny, false, false,
     [] { return raw_unshare(CLONE_NEWNET); }},
    {"unshare(CLONE_NEWPID)", Group::kExtra, false, false,
     [] { return raw_unshare(CLONE_NEWPID); }},
    {"unshare(CLONE_NEWIPC)", Group::kExtra, false, false,
     [] { return raw_unshare(CLONE_NEWIPC); }},
    {"unshare(CLONE_NEWUTS)", Group::kExtra, false, false,
     [] { return raw_unshare(CLONE_NEWUTS); }},
    {"unshare(CLONE_NEWCGROUP)", Group::kExtra, false, false,
     [] { return raw_unshare(CLONE_NEWCGROUP); }},
    {"unshare(CLONE_NEWTIME)", Group::kExtra, false, false,
     [] { return raw_unshare(CLONE_NEWTIME); }},
    // setns(2) on fd -1: EBADF.
    {"setns", Group::kDeny, false, false, [] { return result_of(syscall(SYS_setns, -1, 0)); }},
    // pivot_root(2): the kernel checks CAP_SYS_ADMIN first.
    {"pivot_root", Group::kDeny, true, false,
     [] { return result_of(syscall(SYS_pivot_root, bad_ptr(), bad_ptr())); }},
    // chroot(2): path lookup (EFAULT) comes before CAP_SYS_CHROOT.
    {"chroot", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_chroot, bad_ptr())); }},
    // ptrace(2) on pid -1, which never exists: ESRCH.
    {"ptrace", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_ptrace, 16L /* PTRACE_ATTACH */, -1, nullptr, nullptr)); }},
    // keyctl(2) with an unknown operation: EOPNOTSUPP.
    {"keyctl", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_keyctl, 0x7fffffff, 0, 0, 0, 0)); }},
    // add_key(2) with a payload length over the limit: EINVAL.
    {"add_key", Group::kDeny, false, false,
     [] {
       return result_of(syscall(SYS_add_key, nullptr, nullptr, nullptr, ~0UL, 0));
     }},
    // request_key(2) with an unmapped type string: EFAULT.
    {"request_key", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_request_key, bad_ptr(), bad_ptr(), nullptr, 0)); }},
    // bpf(2): unknown command and an unmapped attribute pointer: EFAULT or
    // EINVAL (kernels before 6.5 check the unprivileged_bpf sysctl first).
    {"bpf", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_bpf, 0x7fffffff, bad_ptr(), 8)); }},
    // io_uring_setup(2) with a NULL params pointer: EFAULT (EPERM only when
    // the io_uring_disabled sysctl forbids it).
    {"io_uring_setup", Group::kDeny, false, false,
     [] { return result_of(syscall(__NR_io_uring_setup, 1, nullptr)); }},
    {"io_uring_enter", Group::kExtra, false, false,
     [] { return result_of(syscall(__NR_io_uring_enter, -1, 0, 0, 0, nullptr, 0)); }},
    {"io_uring_register", Group::kExtra, false, false,
     [] { return result_of(syscall(__NR_io_uring_register, -1, 0, nullptr, 0)); }},
    // userfaultfd(2): UFFD_USER_MODE_ONLY passes the sysctl check, the
    // unknown high bit then gives EINVAL.
    {"userfaultfd", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_userfaultfd, 1 | 0x40000000)); }},
    // perf_event_open(2) with unknown flags: EINVAL.
    {"perf_event_open", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_perf_event_open, nullptr, 0, -1, -1, ~0UL)); }},
    // process_vm_readv/writev(2) with non-zero flags: EINVAL.
    {"process_vm_readv", Group::kDeny, false, false,
     [] {
       return result_of(syscall(SYS_process_vm_readv, getpid(), nullptr, 0, nullptr, 0, 1UL));
     }},
    {"process_vm_writev", Group::kDeny, false, false,
     [] {
       return result_of(syscall(SYS_process_vm_writev, getpid(), nullptr, 0, nullptr, 0, 1UL));
     }},
    // kexec_load(2): CAP_SYS_BOOT first, then unknown flags (EINVAL).
    {"kexec_load", Group::kDeny, true, false,
     [] { return result_of(syscall(SYS_kexec_load, 0UL, 100000UL, nullptr, 0x7ff00000UL)); }},
    {"kexec_file_load", Group::kExtra, true, false,
     [] { return result_of(syscall(SYS_kexec_file_load, -1, -1, 0UL, nullptr, ~0UL)); }},
    // init_module(2): CAP_SYS_MODULE first, then a zero-length image
    // (ENOEXEC/EINVAL).
    {"init_module", Group::kDeny, true, false,
     [] { return result_of(syscall(SYS_init_module, nullptr, 0UL, "")); }},
    {"finit_module", Group::kDeny, true, false,
     [] { return result_of(syscall(SYS_finit_module, -1, "", 0x7ff00000)); }},
    {"delete_module", Group::kDeny, true, false,
     [] { return result_of(syscall(SYS_delete_module, bad_ptr(), 0)); }},
    // open_by_handle_at(2) with mount fd -1: EBADF on current kernels (older
    // ones checked CAP_DAC_READ_SEARCH first).
    {"open_by_handle_at", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_open_by_handle_at, -1, bad_ptr(), O_RDONLY)); }},
    // clone(2) asking for new namespaces (see raw_clone: always EINVAL).
    {"clone(CLONE_NEWUSER)", Group::kDeny, false, false,
     [] { return raw_clone(CLONE_NEWUSER); }},
    {"clone(CLONE_NEWNS)", Group::kDeny, false, false, [] { return raw_clone(CLONE_NEWNS); }},
    {"clone(CLONE_NEWNET)", Group::kDeny, false, false, [] { return raw_clone(CLONE_NEWNET); }},
    {"clone(CLONE_NEWPID)", Group::kExtra, false, false, [] { return raw_clone(CLONE_NEWPID); }},
    {"clone(CLONE_NEWCGROUP)", Group::kExtra, false, false,
     [] { return raw_clone(CLONE_NEWCGROUP); }},
    // clone3(2): seccomp cannot read its flags (they are behind a pointer),
    // so a policy that denies namespaces must refuse it whole, with ENOSYS
    // so that libc falls back to clone(). Kernel: size 0 -> EINVAL.
    {"clone3", Group::kDeny, false, false,
     [] { return result_of(syscall(__NR_clone3, nullptr, 0UL)); }},
    // The new mount API.
    {"move_mount", Group::kDeny, true, false,
     [] {
       return result_of(syscall(__NR_move_mount, -1, bad_ptr(), -1, bad_ptr(), 0x7ff00000U));
     }},
    {"fsopen", Group::kDeny, true, false,
     [] { return result_of(syscall(__NR_fsopen, bad_ptr(), 0x7ff00000U)); }},
    {"fsconfig", Group::kDeny, false, false,
     [] { return result_of(syscall(__NR_fsconfig, -1, 0x7fff, nullptr, nullptr, 0)); }},
    {"fsmount", Group::kDeny, true, false,
     [] { return result_of(syscall(__NR_fsmount, -1, 0x7ff00000U, 0U)); }},
    {"fspick", Group::kDeny, true, false,
     [] { return result_of(syscall(__NR_fspick, -1, bad_ptr(), 0x7ff00000U)); }},
    // open_tree(2) and mount_setattr(2) check their flags first: EINVAL.
    {"open_tree", Group::kDeny, false, false,
     [] { return result_of(syscall(__NR_open_tree, -1, bad_ptr(), 0x7ff00000U)); }},
    {"mount_setattr", Group::kDeny, false, false,
     [] {
       return result_of(syscall(__NR_mount_setattr, -1, bad_ptr(), 0x7ff00000U, nullptr, 0UL));
     }},
    // personality(2) with a value outside the usual set. The kernel accepts
    // it (it only changes this process), so it runs in a child.
    {"personality(0xffff)", Group::kDeny, false, false,
     [] { return in_child([] { return static_cast<long>(syscall(SYS_personality, 0xffffUL)); }); }},
    // ioctl(2) requests that type into a terminal (TIOCSTI) or drive the
    // console (TIOCLINUX), on fd -1: EBADF from the kernel.
    {"ioctl(TIOCSTI)", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_ioctl, -1, static_cast<unsigned long>(TIOCSTI), bad_ptr())); }},
    {"ioctl(TIOCLINUX)", Group::kDeny, false, false,
     [] {
       return result_of(syscall(SYS_ioctl, -1, static_cast<unsigned long>(TIOCLINUX), bad_ptr()));
     }},
    // The same request with garbage in the upper 32 bits: the kernel uses
    // only the low 32 bits of the command, so a filter comparing all 64
    // bits would let it through.
    {"ioctl(TIOCSTI|1<<32)", Group::kDeny, false, false,
     [] {
       return result_of(
           syscall(SYS_ioctl, -1, static_cast<unsigned long>(TIOCSTI) | (1UL << 32), bad_ptr()));
     }},
    // Socket families other than unix/inet/inet6 (netlink, packet, ...).
    {"socket(AF_NETLINK)", Group::kDeny, false, true, [] { return raw_socket(AF_NETLINK); }},
    {"socket(AF_PACKET)", Group::kDeny, false, true, [] { return raw_socket(AF_PACKET); }},
    {"socket(AF_KEY)", Group::kDeny, false, true, [] { return raw_socket(AF_KEY); }},
    {"socket(AF_ALG)", Group::kDeny, false, true, [] { return raw_socket(AF_ALG); }},
    {"socket(AF_VSOCK)", Group::kDeny, false, true, [] { return raw_socket(AF_VSOCK); }},
    {"socket(AF_XDP)", Group::kDeny, false, true, [] { return raw_socket(AF_XDP); }},
    {"socket(AF_BLUETOOTH)", Group::kExtra, false, true, [] { return raw_socket(AF_BLUETOOTH); }},
    {"socket(AF_CAN)", Group::kExtra, false, true, [] { return raw_socket(AF_CAN); }},
    {"socket(AF_TIPC)", Group::kExtra, false, true, [] { return raw_socket(AF_TIPC); }},
    // ---- refused since the policy became an allowlist (docs/seccomp.md):
    // ENOSYS as on a kernel without them, EPERM for process_madvise. Each
    // gets arguments the kernel refuses with EINVAL/ESRCH/EFAULT first.
    {"mbind", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_mbind, nullptr, 0UL, 0xffffL, nullptr, 0UL, 0U)); }},
    {"set_mempolicy", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_set_mempolicy, 0xffffL, nullptr, 0UL)); }},
    {"get_mempolicy", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_get_mempolicy, nullptr, nullptr, 0UL, nullptr, 0xffffUL)); }},
    {"migrate_pages", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_migrate_pages, 0x7fffffff, 0UL, nullptr, nullptr)); }},
    {"move_pages", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_move_pages, 0, 0UL, nullptr, nullptr, nullptr, 0xffff)); }},
    {"set_mempolicy_home_node", Group::kDeny, false, false,
     [] { return result_of(syscall(__NR_set_mempolicy_home_node, 0UL, 0UL, 0UL, 0xffffUL)); }},
    {"process_madvise", Group::kDeny, false, false,
     [] { return result_of(syscall(__NR_process_madvise, -1, nullptr, 0UL, 0, 0xffffU)); }},
#if defined(__x86_64__)
    // modify_ldt(write, size 0): EINVAL; it succeeded before the allowlist.
    {"modify_ldt", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_modify_ldt, 1, bad_ptr(), 0UL)); }},
#endif
    {"fanotify_mark", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_fanotify_mark, -1, 0xffffffffU, 0UL, -1, nullptr)); }},
    {"remap_file_pages", Group::kDeny, false, false,
     [] { return result_of(syscall(SYS_remap_file_pages, 0UL, 0UL, 1UL, 0UL, 0UL)); }},
    {"statmount", Group::kDeny, false, false,
     [] { return result_of(syscall(457 /* statmount */, nullptr, nullptr, 0UL, 0xffffUL)); }},
    {"listmount", Group::kDeny, false, false,
     [] { return result_of(syscall(458 /* listmount */, nullptr, nullptr, 0UL, 0xffffUL)); }},
    {"lsm_get_self_attr", Group::kDeny, false, false,
     [] { return result_of(syscall(459 /* lsm_get_self_attr */, 0U, nullptr, nullptr, 0xffffU)); }},
    // sethostname checks CAP_SYS_ADMIN (in the sandbox's namespace) first.
    {"sethostname", Group::kDeny, true, false,
     [] { return result_of(syscall(SYS_sethostname, bad_ptr(), 100000UL)); }},
    // An unassigned number: the kernel says ENOSYS too, as the filter does.
    {"syscall(1000)", Group::kExtra, false, false,
     [] { return result_of(syscall(1000, 0, 0, 0)); }},
    // ---- extras: commonly denied elsewhere; reported, not required
    {"kcmp", Group::kExtra, false, false,
     [] { return result_of(syscall(SYS_kcmp, -1, -1, 0x7fff, 0UL, 0UL)); }},
    {"pidfd_getfd", Group::kExtra, false, false,
     [] { return result_of(syscall(__NR_pidfd_getfd, -1, -1, 0x7ff00000U)); }},
    {"quotactl", Group::kExtra, false, false,
     [] { return result_of(syscall(SYS_quotactl, 0x7fffff00, nullptr, 0, nullptr)); }},
    {"syslog", Group::kExtra, true, false,
     [] { return result_of(syscall(SYS_syslog, 0x7fff, nullptr, 0)); }},
    {"clock_settime", Group::kExtra, false, false,
     [] { return result_of(syscall(SYS_clock_settime, 0x7fff, nullptr)); }},
    // ---- controls: ordinary calls that must reach the kernel, proving the
    // probe can tell the two outcomes apart.
    {"dup3(-1)", Group::kControl, false, false,
     [] { return result_of(syscall(SYS_dup3, -1, -1, 0)); }},
    {"socket(AF_UNIX)", Group::kControl, false, true, [] { return raw_socket(AF_UNIX); }},
    {"socket(AF_INET)", Group::kControl, false, true, [] { return raw_socket(AF_INET); }},
    {"socket(AF_INET6)", Group::kControl, false, true, [] { return raw_socket(AF_INET6); }},
    {"ioctl(TCGETS)", Group::kControl, false, false,
     [] { return result_of(syscall(SYS_ioctl, -1, static_cast<unsigned long>(TCGETS), bad_ptr())); }},
    {"personality(query)", Group::kControl, false, false,
     [] { return result_of(syscall(SYS_personality, 0xffffffffUL)); }},
    {"clone(plain)", Group::kControl, false, false, [] { return raw_clone(0); }},
};

int cmd_syscalls(const char* only) {
  for (const SyscallProbe& p : kSyscallProbes) {
    if (only != nullptr && strcmp(only, p.name) != 0) continue;
    errno = 0;
    ProbeResult r = p.call();
    Line line("syscalls");
    line.str("name", p.name).str("group", group_name(p.group)).num("ret", r.ret);
    std::string verdict;
    if (r.err < 0) {
      // The child of in_child() was killed by signal -err.
      line.null("errno").num("signal", -r.err);
      verdict = "killed";
    } else {
      line.err(r.err);
      bool blocked = r.ret < 0 && (r.err == EPERM || r.err == ENOSYS ||
                                   (p.socket_family && r.err == EAFNOSUPPORT));
      verdict = blocked ? "blocked" : "reached-kernel";
    }
    line.str("verdict", verdict).boolean("cap_checked_first", p.cap_checked_first);
    line.emit();
  }
  return 0;
}

// ---------------------------------------------------------------- fds

int cmd_fds() {
  int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    Line("fds").boolean("ok", false).err(errno).emit();
    return 1;
  }
  DIR* d = fdopendir(dfd);
  std::vector<std::string> items;
  std::vector<long> fds;
  while (dirent* e = readdir(d)) {
    if (!is_number(e->d_name)) continue;
    long fd = strtol(e->d_name, nullptr, 10);
    if (fd == dfd) continue;
    int err = 0;
    std::string target = read_link(std::string("/proc/self/fd/") + e->d_name, &err);
    Line("fd").num("fd", fd).str("target", err == 0 ? target : "?" + Line::errno_name(err)).emit();
    fds.push_back(fd);
  }
  closedir(d);
  std::string list = "[";
  for (size_t i = 0; i < fds.size(); ++i) list += (i ? "," : "") + std::to_string(fds[i]);
  list += "]";
  Line("fds").boolean("ok", true).raw("fds", list).emit();
  return 0;
}

// ---------------------------------------------------------------- files

int cmd_write_probe(const char* path) {
  Line line("write-probe");
  line.str("path", path);
  struct stat st;
  if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
    // Opening some devices for writing has side effects by itself (a
    // watchdog starts, a tape rewinds): never.
    line.boolean("ok", false).str("refused", "device").null("errno").emit();
    return 1;
  }
  // O_NONBLOCK: a FIFO must not block the probe. No O_TRUNC, no O_CREAT,
  // and nothing is ever written.
  int fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  int e = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  line.boolean("ok", fd >= 0).err(e).emit();
  return 0;
}

int cmd_read(const char* path) {
  Line line("read");
  line.str("path", path);
  struct stat st;
  if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) &&
      strncmp(path, "/proc/", 6) != 0) {
    line.boolean("ok", false).str("refused", "device").null("errno").emit();
    return 1;
  }
  int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    line.boolean("ok", false).err(errno).emit();
    return 0;
  }
  unsigned char buf[4096];
  size_t total = 0;
  int e = 0;
  while (total < sizeof buf) {
    ssize_t n = read(fd, buf + total, sizeof buf - total);
    if (n < 0) {
      if (errno == EINTR) continue;
      e = errno;
      break;
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
  }
  close(fd);
  Sha256 h;
  h.update(buf, total);
  line.boolean("ok", e == 0).err(e).num("bytes", static_cast<long long>(total));
  line.str("sha256", h.hex()).emit();
  return 0;
}

int cmd_ls(const char* path) {
  Line line("ls");
  line.str("path", path);
  DIR* d = opendir(path);
  if (d == nullptr) {
    line.boolean("ok", false).err(errno).emit();
    return 0;
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (names.size() < 2000) names.push_back(e->d_name);
  }
  closedir(d);
  line.boolean("ok", true).null("errno").raw("entries", json_string_list(names)).emit();
  return 0;
}

// stat PATH: existence, type, owner and mode, without opening.
int cmd_stat(const char* path) {
  Line line("stat");
  line.str("path", path);
  struct stat st;
  if (lstat(path, &st) != 0) {
    line.boolean("ok", false).err(errno).emit();
    return 0;
  }
  const char* type = S_ISREG(st.st_mode)    ? "file"
                     : S_ISDIR(st.st_mode)  ? "dir"
                     : S_ISLNK(st.st_mode)  ? "symlink"
                     : S_ISCHR(st.st_mode)  ? "chardev"
                     : S_ISBLK(st.st_mode)  ? "blockdev"
                     : S_ISFIFO(st.st_mode) ? "fifo"
                     : S_ISSOCK(st.st_mode) ? "socket"
                                            : "other";
  line.boolean("ok", true).null("errno").str("type", type);
  line.num("uid", st.st_uid).num("gid", st.st_gid).num("mode", st.st_mode & 07777);
  line.num("size", static_cast<long long>(st.st_size)).emit();
  return 0;
}

// mounts: every line of /proc/self/mountinfo as mount point, fs type and
// options (so the test can look for cgroupfs or writable /proc/sys).
int cmd_mounts() {
  std::string text;
  int err = 0;
  if (!read_small_file("/proc/self/mountinfo", &text, &err)) {
    Line("mounts").boolean("ok", false).err(err).emit();
    return 0;
  }
  size_t pos = 0, count = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string l = text.substr(pos, eol - pos);
    pos = eol + 1;
    // id parent maj:min root mountpoint options [optional...] - fstype source superopts
    std::vector<std::string> f;
    size_t p = 0;
    while (p <= l.size()) {
      size_t sp = l.find(' ', p);
      if (sp == std::string::npos) sp = l.size();
      f.push_back(l.substr(p, sp - p));
      p = sp + 1;
    }
    size_t dash = 0;
    for (size_t i = 6; i < f.size(); ++i) {
      if (f[i] == "-") {
        dash = i;
        break;
      }
    }
    if (f.size() < 7 || dash == 0 || dash + 3 > f.size()) continue;
    Line("mount")
        .str("target", f[4])
        .str("root", f[3])
        .str("options", f[5])
        .str("fstype", f[dash + 1])
        .str("source", f[dash + 2])
        .str("super", dash + 3 < f.size() ? f[dash + 3] : "")
        .emit();
    ++count;
  }
  Line("mounts").boolean("ok", true).num("count", static_cast<long long>(count)).emit();
  return 0;
}

// ps: every visible process with its command line.
int cmd_ps() {
  std::vector<long> pids = visible_pids();
  for (long pid : pids) Line("proc").num("pid", pid).str("cmdline", cmdline_of(pid)).emit();
  Line("ps").num("count", static_cast<long long>(pids.size())).emit();
  return 0;
}

// kill0 PID...: kill(pid, 0) delivers nothing; it only says whether a
// process with that number can be seen (ESRCH) or signalled (EPERM).
int cmd_kill0(const std::vector<const char*>& args) {
  for (const char* a : args) {
    long pid = parse_long(a, 0);
    Line line("kill0");
    line.num("pid", pid);
    if (pid <= 0) {  // 0 and negative would address process groups
      line.boolean("ok", false).str("refused", "pid must be positive").emit();
      continue;
    }
    int r = kill(static_cast<pid_t>(pid), 0);
    line.boolean("ok", r == 0).err(r == 0 ? 0 : errno).emit();
  }
  return 0;
}

// ---------------------------------------------------------------- tty

int cmd_tiocsti() {
  // The filter decision does not depend on the fd, so an invalid one
  // (kernel: EBADF) shows whether the request is blocked without ever
  // typing into a terminal.
  for (int variant = 0; variant < 2; ++variant) {
    unsigned long req = static_cast<unsigned long>(TIOCSTI) | (variant ? (1UL << 32) : 0);
    char c = ' ';
    long r = syscall(SYS_ioctl, -1, req, &c);
    int e = r < 0 ? errno : 0;
    Line("tiocsti")
        .str("target", variant ? "fd -1, request with high bits" : "fd -1")
        .num("ret", r)
        .err(e)
        .str("verdict", r < 0 && e == EPERM ? "blocked" : "reached-kernel")
        .emit();
  }
  // Is there a controlling terminal to type into at all? (A sandbox that
  // shares the caller's session would have one.) Opening is harmless.
  int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  Line("tiocsti").str("target", "/dev/tty open").boolean("ok", fd >= 0).err(fd < 0 ? errno : 0).emit();
  if (fd >= 0) close(fd);
  // On stdin only when it is not a terminal: then the kernel answers ENOTTY
  // (or the filter EPERM) and nothing can be injected anywhere.
  if (isatty(0) == 0) {
    char c = ' ';
    long r = syscall(SYS_ioctl, 0, static_cast<unsigned long>(TIOCSTI), &c);
    int e = r < 0 ? errno : 0;
    Line("tiocsti")
        .str("target", "stdin (not a tty)")
        .num("ret", r)
        .err(e)
        .str("verdict", r < 0 && e == EPERM ? "blocked" : "reached-kernel")
        .emit();
  } else {
    Line("tiocsti").str("target", "stdin").str("skipped", "stdin is a terminal").emit();
  }
  return 0;
}

// ---------------------------------------------------------------- net

int cmd_net() {
  std::string text;
  int err = 0;
  std::vector<std::string> ifaces;
  if (read_small_file("/proc/net/dev", &text, &err)) {
    size_t pos = 0;
    int lineno = 0;
    while (pos < text.size()) {
      size_t eol = text.find('\n', pos);
      if (eol == std::string::npos) eol = text.size();
      std::string l = text.substr(pos, eol - pos);
      pos = eol + 1;
      if (++lineno <= 2) continue;  // two header lines
      size_t colon = l.find(':');
      if (colon == std::string::npos) continue;
      size_t b = l.find_first_not_of(' ');
      ifaces.push_back(l.substr(b, colon - b));
    }
    Line("net-ifaces").boolean("ok", true).raw("ifaces", json_string_list(ifaces)).emit();
  } else {
    Line("net-ifaces").boolean("ok", false).err(err).emit();
  }

  auto try_connect = [](const char* label, const sockaddr* addr, socklen_t len, int family) {
    Line line("net-connect");
    line.str("target", label);
    int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) {
      line.boolean("ok", false).str("stage", "socket").err(errno).emit();
      return;
    }
    int r = connect(s, addr, len);
    int e = r == 0 ? 0 : errno;
    if (r != 0 && e == EINPROGRESS) {
      pollfd p{s, POLLOUT, 0};
      int pr = poll(&p, 1, 1000);
      if (pr == 0) {
        e = ETIMEDOUT;
      } else {
        socklen_t el = sizeof e;
        getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el);
      }
    }
    close(s);
    line.boolean("ok", e == 0).str("stage", "connect").err(e).emit();
  };

  sockaddr_in out4{};
  out4.sin_family = AF_INET;
  out4.sin_port = htons(80);
  inet_pton(AF_INET, "1.1.1.1", &out4.sin_addr);
  try_connect("1.1.1.1:80", reinterpret_cast<sockaddr*>(&out4), sizeof out4, AF_INET);

  sockaddr_in6 out6{};
  out6.sin6_family = AF_INET6;
  out6.sin6_port = htons(80);
  inet_pton(AF_INET6, "2606:4700:4700::1111", &out6.sin6_addr);
  try_connect("[2606:4700:4700::1111]:80", reinterpret_cast<sockaddr*>(&out6), sizeof out6,
              AF_INET6);

  // A loopback port that is certainly closed: bind one, read its number,
  // close it, then connect.
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in lo{};
  lo.sin_family = AF_INET;
  lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof lo;
  if (s >= 0 && bind(s, reinterpret_cast<sockaddr*>(&lo), sizeof lo) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&lo), &len) == 0) {
    close(s);
    std::string label = "127.0.0.1:" + std::to_string(ntohs(lo.sin_port)) + " (closed)";
    try_connect(label.c_str(), reinterpret_cast<sockaddr*>(&lo), sizeof lo, AF_INET);
  } else {
    Line("net-connect").str("target", "127.0.0.1 (closed)").boolean("ok", false)
        .str("stage", "bind").err(errno).emit();
    if (s >= 0) close(s);
  }
  return 0;
}

// tcp-connect HOST PORT: one non-blocking connect (1 s); used with loopback
// addresses only, to show that a host listener is not reachable.
int cmd_tcp_connect(const char* host, const char* port_s) {
  Line line("tcp-connect");
  line.str("host", host).str("port", port_s);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(parse_long(port_s, 0)));
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    line.boolean("ok", false).str("refused", "not an IPv4 address").emit();
    return 1;
  }
  if ((ntohl(a.sin_addr.s_addr) >> 24) != 127) {
    line.boolean("ok", false).str("refused", "loopback only").emit();
    return 1;
  }
  int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int r = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  int e = r == 0 ? 0 : errno;
  if (r != 0 && e == EINPROGRESS) {
    pollfd p{s, POLLOUT, 0};
    if (poll(&p, 1, 1000) == 0) {
      e = ETIMEDOUT;
    } else {
      socklen_t el = sizeof e;
      getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el);
    }
  }
  close(s);
  line.boolean("ok", e == 0).err(e).emit();
  return 0;
}

// abstract-connect NAME: connect to the abstract unix socket "@NAME".
// Abstract sockets belong to the network namespace, so a host listener
// must not be reachable from inside.
int cmd_abstract_connect(const char* name) {
  Line line("abstract-connect");
  line.str("name", name);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  size_t n = strlen(name);
  if (n + 1 > sizeof a.sun_path) {
    line.boolean("ok", false).str("refused", "name too long").emit();
    return 1;
  }
  memcpy(a.sun_path + 1, name, n);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int r = connect(s, reinterpret_cast<sockaddr*>(&a),
                  static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n));
  int e = r == 0 ? 0 : errno;
  close(s);
  line.boolean("ok", r == 0).err(e).emit();
  return 0;
}

// ---------------------------------------------------------------- x32 / ia32

int cmd_x32() {
  // Run a foreign-ABI getpid in a child and report how it ended: a policy
  // that refuses x32 and other architectures kills it or returns an error.
  struct Variant {
    const char* name;
    long (*call)();
  };
  const Variant variants[] = {
      {"x32 getpid", [] { return syscall(0x40000000L | 39); }},
      {"ia32 int80 getpid",
       [] {
         long ret = 20;  // __NR_getpid in the i386 table
         asm volatile("int $0x80" : "+a"(ret) : : "memory", "cc");
         if (ret < 0 && ret > -4096) {
           errno = static_cast<int>(-ret);
           return -1L;
         }
         return ret;
       }},
  };
  for (const Variant& v : variants) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      long r = v.call();
      ProbeResult res{r, r < 0 ? errno : 0};
      if (write(fds[1], &res, sizeof res) != sizeof res) _exit(2);
      _exit(0);
    }
    close(fds[1]);
    ProbeResult res{0, 0};
    ssize_t n;
    do {
      n = read(fds[0], &res, sizeof res);
    } while (n < 0 && errno == EINTR);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    Line line("x32");
    line.str("abi", v.name);
    if (WIFSIGNALED(status)) {
      const char* sig = sigabbrev_np(WTERMSIG(status));
      line.str("outcome", "killed").str("signal", sig ? sig : std::to_string(WTERMSIG(status)));
    } else if (n == sizeof res) {
      line.str("outcome", res.ret >= 0 ? "succeeded" : "error").num("ret", res.ret).err(res.err);
    } else {
      line.str("outcome", "exited").num("status", WEXITSTATUS(status));
    }
    line.emit();
  }
  return 0;
}

// ---------------------------------------------------------------- /proc/1/exe

int cmd_proc_exe() {
  // CVE-2019-5736: a workload that can open the runtime's binary through
  // /proc/<init>/exe for writing can replace it on the host.
  for (const char* path : {"/proc/1/exe", "/proc/self/exe"}) {
    int err = 0;
    std::string target = read_link(path, &err);
    Line("proc-exe")
        .str("path", path)
        .str("mode", "readlink")
        .str("target", err == 0 ? target : "")
        .err(err)
        .emit();
    for (int mode : {O_WRONLY, O_RDONLY}) {
      int fd = open(path, mode | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      int e = fd < 0 ? errno : 0;
      if (fd >= 0) close(fd);
      Line("proc-exe")
          .str("path", path)
          .str("mode", mode == O_WRONLY ? "O_WRONLY" : "O_RDONLY")
          .boolean("ok", fd >= 0)
          .err(e)
          .emit();
    }
  }
  return 0;
}

// ---------------------------------------------------------------- sleep

int cmd_sleep(const char* seconds, const std::vector<const char*>& markers) {
  long n = parse_long(seconds, -1);
  if (n < 0 || n > 3600) {
    usage_error("sleep: seconds must be 0..3600");
    return 2;
  }
  for (const char* m : markers) {
    int fd = open(m, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    int e = fd < 0 ? errno : 0;
    if (fd >= 0) {
      std::string body = "corral-marker " + std::to_string(getpid()) + "\n";
      if (write(fd, body.data(), body.size()) < 0) e = errno;
      close(fd);
    }
    Line("marker").str("path", m).boolean("ok", e == 0).err(e).emit();
  }
  Line("sleep").num("seconds", n).num("pid", getpid()).str("state", "sleeping").emit();
  timespec ts{static_cast<time_t>(n), 0};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  Line("sleep").num("seconds", n).str("state", "done").emit();
  return 0;
}

// daemon SECONDS: the classic escape from a supervisor: double fork, new
// session, stdio closed, parent gone. The grandchild sleeps SECONDS (its
// command line is the probe's, so the test finds it by a token argument)
// and must die with the sandbox. Bounded: it ends by itself after SECONDS.
int cmd_daemon(const char* seconds) {
  long n = parse_long(seconds, -1);
  if (n < 0 || n > 600) {
    usage_error("daemon: seconds must be 0..600");
    return 2;
  }
  pid_t child = fork();
  if (child < 0) {
    Line("daemon").boolean("ok", false).err(errno).emit();
    return 1;
  }
  if (child == 0) {
    setsid();
    pid_t grandchild = fork();
    if (grandchild != 0) _exit(grandchild < 0 ? 1 : 0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd <= 2; ++fd) {
      if (null >= 0) dup3(null, fd, 0);
    }
    timespec ts{static_cast<time_t>(n), 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  Line("daemon").boolean("ok", WIFEXITED(status) && WEXITSTATUS(status) == 0).num("seconds", n).emit();
  return 0;
}

// ---------------------------------------------------------------- limits

int cmd_fork_bomb(const char* max_s) {
  const long kHardMax = 100000;
  long max = parse_long(max_s, kHardMax);
  if (max <= 0 || max > kHardMax) max = kHardMax;
  std::vector<pid_t> children;
  children.reserve(static_cast<size_t>(max));
  int e = 0;
  pid_t self = getpid();
  while (static_cast<long>(children.size()) < max) {
    pid_t pid = fork();
    if (pid < 0) {
      e = errno;
      break;
    }
    if (pid == 0) {
      // Children die with the parent, and on their own after a minute in
      // any case, so a broken sandbox cannot leave them behind.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != self) _exit(0);
      alarm(60);
      pause();
      _exit(0);
    }
    children.push_back(pid);
  }
  long count = static_cast<long>(children.size());
  for (pid_t c : children) kill(c, SIGKILL);
  for (pid_t c : children) waitpid(c, nullptr, 0);
  Line("fork-bomb").num("forked", count).num("max", max).err(e).emit();
  return 0;
}

// link FROM TO: a hard link, as an escape attempt (a name inside a :rw
// mount for a file of another mount). Creates nothing when refused.
int cmd_link(const char* from, const char* to) {
  Line line("link");
  line.str("from", from).str("to", to);
  const bool ok = link(from, to) == 0;
  line.boolean("ok", ok).err(ok ? 0 : errno).emit();
  return 0;
}

int cmd_mkfile(const char* path, const char* bytes_s) {
  long long want = strtoll(bytes_s, nullptr, 10);
  Line line("mkfile");
  line.str("path", path).num("requested", want);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    line.num("written", 0).err(errno).emit();
    return 0;
  }
  static char zeros[1 << 16];
  long long done = 0;
  int e = 0;
  while (done < want) {
    size_t chunk = static_cast<size_t>(std::min<long long>(sizeof zeros, want - done));
    ssize_t n = write(fd, zeros, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      e = errno;
      break;
    }
    done += n;
  }
  if (e == 0 && fsync(fd) != 0) e = errno;
  if (close(fd) != 0 && e == 0) e = errno;
  line.num("written", done).err(e).emit();
  return 0;
}

int cmd_mkinodes(const char* dir, const char* n_s) {
  long want = parse_long(n_s, 0);
  Line line("mkinodes");
  line.str("dir", dir).num("requested", want);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    line.num("created", 0).err(errno).emit();
    return 0;
  }
  long made = 0;
  int e = 0;
  for (; made < want; ++made) {
    std::string p = std::string(dir) + "/i" + std::to_string(made);
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      e = errno;
      break;
    }
    close(fd);
  }
  line.num("created", made).err(e).emit();
  return 0;
}

int cmd_alloc(const char* mib_s) {
  long want = parse_long(mib_s, 0);
  const size_t kMiB = 1 << 20;
  long done = 0;
  int e = 0;
  for (; done < want; ++done) {
    void* p = mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      e = errno;
      break;
    }
    memset(p, 0xa5, kMiB);  // touch every page
    if ((done + 1) % 64 == 0) Line("alloc-progress").num("mib", done + 1).emit();
  }
  Line("alloc").num("requested_mib", want).num("mib", done).boolean("ok", done == want).err(e).emit();
  return 0;
}

// ---------------------------------------------------------------- main

// Number of arguments each command takes (min, max; -1 = any).
struct Command {
  const char* name;
  int min_args;
  int max_args;
};

const Command kCommands[] = {
    {"status", 0, 0},     {"syscalls", 0, 1},   {"fds", 0, 0},         {"write-probe", 1, 1},
    {"read", 1, 1},       {"ls", 1, 1},         {"stat", 1, 1},        {"mounts", 0, 0},
    {"ps", 0, 0},         {"kill0", 1, -1},     {"tiocsti", 0, 0},     {"net", 0, 0},
    {"tcp-connect", 2, 2}, {"abstract-connect", 1, 1}, {"x32", 0, 0},  {"proc-exe", 0, 0},
    {"sleep", 1, -1},     {"fork-bomb", 0, 1},  {"mkfile", 2, 2},      {"mkinodes", 2, 2},
    {"alloc", 1, 1},      {"daemon", 1, 2},     {"link", 2, 2},
};

int run_one(const std::vector<const char*>& argv) {
  const std::string name = argv[0];
  const Command* cmd = nullptr;
  for (const Command& c : kCommands) {
    if (name == c.name) cmd = &c;
  }
  int nargs = static_cast<int>(argv.size()) - 1;
  if (cmd == nullptr) {
    usage_error("unknown command: " + name);
    return 2;
  }
  if (nargs < cmd->min_args || (cmd->max_args >= 0 && nargs > cmd->max_args)) {
    usage_error("wrong number of arguments for " + name);
    return 2;
  }
  const char* a1 = nargs >= 1 ? argv[1] : nullptr;
  const char* a2 = nargs >= 2 ? argv[2] : nullptr;
  std::vector<const char*> rest(argv.begin() + 1, argv.end());
  if (name == "status") return cmd_status();
  if (name == "syscalls") return cmd_syscalls(a1);
  if (name == "fds") return cmd_fds();
  if (name == "write-probe") return cmd_write_probe(a1);
  if (name == "read") return cmd_read(a1);
  if (name == "ls") return cmd_ls(a1);
  if (name == "stat") return cmd_stat(a1);
  if (name == "mounts") return cmd_mounts();
  if (name == "ps") return cmd_ps();
  if (name == "kill0") return cmd_kill0(rest);
  if (name == "tiocsti") return cmd_tiocsti();
  if (name == "net") return cmd_net();
  if (name == "tcp-connect") return cmd_tcp_connect(a1, a2);
  if (name == "abstract-connect") return cmd_abstract_connect(a1);
  if (name == "x32") return cmd_x32();
  if (name == "proc-exe") return cmd_proc_exe();
  if (name == "sleep") {
    return cmd_sleep(a1, std::vector<const char*>(argv.begin() + 2, argv.end()));
  }
  if (name == "fork-bomb") return cmd_fork_bomb(a1);
  if (name == "mkfile") return cmd_mkfile(a1, a2);
  if (name == "link") return cmd_link(a1, a2);
  if (name == "mkinodes") return cmd_mkinodes(a1, a2);
  if (name == "alloc") return cmd_alloc(a1);
  if (name == "daemon") return cmd_daemon(a1);  // a2: free-form token, unused
  usage_error("unhandled command: " + name);
  return 2;
}

}  // namespace

// corral_probe CMD [ARGS...] [+ CMD [ARGS...]]...
// Commands separated by a lone "+" run one after the other in the same
// process; the exit status is the first non-zero one.
int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    usage_error("usage: corral_probe COMMAND [ARGS...] [+ COMMAND [ARGS...]]...");
    return 2;
  }
  int rc = 0;
  std::vector<const char*> current;
  for (int i = 1; i <= argc; ++i) {
    if (i == argc || strcmp(argv[i], "+") == 0) {
      if (!current.empty()) {
        int r = run_one(current);
        if (rc == 0) rc = r;
      }
      current.clear();
    } else {
      current.push_back(argv[i]);
    }
  }
  return rc;
}
