#include "jail/seccomp_cache.h"

#include <fcntl.h>
#include <seccomp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "base/unique_fd.h"

namespace corral {

namespace {

constexpr std::size_t kMaxProgram = 4096;  // BPF_MAXINSNS

struct Fnv1a {
  std::uint64_t h = 1469598103934665603ULL;
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  }
  void add(std::string_view s) {
    add(s.data(), s.size());
    add("\0", 1);
  }
  template <typename T>
  void add_value(T v) {
    add(&v, sizeof v);
  }
};

}  // namespace

std::string seccomp_policy_key() { return seccomp_policy_key(seccomp_policy()); }

std::string seccomp_policy_key(std::span<const SeccompRule> rules) {
  Fnv1a f;
  const scmp_version* v = seccomp_version();
  f.add_value(v->major);
  f.add_value(v->minor);
  f.add_value(v->micro);
  f.add_value(seccomp_arch_native());
  // The shape of the program around the table: default deny with this
  // errno, the argument-rule complements (bump when the compiler changes).
  f.add("allowlist-v1");
  f.add_value(kSeccompDefaultErrno);
  for (const SeccompRule& r : rules) {
    f.add(r.syscall);
    f.add_value(static_cast<int>(r.action));
    f.add_value(r.errno_value);
    f.add_value(static_cast<int>(r.arg_op));
    f.add_value(r.arg_index);
    f.add_value(r.arg_mask);
    f.add_value(r.arg_values.size());
    for (auto value : r.arg_values) f.add_value(value);
    f.add_value(r.arches);
    f.add_value(r.optional);
    f.add_value(r.fallback_nr);
  }
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(f.h));
  return buf;
}

Result<std::vector<sock_filter>> load_seccomp_program(const std::string& cache_dir) {
  const std::string path = cache_dir + "/seccomp-" + seccomp_policy_key() + ".bpf";
  UniqueFd in(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st;
  if (in && fstat(in.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
      (st.st_mode & 022) == 0 && st.st_size > 0 &&
      st.st_size % static_cast<off_t>(sizeof(sock_filter)) == 0 &&
      static_cast<std::size_t>(st.st_size) <= kMaxProgram * sizeof(sock_filter)) {
    std::vector<sock_filter> program(static_cast<std::size_t>(st.st_size) / sizeof(sock_filter));
    if (read(in.get(), program.data(), static_cast<std::size_t>(st.st_size)) == st.st_size)
      return program;
  }
  auto program = compile_seccomp_filter(SeccompOptions{});
  if (!program) return program;
  // Publish atomically; a failure to cache only costs the next run time.
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  UniqueFd out(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (out) {
    const std::size_t bytes = program->size() * sizeof(sock_filter);
    bool written = write(out.get(), program->data(), bytes) == static_cast<ssize_t>(bytes);
    out.reset();
    if (!written || rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
  }
  return program;
}

}  // namespace corral
