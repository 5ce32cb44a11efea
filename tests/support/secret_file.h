// A secret store file for tests against a real daemon (docs/secrets.md):
// random values, so that a test can look for each one wherever it must
// never appear (outputs, audit log, snapshots, files of the host).
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/sandbox_harness.h"

namespace corral::testing {

// `n` letters of both cases and digits, without look-alikes (0/O, 1/l/I).
inline std::string random_token(std::size_t n) {
  static const char kAlphabet[] = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
  std::random_device rd;
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += kAlphabet[rd() % (sizeof kAlphabet - 1)];
  return s;
}

// The store file (KEY=VALUE lines, mode 0600) in a directory of its own,
// removed with it. Each key's value is `prefix` and `length` random
// characters.
struct SecretFile {
  std::string dir, path;
  std::map<std::string, std::string> values;

  explicit SecretFile(const std::vector<std::string>& keys, const std::string& prefix = "v-",
                      std::size_t length = 28)
      : dir(make_temp_dir("secrets")), path(dir + "/secrets") {
    std::ofstream out(path);
    for (const auto& k : keys) {
      values[k] = prefix + random_token(length);
      out << k << "=" << values[k] << "\n";
    }
    out.close();
    ::chmod(path.c_str(), 0600);
  }
  ~SecretFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  SecretFile(const SecretFile&) = delete;
  SecretFile& operator=(const SecretFile&) = delete;

  // The daemon's config that serves this store.
  std::string config() const { return "serve:\n  secrets:\n    file: " + path + "\n"; }
};

}  // namespace corral::testing
