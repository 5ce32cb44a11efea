// The streaming redactor (src/secrets/redactor.h) against the targets of
// issue 5: with 1,000 secrets loaded (each with all its encoded forms, and
// the key formats on), throughput on one core >= 1 GB/s, and redaction on
// a 1 GiB exec-output stream at most 10% slower than without, measured in
// the same run.
//
//   corral_bench_redactor [--secrets N] [--mib M] [--gib G] [--rounds R]
//
// Throughput: random printable text (lines of 60-120 characters), clean
// and with a secret (a random one of the 1,000, in a random form) every
// ~64 KiB, fed in chunks of 4 KiB and 64 KiB; best of R passes over M MiB.
// Both wall-clock and the thread's CPU time are given (the machine may be
// shared). Pipeline: a producer thread writes G GiB into a pipe; the
// consumer reads 64 KiB at a time and writes to /dev/null, with and without
// the redactor, alternating, R rounds each; and the same from memory (no
// pipe), the worst case for the ratio. Prints one line per figure, then one
// JSON object ("bench":"redactor").
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "secrets/redactor.h"
#include "secrets/secret_encodings.h"

namespace {

using corral::secrets::NamedValue;
using corral::secrets::RedactionSet;
using corral::secrets::RedactStream;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::mt19937_64 rng{20261129};

std::string random_printable(std::size_t n) {
  std::uniform_int_distribution<int> c(0x20, 0x7e), line(60, 120);
  std::string s;
  s.reserve(n);
  int left = line(rng);
  while (s.size() < n) {
    if (--left == 0) {
      s.push_back('\n');
      left = line(rng);
    } else {
      s.push_back(static_cast<char>(c(rng)));
    }
  }
  return s;
}

struct Pass {
  double wall = 0;
  double cpu = 0;
  std::uint64_t redactions = 0;
};

Pass run_pass(const std::shared_ptr<const RedactionSet>& set, const std::string& data,
              std::size_t chunk) {
  RedactStream stream(set);
  std::string out;
  out.reserve(chunk * 2 + 4096);
  const double w0 = now_s(), c0 = cpu_s();
  std::size_t sink = 0;
  for (std::size_t at = 0; at < data.size(); at += chunk) {
    out.clear();
    stream.feed(std::string_view(data).substr(at, chunk), out);
    sink += out.size();
  }
  out.clear();
  stream.finish(out);
  sink += out.size();
  Pass p{now_s() - w0, cpu_s() - c0, stream.redactions()};
  if (sink == 0) std::abort();  // keeps the loop
  return p;
}

struct Throughput {
  double wall_gbps = 0;
  double cpu_gbps = 0;
  std::uint64_t redactions = 0;
};

Throughput best_of(const std::shared_ptr<const RedactionSet>& set, const std::string& data,
                   std::size_t chunk, int rounds) {
  Throughput t;
  for (int r = 0; r < rounds; ++r) {
    const Pass p = run_pass(set, data, chunk);
    t.wall_gbps = std::max(t.wall_gbps, static_cast<double>(data.size()) / p.wall / 1e9);
    t.cpu_gbps = std::max(t.cpu_gbps, static_cast<double>(data.size()) / p.cpu / 1e9);
    t.redactions = p.redactions;
  }
  return t;
}

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

struct PipeRun {
  double wall = 0;
  double consumer_cpu = 0;
};

// `total` bytes of `data` (repeated) through a pipe, read in 64 KiB chunks,
// optionally redacted, written to /dev/null.
PipeRun pipe_run(const std::shared_ptr<const RedactionSet>& set, const std::string& data,
                 std::size_t total, bool redact, bool through_pipe) {
  constexpr std::size_t kChunk = 64 * 1024;
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  int fds[2] = {-1, -1};
  if (through_pipe) {
    if (::pipe2(fds, O_CLOEXEC) != 0) std::abort();
    ::fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
  }
  std::thread producer;
  if (through_pipe) {
    producer = std::thread([&] {
      std::size_t sent = 0;
      while (sent < total) {
        const std::size_t at = sent % data.size();
        const std::size_t n = std::min({kChunk, data.size() - at, total - sent});
        if (!write_all(fds[1], data.data() + at, n)) break;
        sent += n;
      }
      ::close(fds[1]);
    });
  }
  RedactStream stream(set);
  std::string buf(kChunk, '\0');
  std::string out;
  out.reserve(2 * kChunk + 4096);
  const double w0 = now_s(), c0 = cpu_s();
  std::size_t got = 0;
  while (got < total) {
    ssize_t n;
    if (through_pipe) {
      n = ::read(fds[0], buf.data(), kChunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
    } else {
      const std::size_t at = got % data.size();
      n = static_cast<ssize_t>(std::min({kChunk, data.size() - at, total - got}));
      std::memcpy(buf.data(), data.data() + at, static_cast<std::size_t>(n));
    }
    got += static_cast<std::size_t>(n);
    if (redact) {
      out.clear();
      stream.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)), out);
      write_all(null_fd, out.data(), out.size());
    } else {
      write_all(null_fd, buf.data(), static_cast<std::size_t>(n));
    }
  }
  if (redact) {
    out.clear();
    stream.finish(out);
    write_all(null_fd, out.data(), out.size());
  }
  PipeRun r{now_s() - w0, cpu_s() - c0};
  if (producer.joinable()) producer.join();
  if (through_pipe) ::close(fds[0]);
  ::close(null_fd);
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int secrets_n = 1000, rounds = 5;
  std::size_t mib = 256, gib = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--secrets") secrets_n = std::atoi(argv[i + 1]);
    if (a == "--mib") mib = static_cast<std::size_t>(std::atol(argv[i + 1]));
    if (a == "--gib") gib = static_cast<std::size_t>(std::atol(argv[i + 1]));
    if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
  }

  // 1,000 secrets of 20 to 64 bytes; a quarter with characters that URL
  // encoding changes, so they have percent forms too.
  const std::string alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::uniform_int_distribution<std::size_t> len(20, 64), ch(0, alnum.size() - 1);
  std::vector<std::string> values;
  for (int i = 0; i < secrets_n; ++i) {
    std::string v;
    const std::size_t n = len(rng);
    for (std::size_t k = 0; k < n; ++k) v.push_back(alnum[ch(rng)]);
    if (i % 4 == 0) v += "/+=";
    values.push_back(v);
  }
  std::vector<NamedValue> secrets;
  for (int i = 0; i < secrets_n; ++i) {
    secrets.push_back({"SECRET_" + std::to_string(i), values[static_cast<std::size_t>(i)]});
  }
  const double b0 = now_s();
  auto built = RedactionSet::build(secrets);
  const double build_ms = (now_s() - b0) * 1e3;
  if (!built) {
    std::fprintf(stderr, "build: %s\n", built.error().to_string().c_str());
    return 1;
  }
  auto set = *built;
  auto off = *RedactionSet::build({}, {.key_formats = false});
  std::printf(
      "set: %d secrets, %zu literals, %zu patterns, built in %.0f ms, stream state %zu bytes, "
      "max hold %zu bytes\n",
      secrets_n, set->literal_count(), set->pattern_count(), build_ms, set->stream_state_size(),
      set->max_hold());

  const std::size_t size = mib << 20;
  const std::string clean = random_printable(size);
  std::string dirty = clean;
  std::uniform_int_distribution<int> pick(0, secrets_n - 1), form(0, 3);
  std::size_t inserted = 0;
  for (std::size_t at = 4096; at + 256 < dirty.size(); at += 64 * 1024) {
    const std::string& v = values[static_cast<std::size_t>(pick(rng))];
    std::vector<std::string> forms = corral::secrets::redaction_forms(v);
    const std::string& f = forms[static_cast<std::size_t>(form(rng)) % forms.size()];
    dirty.replace(at, f.size(), f);
    ++inserted;
  }

  struct Row {
    const char* name;
    const std::string* data;
    std::size_t chunk;
    Throughput t;
  };
  std::vector<Row> rows = {{"clean_4k", &clean, 4096, {}},
                           {"clean_64k", &clean, 65536, {}},
                           {"secrets_4k", &dirty, 4096, {}},
                           {"secrets_64k", &dirty, 65536, {}}};
  for (auto& row : rows) {
    row.t = best_of(set, *row.data, row.chunk, rounds);
    std::printf("%-12s %6.2f GB/s wall  %6.2f GB/s cpu  (%llu redactions)\n", row.name,
                row.t.wall_gbps, row.t.cpu_gbps, static_cast<unsigned long long>(row.t.redactions));
  }
  const Throughput pass = best_of(off, clean, 65536, rounds);
  std::printf("%-12s %6.2f GB/s wall  %6.2f GB/s cpu  (empty set: pass-through)\n", "empty_64k",
              pass.wall_gbps, pass.cpu_gbps);
  if (rows[3].t.redactions < inserted) {
    std::fprintf(stderr, "only %llu of %zu inserted secrets were redacted\n",
                 static_cast<unsigned long long>(rows[3].t.redactions), inserted);
    return 1;
  }

  // The pipeline, on vs off, alternating.
  const std::size_t total = gib << 30;
  std::vector<double> pipe_off, pipe_on, pipe_off_cpu, pipe_on_cpu, mem_off, mem_on;
  for (int r = 0; r < rounds; ++r) {
    PipeRun a = pipe_run(set, dirty, total, false, true);
    PipeRun b = pipe_run(set, dirty, total, true, true);
    pipe_off.push_back(a.wall);
    pipe_on.push_back(b.wall);
    pipe_off_cpu.push_back(a.consumer_cpu);
    pipe_on_cpu.push_back(b.consumer_cpu);
    mem_off.push_back(pipe_run(set, dirty, total, false, false).wall);
    mem_on.push_back(pipe_run(set, dirty, total, true, false).wall);
  }
  const double po = median(pipe_off), pn = median(pipe_on);
  const double poc = median(pipe_off_cpu), pnc = median(pipe_on_cpu);
  const double mo = median(mem_off), mn = median(mem_on);
  std::printf("pipe 1 GiB:   off %.3f s, on %.3f s: %+.1f%% (consumer CPU %.3f -> %.3f s)\n", po,
              pn, (pn / po - 1) * 100, poc, pnc);
  std::printf("memory 1 GiB: off %.3f s, on %.3f s: %+.1f%%\n", mo, mn, (mn / mo - 1) * 100);

  std::printf(
      "{\"bench\":\"redactor\",\"secrets\":%d,\"literals\":%zu,\"patterns\":%zu,"
      "\"build_ms\":%.0f,\"stream_state_bytes\":%zu,\"max_hold\":%zu,\"data_mib\":%zu,"
      "\"inserted\":%zu",
      secrets_n, set->literal_count(), set->pattern_count(), build_ms, set->stream_state_size(),
      set->max_hold(), mib, inserted);
  for (const auto& row : rows) {
    std::printf(",\"%s_gbps\":%.2f,\"%s_cpu_gbps\":%.2f", row.name, row.t.wall_gbps, row.name,
                row.t.cpu_gbps);
  }
  std::printf(
      ",\"empty_64k_gbps\":%.2f,\"pipe_gib\":%zu,\"pipe_off_s\":%.3f,\"pipe_on_s\":%.3f,"
      "\"pipe_overhead_pct\":%.1f,\"pipe_consumer_cpu_off_s\":%.3f,\"pipe_consumer_cpu_on_s\":%.3f,"
      "\"mem_off_s\":%.3f,\"mem_on_s\":%.3f,\"mem_overhead_pct\":%.1f}\n",
      pass.wall_gbps, gib, po, pn, (pn / po - 1) * 100, poc, pnc, mo, mn, (mn / mo - 1) * 100);
  return 0;
}
