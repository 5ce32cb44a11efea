// A private directory under /tmp for one test, removed with everything in
// it when the object goes (header-only: the unit tests link no harness).
// Integration tests that start processes name theirs with
// sandbox_harness.h's make_temp_dir instead, so that a run killed midway
// has its dirs removed by the next one.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace corral::testing {

class TempDir {
 public:
  // `prefix`: the directory's name before its random part ("corral-store-unit").
  explicit TempDir(const std::string& prefix = "corral-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    char* d = mkdtemp(tmpl.data());
    EXPECT_NE(d, nullptr) << "mkdtemp(" << tmpl << ")";
    path_ = d != nullptr ? d : "/nonexistent";
  }
  ~TempDir() {
    if (path_ == "/nonexistent") return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    EXPECT_FALSE(ec) << "removing " << path_ << ": " << ec.message();
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `bytes` to the file `name` (created or truncated) with exactly
  // `mode` (chmod after the umask; private unless asked); returns its path.
  std::string write(const std::string& name, std::string_view bytes, mode_t mode = 0600) const {
    std::string p = file(name);
    {
      std::ofstream f(p, std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      EXPECT_TRUE(f.good()) << "writing " << p;
    }
    EXPECT_EQ(::chmod(p.c_str(), mode), 0) << p;
    return p;
  }

 private:
  std::string path_;
};

}  // namespace corral::testing
