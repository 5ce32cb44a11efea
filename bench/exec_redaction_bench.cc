// The cost of redaction on a 1 GiB exec output stream, on versus off in
// the same run (issue 5's second performance target), on the path the
// daemon's streamed exec takes (src/daemon/exec_api.cc): a producer
// writes output into a pipe; the daemon side reads it in 64 KiB chunks,
// redacts (or not), makes each chunk an ndjson exec event (api::exec_output_json,
// the same codec), and writes it to a socket; a client drains the socket.
// Three threads, one per party; rounds alternate off and on. The redactor
// is the sandbox's: N random secrets of 20-64 bytes plus the key formats.
//
//   corral_bench_exec_redaction [--gib G] [--rounds R] [--secrets N,N,...]
//
// Last line: one JSON object ("bench":"exec_redaction").
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/api_model.h"
#include "secrets/redactor.h"

namespace {

using corral::secrets::NamedValue;
using corral::secrets::RedactionSet;
using corral::secrets::RedactStream;

double cpu_s() {  // this thread's CPU time: the daemon side's own cost
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Printable lines, as a build or a test run prints them.
std::string make_text(std::size_t bytes, std::mt19937_64& rng) {
  static const char kChars[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;-_/=()[]{}";
  std::string s;
  s.reserve(bytes);
  while (s.size() < bytes) {
    std::size_t line = 60 + rng() % 61;
    for (std::size_t i = 0; i < line && s.size() < bytes; ++i)
      s.push_back(kChars[rng() % (sizeof kChars - 1)]);
    s.push_back('\n');
  }
  s.resize(bytes);
  return s;
}

// One round: seconds to move `total` bytes from producer to client, and
// the daemon side's CPU seconds (in *cpu).
double round_trip(const std::string& text, std::uint64_t total,
                  std::shared_ptr<const RedactionSet> set, double* cpu) {
  int out[2];
  int sock[2];
  if (::pipe(out) != 0 || ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) != 0)
    std::abort();
  const double t0 = now_s();
  const double c0 = cpu_s();
  std::thread producer([&] {
    std::uint64_t left = total;
    while (left > 0) {
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, text.size()));
      write_all(out[1], text.data(), n);
      left -= n;
    }
    ::close(out[1]);
  });
  std::thread client([&] {
    std::string buf(256 * 1024, '\0');
    while (::read(sock[1], buf.data(), buf.size()) > 0) {
    }
  });
  {
    std::optional<RedactStream> stream;
    if (set) stream.emplace(set);
    std::string chunk(64 * 1024, '\0'), clean;
    auto emit = [&](std::string_view data) {
      if (data.empty()) return;
      std::string line = corral::api::exec_output_json(corral::api::ExecEvent::kStdout, data);
      line.push_back('\n');
      write_all(sock[0], line.data(), line.size());
    };
    ssize_t n;
    while ((n = ::read(out[0], chunk.data(), chunk.size())) > 0) {
      std::string_view data(chunk.data(), static_cast<std::size_t>(n));
      if (stream) {
        clean.clear();
        stream->feed(data, clean);
        emit(clean);
      } else {
        emit(data);
      }
    }
    if (stream) {
      clean.clear();
      stream->finish(clean);
      emit(clean);
    }
    ::shutdown(sock[0], SHUT_WR);
  }
  *cpu = cpu_s() - c0;
  producer.join();
  client.join();
  const double t = now_s() - t0;
  ::close(out[0]);
  ::close(sock[0]);
  ::close(sock[1]);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 1;
  int rounds = 3;
  std::vector<int> sizes{5, 32};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--gib") gib = std::atof(argv[i + 1]);
    if (a == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--secrets") {
      sizes.clear();
      std::stringstream ss(argv[i + 1]);
      std::string item;
      while (std::getline(ss, item, ',')) sizes.push_back(std::atoi(item.c_str()));
    }
  }
  std::mt19937_64 rng(42);
  const std::string text = make_text(1 << 20, rng);
  const auto total = static_cast<std::uint64_t>(gib * (1ull << 30));
  std::printf("exec stream of %.2f GiB: pipe -> 64 KiB reads -> [redact] -> ndjson -> socket\n",
              gib);
  std::string json = "{\"bench\":\"exec_redaction\",\"gib\":" + std::to_string(gib) + ",\"sets\":[";
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    std::vector<std::string> values;
    for (int i = 0; i < sizes[k]; ++i) {
      std::string v;
      std::size_t len = 20 + rng() % 45;
      for (std::size_t j = 0; j < len; ++j) v.push_back(static_cast<char>('!' + rng() % 94));
      values.push_back(v);
    }
    std::vector<NamedValue> named;
    for (int i = 0; i < sizes[k]; ++i) named.push_back({"s" + std::to_string(i), values[i]});
    auto set = RedactionSet::build(std::move(named));
    if (!set) {
      std::fprintf(stderr, "build: %s\n", set.error().message.c_str());
      return 1;
    }
    std::vector<double> off, on, off_cpu, on_cpu;
    for (int r = 0; r < rounds; ++r) {
      double c = 0;
      off.push_back(round_trip(text, total, nullptr, &c));
      off_cpu.push_back(c);
      on.push_back(round_trip(text, total, *set, &c));
      on_cpu.push_back(c);
    }
    const double m_off = median(off), m_on = median(on);
    const double c_off = median(off_cpu), c_on = median(on_cpu);
    const double pct = (m_on / m_off - 1) * 100;
    const double cpu_pct = (c_on / c_off - 1) * 100;
    std::printf(
        "  %4d secrets: wall off %.3f s, on %.3f s (%+.1f%%); daemon-side CPU off %.3f s, on "
        "%.3f s (%+.1f%%)\n",
        sizes[k], m_off, m_on, pct, c_off, c_on, cpu_pct);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s{\"secrets\":%d,\"off_s\":%.3f,\"on_s\":%.3f,\"pct\":%.1f,"
                  "\"cpu_off_s\":%.3f,\"cpu_on_s\":%.3f,\"cpu_pct\":%.1f}",
                  k ? "," : "", sizes[k], m_off, m_on, pct, c_off, c_on, cpu_pct);
    json += buf;
  }
  json += "]}";
  std::printf("%s\n", json.c_str());
  return 0;
}
