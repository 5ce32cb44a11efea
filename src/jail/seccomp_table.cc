// The seccomp table (jail/seccomp_policy.h): what a sandbox may call, what
// it may not, and why. Default deny: a syscall missing here answers ENOSYS.
// docs/seccomp.md is the user-facing copy; keep them together.
#include <errno.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>

#include <initializer_list>

#include "jail/seccomp_policy.h"

namespace corral {

namespace {

constexpr unsigned kX86 = kSeccompX86_64;

// Every namespace flag clone(2) accepts. CLONE_NEWTIME is absent on
// purpose: for clone(2) that bit (0x80) is part of the exit-signal byte,
// and the kernel only honours it in clone3/unshare, both refused outright.
constexpr std::uint64_t kCloneNewFlags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |
                                         CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;

// The kernel reads these arguments as int / unsigned int.
constexpr std::uint64_t kLow32 = 0xffffffffULL;

// personality(2) values a sandbox may set. Only the "uname flavour" bits:
//  - PER_LINUX (0): the default, and how a program resets itself;
//  - PER_LINUX32 (8): uname reports i686 (linux32, setarch, 32-bit builds);
//  - UNAME26 (0x20000): uname reports 2.6.x, for old build scripts;
//  - PER_LINUX32 | UNAME26: both of the above together;
//  - 0xffffffff: query the current value without changing it.
// Everything else is refused, notably the flags that weaken exploit
// mitigations for the programs the sandbox runs next (ADDR_NO_RANDOMIZE
// turns ASLR off, READ_IMPLIES_EXEC makes readable memory executable,
// MMAP_PAGE_ZERO maps page 0) and the foreign personalities (SVr4, ...)
// that carry those flags.
const std::vector<std::uint64_t> kPersonalityAllowed = {
    PER_LINUX, PER_LINUX32, UNAME26, std::uint64_t{PER_LINUX32} | std::uint64_t{UNAME26},
    0xffffffffULL};

// Socket families a sandbox may create. The rest answer EAFNOSUPPORT, the
// errno of a kernel built without that family, so programs fall back.
const std::vector<std::uint64_t> kSocketFamiliesAllowed = {AF_UNIX, AF_INET, AF_INET6};

class Table {
 public:
  // Allowed calls, one `why` for a group of closely related ones.
  void allow(std::initializer_list<std::string_view> names, std::string_view why,
             unsigned arches = kSeccompAllArches) {
    for (std::string_view n : names) {
      rules_.push_back(
          {.syscall = n, .action = SeccompAction::kAllow, .arches = arches, .why = why});
    }
  }
  // An allowed call newer than the libseccomp corral builds with.
  void allow_new(std::string_view name, int nr, std::string_view why) {
    rules_.push_back({.syscall = name,
                      .action = SeccompAction::kAllow,
                      .optional = true,
                      .fallback_nr = nr,
                      .why = why});
  }
  // Refused on purpose, with EPERM.
  void deny(std::string_view name, std::string_view why, unsigned arches = kSeccompAllArches) {
    rules_.push_back({.syscall = name, .arches = arches, .why = why});
  }
  // Refused as if the kernel lacked it (ENOSYS, the default made explicit),
  // so programs take the path they take on kernels built without it.
  void absent(std::initializer_list<std::string_view> names, std::string_view why,
              unsigned arches = kSeccompAllArches) {
    for (std::string_view n : names) {
      rules_.push_back({.syscall = n, .errno_value = ENOSYS, .arches = arches, .why = why});
    }
  }
  void absent_new(std::string_view name, int nr, std::string_view why) {
    rules_.push_back(
        {.syscall = name, .errno_value = ENOSYS, .optional = true, .fallback_nr = nr, .why = why});
  }
  void add(SeccompRule rule) { rules_.push_back(std::move(rule)); }
  std::vector<SeccompRule> take() { return std::move(rules_); }

 private:
  std::vector<SeccompRule> rules_;
};

// Long because it is data: one row per allowed call, each with its why,
// grouped as docs/seccomp.md lists them; it has no branch worth a function.
void allowed_calls(Table& t) {
  // --- a process's own life
  t.allow({"exit", "exit_group", "restart_syscall", "rt_sigreturn"},
          "ending a thread or process, and the kernel's own resume paths");
  t.allow({"getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
           "getresgid", "getgroups", "getpgid", "getsid", "uname", "sysinfo", "getrusage", "times",
           "getcpu", "getrandom"},
          "reads facts about the caller or the (namespaced) system");
  t.allow({"getpgrp"}, "x86-64's older form of getpgid(0)", kX86);
  t.allow({"setsid", "setpgid"}, "job control: sessions and process groups of the caller");
  t.allow({"set_tid_address", "set_robust_list", "get_robust_list", "rseq"},
          "per-thread bookkeeping libc and the thread library set up at start");
  t.add({.syscall = "uretprobe",
         .action = SeccompAction::kAllow,
         .arches = kX86,
         .optional = true,
         .fallback_nr = 335,
         .why = "called by the kernel's return-probe trampoline when a host tracer probes the "
                "process; refusing it crashed traced programs on Linux 6.11-6.13"});
  t.allow({"arch_prctl"}, "x86-64 thread-local storage (FS/GS base) and CET set-up", kX86);
  t.allow({"prctl"},
          "per-process attributes (name, dumpable, no_new_privs, child subreaper...); the "
          "privileged options check capabilities the sandbox does not have");
  t.add({.syscall = "personality",
         .action = SeccompAction::kAllow,
         .why = "the uname flavour of the caller (linux32, setarch --uname-2.6)"});

  // --- other processes: create, run, wait, signal
  t.add({.syscall = "clone",
         .action = SeccompAction::kAllow,
         .why = "fork and threads; how glibc starts both once clone3 answers ENOSYS"});
  t.allow({"fork", "vfork"}, "x86-64's older forms of clone", kX86);
  t.add({.syscall = "setns",
         .action = SeccompAction::kAllow,
         .why = "joining a user namespace only (checked below): the zygote's children join the "
                "sandbox's command namespace after the filter is in place (ADR 0006); joining "
                "one needs CAP_SYS_ADMIN in it, which no sandbox process ever has"});
  t.allow({"execve", "execveat"}, "runs a program (execveat: fexecve)");
  t.allow({"wait4", "waitid"}, "waits for children");
  t.allow({"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"},
          "signals; the kernel lets a process signal only its own uid's processes, and the "
          "pid namespace holds only the sandbox's");
  t.allow({"pidfd_open", "pidfd_send_signal"}, "the race-free (pidfd) forms of waiting and kill");

  // --- signals
  t.allow({"rt_sigaction", "rt_sigprocmask", "rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait",
           "sigaltstack", "signalfd4"},
          "signal handlers, masks and waiting for signals");
  t.allow({"signalfd", "pause", "alarm"}, "x86-64's older signal calls", kX86);

  // --- memory
  t.allow({"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync"},
          "the caller's own address space");
  t.allow({"mlock", "mlock2", "mlockall", "munlock", "munlockall"},
          "keeps the caller's pages in RAM (key material); bounded by RLIMIT_MEMLOCK");
  t.allow({"membarrier"}, "memory barriers across the caller's threads (JVM, .NET, liburcu)");
  t.allow({"memfd_create"}, "anonymous files (JIT code, shared buffers), counted in the cgroup");
  t.allow({"pkey_alloc", "pkey_free", "pkey_mprotect"},
          "memory protection keys: the caller restricting its own access (V8, glibc)");
  t.allow({"map_shadow_stack"}, "shadow stacks for control-flow protection (CET, GCS)");
  t.allow_new("mseal", 462, "seals the caller's own mappings against change; restricts only");

  // --- time
  t.allow(
      {"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "getitimer",
       "setitimer", "timer_create", "timer_delete", "timer_gettime", "timer_settime",
       "timer_getoverrun", "timerfd_create", "timerfd_gettime", "timerfd_settime"},
      "reads clocks, sleeps and runs timers; setting a clock is refused below");
  t.allow({"time"}, "x86-64's older clock read", kX86);

  // --- scheduling, threads, priorities
  t.allow({"futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue"},
          "the lock primitive of every thread library");
  t.allow(
      {"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
       "sched_getscheduler", "sched_setscheduler", "sched_getattr", "sched_setattr",
       "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval"},
      "CPU placement and policy of the caller's own threads; real-time classes need "
      "CAP_SYS_NICE, which the sandbox lacks, and the cgroup caps the CPU time");
  t.allow({"getpriority", "setpriority", "ioprio_get", "ioprio_set"},
          "nice values and I/O priority; raising them above the default needs CAP_SYS_NICE");
  t.allow({"getrlimit", "setrlimit", "prlimit64"},
          "resource limits; they can only be lowered without CAP_SYS_RESOURCE");

  // --- file descriptors and I/O
  t.allow(
      {"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
       "pwritev2", "lseek", "close", "close_range", "dup", "dup3", "fcntl", "flock", "pipe2"},
      "I/O on the descriptors the caller holds");
  t.allow({"dup2", "pipe"}, "x86-64's older forms of dup3 and pipe2", kX86);
  t.allow({"sendfile", "splice", "tee", "vmsplice", "copy_file_range"},
          "copies between descriptors without a user buffer (cp, web servers)");
  t.allow({"fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "fadvise64", "readahead",
           "fallocate", "ftruncate", "truncate"},
          "file data: flushing, caching hints, sizes");
  t.add({.syscall = "ioctl",
         .action = SeccompAction::kAllow,
         .why = "device and terminal control on descriptors the caller holds (isatty, FIONREAD, "
                "terminal size); the two requests that type into a terminal are refused below"});

  // --- waiting for events
  t.allow({"pselect6", "ppoll", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2",
           "eventfd2", "inotify_init1", "inotify_add_watch", "inotify_rm_watch"},
          "waits for descriptors, events and file changes the caller can see");
  t.allow({"select", "poll", "epoll_create", "epoll_wait", "eventfd", "inotify_init"},
          "x86-64's older forms of the calls above", kX86);

  // --- files and directories, by path
  t.allow({"openat",     "openat2",    "fstat",      "newfstatat", "statx",     "statfs",
           "fstatfs",    "faccessat",  "faccessat2", "getcwd",     "chdir",     "fchdir",
           "getdents64", "mkdirat",    "unlinkat",   "renameat",   "renameat2", "linkat",
           "symlinkat",  "readlinkat", "mknodat",    "umask",      "utimensat", "cachestat"},
          "the file system the sandbox sees; its mounts, read-only binds and Landlock decide "
          "what a path reaches (mknod of a device needs CAP_MKNOD; fifos and sockets are fine)");
  t.allow({"open", "creat", "stat", "lstat", "access", "getdents", "mkdir", "rmdir", "unlink",
           "rename", "link", "symlink", "readlink", "mknod", "utime", "utimes", "futimesat"},
          "x86-64's older, non-*at forms of the calls above", kX86);
  t.allow({"fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat"},
          "modes and owners of files the caller owns (or may change with the --root "
          "capabilities); setuid bits are void under nosuid mounts and no_new_privs");
  t.allow({"chmod", "chown", "lchown"}, "x86-64's older forms of fchmodat and fchownat", kX86);
  t.allow({"getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "listxattr",
           "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr"},
          "extended attributes (user.*, ACLs); trusted.* and security.* need capabilities");
  t.allow_new("setxattrat", 463, "the *at form of setxattr (Linux 6.13)");
  t.allow_new("getxattrat", 464, "the *at form of getxattr (Linux 6.13)");
  t.allow_new("listxattrat", 465, "the *at form of listxattr (Linux 6.13)");
  t.allow_new("removexattrat", 466, "the *at form of removexattr (Linux 6.13)");
  t.allow_new("file_getattr", 468, "inode flags by path, as the FS_IOC_FSGETXATTR ioctl does");
  t.allow_new("file_setattr", 469, "inode flags by path, as the FS_IOC_FSSETXATTR ioctl does");

  // --- credentials
  t.allow({"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid",
           "setfsgid", "setgroups", "capget", "capset"},
          "ids and capabilities inside the sandbox's user namespace; corral's own spawn path "
          "sets them after the filter is in place; without CAP_SETUID they only shuffle the "
          "caller's own ids");

  // --- sockets (the family is checked below)
  t.add({.syscall = "socket",
         .action = SeccompAction::kAllow,
         .why = "network and local sockets: unix, inet and inet6 only"});
  t.add({.syscall = "socketpair",
         .action = SeccompAction::kAllow,
         .why = "connected socket pairs (unix); same families as socket"});
  t.allow({"bind", "listen", "accept", "accept4", "connect", "shutdown", "getsockname",
           "getpeername", "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg",
           "sendmmsg", "recvmmsg"},
          "use of sockets the caller made; the network namespace and egress proxy decide "
          "where they lead");

  // --- inter-process communication inside the sandbox's IPC namespace
  t.allow({"msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl",
           "shmget", "shmat", "shmdt", "shmctl"},
          "System V IPC (PostgreSQL, some build tools); the sandbox has an IPC namespace of "
          "its own");
  t.allow({"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr"},
          "POSIX message queues, in the sandbox's IPC namespace");
  t.allow({"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents"},
          "Linux native AIO (databases, libaio); unlike io_uring every request is a plain "
          "call seccomp sees");

  // --- restricting oneself further
  t.allow({"seccomp"}, "a program may add filters of its own; a filter can only restrict");
  t.allow({"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"},
          "Landlock only ever restricts its caller; programs may sandbox themselves further");
}

void argument_filters(Table& t) {
  using Op = SeccompArgOp;
  t.add({.syscall = "clone",
         .arg_op = Op::kMaskedAnyBitSet,
         .arg_index = 0,
         .arg_mask = kCloneNewFlags,
         .why = "clone with a CLONE_NEW* flag is unshare by another name; plain fork and "
                "threads stay allowed"});
  t.add({.syscall = "setns",
         .arg_op = Op::kNotInSet,
         .arg_index = 1,
         .arg_mask = kLow32,
         .arg_values = {CLONE_NEWUSER},
         .why = "joining any other namespace (or any type, 0) through a passed or leaked fd "
                "steps out of the sandbox's view; only a user namespace may be joined"});
  t.add({.syscall = "personality",
         .arg_op = Op::kNotInSet,
         .arg_index = 0,
         .arg_mask = kLow32,
         .arg_values = kPersonalityAllowed,
         .why = "flags like ADDR_NO_RANDOMIZE and READ_IMPLIES_EXEC switch off exploit "
                "mitigations; only the uname flavours and the query pass"});
  t.add({.syscall = "ioctl",
         .arg_op = Op::kEqual,
         .arg_index = 1,
         .arg_mask = kLow32,
         .arg_values = {TIOCSTI},
         .why = "TIOCSTI pushes keystrokes into a terminal's input, typing commands into a "
                "shared host tty"});
  t.add({.syscall = "ioctl",
         .arg_op = Op::kEqual,
         .arg_index = 1,
         .arg_mask = kLow32,
         .arg_values = {TIOCLINUX},
         .why = "TIOCLINUX selection paste injects text into a virtual console, like TIOCSTI"});
  t.add({.syscall = "socket",
         .errno_value = EAFNOSUPPORT,
         .arg_op = Op::kNotInSet,
         .arg_index = 0,
         .arg_mask = kLow32,
         .arg_values = kSocketFamiliesAllowed,
         .why = "families beyond unix/inet/inet6 (netlink, packet, vsock, bluetooth...) are "
                "rarely needed kernel code with a long bug history"});
  t.add({.syscall = "socketpair",
         .errno_value = EAFNOSUPPORT,
         .arg_op = Op::kNotInSet,
         .arg_index = 0,
         .arg_mask = kLow32,
         .arg_values = kSocketFamiliesAllowed,
         .why = "creates sockets of the named family before it fails, so same families as "
                "socket"});
}

void refused_calls(Table& t) {
  // --- namespaces and mounts: corral built the sandbox's view; nothing inside may remake it
  t.deny("unshare",
         "new namespaces hand the sandbox CAP_SYS_ADMIN over fresh kernel objects, the entry "
         "point of most namespace exploits; corral already made every one needed");
  t.add({.syscall = "clone3",
         .errno_value = ENOSYS,
         .why = "its flags sit in memory seccomp cannot read, so namespace flags cannot be "
                "refused; ENOSYS makes libc fall back to clone(2), which is checked"});
  t.deny("mount", "remounting could lift a read-only bind or uncover a masked /proc path");
  t.deny("umount2", "unmounting uncovers what corral's masks and binds hide");
  t.deny("pivot_root",
         "only a container runtime needs to swap roots; it exercises mount internals");
  t.deny("chroot", "nested roots are a classic escape primitive and confuse path-based checks");
  t.deny("move_mount", "new mount API: attaches a mount like mount(2) does");
  t.deny("open_tree",
         "new mount API: clones a mount tree into an fd that can be reattached or changed");
  t.add({.syscall = "open_tree_attr",
         .optional = true,
         .fallback_nr = 467,
         .why = "open_tree plus mount_setattr in one call (Linux 6.15); same surface as both"});
  t.deny("fsopen", "new mount API: creates a filesystem context, the parser behind CVE-2022-0185");
  t.deny("fsconfig", "new mount API: feeds mount options to a filesystem context's parser");
  t.deny("fsmount", "new mount API: turns a configured context into a mount");
  t.deny("fspick", "new mount API: reopens an existing superblock for reconfiguration");
  t.deny("mount_setattr", "changes mount flags (read-only, nosuid, idmap) of a mount tree");
  t.deny("sethostname", "the sandbox's host name is corral's to set (--hostname)");
  t.deny("setdomainname", "the sandbox's NIS domain name is corral's to set, like the host name");

  // --- kernel subsystems with a long exploit history and no use in a sandbox
  t.deny("keyctl", "kernel keyrings are not fully namespaced and have a long bug history");
  t.deny("add_key", "creates kernel keys; see keyctl");
  t.deny("request_key",
         "asks the kernel (and its upcall helpers on the host) for a key; see keyctl");
  t.deny("bpf", "loads programs into the kernel verifier and JIT, a frequent escalation path");
  t.deny("perf_event_open",
         "performance counters leak kernel addresses, open side channels, and are a common "
         "exploit target");
  t.deny("userfaultfd",
         "pauses the kernel inside a user copy, the standard way to win kernel races");
  t.deny("io_uring_setup",
         "io_uring runs I/O that seccomp never sees and has had many escalation bugs");
  t.deny("io_uring_enter", "submits io_uring work; see io_uring_setup");
  t.deny("io_uring_register", "configures an io_uring; see io_uring_setup");

  // --- reaching into other processes
  t.deny("ptrace",
         "a tracer rewrites another task's memory and syscalls (before Linux 4.8 that also "
         "undid the tracee's seccomp checks)");
  t.deny("process_vm_readv", "reads another process's memory (ptrace-like)");
  t.deny("process_vm_writev", "writes another process's memory (ptrace-like)");
  t.deny("process_madvise",
         "applies memory advice to another process's pages, on ptrace-like rights");
  t.deny("kcmp", "compares kernel objects of two processes, leaking kernel pointer order");
  t.deny("pidfd_getfd", "copies a file descriptor out of another process");

  // --- host administration: the kernel, modules, power, swap, accounting
  t.deny("kexec_load", "replaces the running kernel");
  t.deny("kexec_file_load", "replaces the running kernel");
  t.deny("init_module", "loads code into the kernel");
  t.deny("finit_module", "loads code into the kernel");
  t.deny("delete_module", "unloads kernel modules the host relies on");
  t.deny("reboot", "reboots or halts (in a pid namespace: kills the sandbox's init)");
  t.deny("swapon", "adds host swap");
  t.deny("swapoff", "removes host swap");
  t.deny("acct",
         "process accounting writes a record of every exit to a file of the caller's choosing");
  t.deny("quotactl", "disk quota administration of host filesystems");
  t.deny("quotactl_fd", "disk quota administration, by fd");
  t.deny("syslog", "reads (kernel addresses, host events) or clears the kernel log");
  t.deny("vhangup", "hangs up the controlling terminal, which may be the host's");

  // --- the clock is shared with the host (a time namespace only covers monotonic clocks)
  t.deny("settimeofday", "sets the host's wall clock");
  t.deny("clock_settime", "sets the host's wall clock");
  t.deny("clock_adjtime", "adjusts the host's clock (and reads NTP state)");
  t.deny("adjtimex", "adjusts the host's clock (and reads NTP state)");

  // --- hardware and obsolete interfaces
  t.deny("iopl", "x86 only: raw I/O port access for the whole process", kX86);
  t.deny("ioperm", "x86 only: raw I/O port access for a port range", kX86);
  t.deny("uselib", "obsolete a.out library loader; dead code the sandbox should not reach", kX86);
  t.deny("lookup_dcookie", "obsolete profiling hook that turns a kernel cookie into a path");
  t.deny("nfsservctl", "removed NFS server control; nothing legitimate calls it");

  // --- file handles: they ignore the mount namespace
  t.deny("open_by_handle_at",
         "opens any file of a filesystem by handle, ignoring the sandbox's mounts (the 2014 "
         "'shocker' container escape)");
  t.deny("name_to_handle_at",
         "mints the handles open_by_handle_at uses, and reveals inode identities");
  t.deny("fanotify_init",
         "filesystem-wide event and permission hooks, meant for host virus scanners");

  // --- as if the kernel lacked them (ENOSYS): programs fall back
  t.absent({"modify_ldt"},
           "x86 segment descriptors, for 16-bit code and old Wine only; a kernel built without "
           "CONFIG_MODIFY_LDT_SYSCALL answers the same",
           kX86);
  t.absent({"mbind", "set_mempolicy", "get_mempolicy", "migrate_pages", "move_pages",
            "set_mempolicy_home_node"},
           "NUMA memory policy and page migration, which a sandbox on a cgroup-limited CPU "
           "share has no use for; libnuma reads ENOSYS as 'no NUMA' and goes on");
  t.absent({"memfd_secret"},
           "memory removed from the kernel's own mappings; off unless the host boots with "
           "secretmem, and no common program needs it");
  t.absent({"fanotify_mark"}, "useless without fanotify_init, which is refused");
  t.absent({"process_mrelease"}, "reaps the memory of a killed process, for out-of-memory daemons");
  t.absent({"remap_file_pages"}, "deprecated and emulated since Linux 3.16");
  t.absent({"get_thread_area", "set_thread_area"},
           "x86 32-bit thread-local storage; 64-bit code uses arch_prctl, and 32-bit "
           "syscalls are killed anyway",
           kX86);
  t.absent({"sysfs", "ustat", "_sysctl"}, "obsolete interfaces long replaced by /proc and /sys",
           kX86);
  t.absent_new("statmount", 457,
               "mount details (Linux 6.8); libmount falls back to /proc/self/mountinfo");
  t.absent_new("listmount", 458, "lists mount ids (Linux 6.8); see statmount");
  t.absent_new("lsm_get_self_attr", 459,
               "the caller's LSM labels (Linux 6.8); programs fall back to /proc/self/attr");
  t.absent_new("lsm_set_self_attr", 460, "sets the caller's LSM labels (Linux 6.8)");
  t.absent_new("lsm_list_modules", 461, "lists the active LSMs (Linux 6.8)");
}

std::vector<SeccompRule> build_policy() {
  Table t;
  allowed_calls(t);
  argument_filters(t);
  refused_calls(t);
  return t.take();
}

}  // namespace

const std::vector<SeccompRule>& seccomp_policy() {
  static const std::vector<SeccompRule> policy = build_policy();
  return policy;
}

}  // namespace corral
