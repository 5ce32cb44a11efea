// ThreadSanitizer builds only (CMakeLists.txt, CORRAL_TSAN): how corral's
// fork() and clone() calls reach clang-14's TSan runtime. Every executable
// of that build links this file, and the linker sends the program's calls
// to fork and clone here (-Wl,--wrap=fork,--wrap=clone). Other builds
// neither compile nor link it. tests/README.md "ThreadSanitizer" and
// docs/adr/0007-daemon-threads.md say why; in short:
//
// - fork(): TSan's interceptor starts its background thread in the child
//   of a process it counts as single-threaded (the daemon forking the
//   sandbox factory, the zygote forking its user-namespace helper, a test
//   forking a child for a LocalProvider). The child then has 2 threads
//   where corral's code expects 1: unshare(CLONE_NEWUSER) fails with
//   EINVAL, LocalProvider::open() refuses to start, and the netns code
//   takes its threaded path. That thread does nothing unless TSAN_OPTIONS
//   asks for memory flushing, an RSS limit or profiling, which corral's
//   runs do not. So it is stopped with the runtime's own switch for
//   sandboxes, __sanitizer_sandbox_on_notify(): once in the process that
//   forks first (the runtime registers that switch only once a thread has
//   been made, so a thread is made and joined first; the stop waits out
//   the thread's 100 ms sleep), and again in every child. Children inherit
//   the stop, so theirs ends at once.
// - clone(CLONE_VM): the zygote starts commands with CLONE_VM |
//   CLONE_VFORK (src/jail/zygote.cc). TSan's clone interceptor treats every
//   clone as a fork: the child re-attaches the runtime's per-thread state
//   after the clone, and the parent, sharing that state through CLONE_VM,
//   re-attaches it again when it resumes and stops on a CHECK ("((!thr->
//   slot)) != (0)" in SlotAttachAndLock) after its first command. glibc's
//   __clone (the same function, not intercepted) is called instead. The
//   child then runs as the suspended zygote's thread would, which is what
//   it is until it execs. Left behind: one entry of the zygote's TSan
//   shadow stack per command (the child's first frame, never returned
//   from), which is harmless until tens of thousands of commands in one
//   sandbox.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)

#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

extern "C" {
pid_t __real_fork();  // TSan's fork interceptor
int __real_clone(int (*fn)(void*), void* stack, int flags, void* arg, ...);  // TSan's
int __clone(int (*fn)(void*), void* stack, int flags, void* arg, ...);       // glibc's
pid_t __wrap_fork();
int __wrap_clone(int (*fn)(void*), void* stack, int flags, void* arg, ...);
}

namespace {

// Set once the background thread has been stopped in this process or the
// one it was forked from.
bool stopped = false;

void* do_nothing(void*) { return nullptr; }

// Another thread in a child that fork() has just returned in can only be
// TSan's: fork copies the calling thread alone. /proc/self/task has
// 2 + (number of threads) links; unknown (no /proc) counts as none. The
// check matters: a child of a process with threads gets no background
// thread, and stopping one there would wait for a thread that is not.
bool has_other_threads() {
  struct stat st;
  return stat("/proc/self/task", &st) == 0 && st.st_nlink > 3;
}

}  // namespace

extern "C" pid_t __wrap_fork() {
  if (!stopped) {
    pthread_t t;
    if (pthread_create(&t, nullptr, do_nothing, nullptr) == 0) {
      pthread_join(t, nullptr);
      __sanitizer_sandbox_on_notify(nullptr);
      stopped = true;
    }
  }
  const pid_t pid = __real_fork();
  if (pid == 0 && has_other_threads()) {
    __sanitizer_sandbox_on_notify(nullptr);
    // The join returns when the thread's tid is cleared, a moment before
    // the kernel drops it from the thread group; until then
    // unshare(CLONE_NEWUSER) still sees two threads (EINVAL; seen in 2 of
    // ~1000 TSan tests). Wait for it, bounded (1 s).
    for (int i = 0; i < 1000 && has_other_threads(); ++i) usleep(1000);
  }
  return pid;
}

extern "C" int __wrap_clone(int (*fn)(void*), void* stack, int flags, void* arg, ...) {
  // The optional arguments, as glibc's clone reads them: only those the
  // flags name are used.
  va_list ap;
  va_start(ap, arg);
  pid_t* parent_tid = va_arg(ap, pid_t*);
  void* tls = va_arg(ap, void*);
  pid_t* child_tid = va_arg(ap, pid_t*);
  va_end(ap);
  if ((flags & CLONE_VM) != 0) return __clone(fn, stack, flags, arg, parent_tid, tls, child_tid);
  return __real_clone(fn, stack, flags, arg, parent_tid, tls, child_tid);
}

#endif
#endif
