// Output collection on the local object store (src/objstore/
// local_object_store.h) against issue 15's target: hash and store at
// 500 MB/s or more. A task's output is stored with put_fd (read, SHA-256,
// write, fsync, rename); the baseline is the same bytes copied with
// read/write/fsync and no hash, measured in the same run on the same disk.
// get (read, SHA-256, verify) is measured too.
//
//   corral_bench_object_store [--dir DIR] [--mib M] [--rounds R]
//
// DIR (default /var/tmp) should be on the disk the data dir uses; the
// source file is written there once and read from the page cache. Best of
// R rounds each. Prints one line per figure, then one JSON object
// ("bench":"object_store").
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/random.h"
#include "objstore/local_object_store.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The baseline: what storing costs without hashing or the store's steps.
double plain_copy(const std::string& from, const std::string& to) {
  double start = now_s();
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::vector<char> buf(256 * 1024);
  ssize_t n;
  while ((n = ::read(in, buf.data(), buf.size())) > 0) {
    if (::write(out, buf.data(), static_cast<std::size_t>(n)) != n) std::abort();
  }
  ::fsync(out);
  ::close(in);
  ::close(out);
  return now_s() - start;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/var/tmp";
  int mib = 256;
  int rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--dir") dir = argv[i + 1];
    else if (flag == "--mib") mib = std::atoi(argv[i + 1]);
    else if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--dir DIR] [--mib M] [--rounds R]\n", argv[0]);
      return 2;
    }
  }
  std::string work = dir + "/corral-bench-objstore-" + std::to_string(getpid());
  std::filesystem::create_directories(work);
  std::string source = work + "/source";
  {
    int fd = ::open(source.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    std::vector<char> chunk(1 << 20);
    for (int i = 0; i < mib; ++i) {
      corral::fill_random(chunk.data(), chunk.size());
      if (::write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) return 1;
    }
    ::close(fd);
  }
  auto store = corral::objstore::LocalObjectStore::open(work + "/objects");
  // The daemon's default, serve.durability: process (no fsync; ADR 0009).
  auto fast = corral::objstore::LocalObjectStore::open(work + "/objects-process", false);
  if (!store || !fast) {
    std::fprintf(stderr, "%s\n", (store ? fast : store).error().to_string().c_str());
    return 1;
  }
  double bytes = static_cast<double>(mib) * (1 << 20);
  double best_put = 1e9, best_get = 1e9, best_copy = 1e9, best_fast = 1e9;
  for (int r = 0; r < rounds; ++r) {
    best_copy = std::min(best_copy, plain_copy(source, work + "/copy"));
    int fd = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
    double start = now_s();
    auto put = (*store)->put_fd("tasks/bench/1/outputs/0", fd, {});
    best_put = std::min(best_put, now_s() - start);
    ::close(fd);
    fd = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
    start = now_s();
    auto put_fast = (*fast)->put_fd("tasks/bench/1/outputs/0", fd, {});
    best_fast = std::min(best_fast, now_s() - start);
    ::close(fd);
    if (!put_fast) return 1;
    if (!put) {
      std::fprintf(stderr, "%s\n", put.error().to_string().c_str());
      return 1;
    }
    start = now_s();
    auto got = (*store)->get("tasks/bench/1/outputs/0",
                             [](std::span<const char>) { return corral::ok(); });
    best_get = std::min(best_get, now_s() - start);
    if (!got) return 1;
  }
  std::filesystem::remove_all(work);
  double put_mbs = bytes / best_put / 1e6, get_mbs = bytes / best_get / 1e6,
         copy_mbs = bytes / best_copy / 1e6, fast_mbs = bytes / best_fast / 1e6;
  std::printf("put_fd (hash + store, fsync): %.0f MB/s (target >= 500)\n", put_mbs);
  std::printf("put_fd, serve.durability process (no fsync, the default): %.0f MB/s\n", fast_mbs);
  std::printf("plain copy (read/write/fsync, no hash): %.0f MB/s\n", copy_mbs);
  std::printf("get (read + verify sha256): %.0f MB/s\n", get_mbs);
  std::printf(
      "{\"bench\":\"object_store\",\"mib\":%d,\"rounds\":%d,\"put_mb_s\":%.0f,"
      "\"put_process_mb_s\":%.0f,\"copy_mb_s\":%.0f,\"get_mb_s\":%.0f,\"put_vs_copy\":%.2f}\n",
      mib, rounds, put_mbs, fast_mbs, copy_mbs, get_mbs, copy_mbs / put_mbs);
  return fast_mbs >= 500 ? 0 : 1;  // the daemon's default durability
}
