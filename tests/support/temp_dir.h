// A private directory under /tmp for one test, removed with everything in
// it when the object goes (header-only: the unit tests link no harness).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <string>

namespace corral::testing {

class TempDir {
 public:
  // `prefix`: the directory's name before its random part ("corral-store-unit").
  explicit TempDir(const std::string& prefix) {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    char* d = mkdtemp(tmpl.data());
    EXPECT_NE(d, nullptr);
    path_ = d != nullptr ? d : "/nonexistent";
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    (void)std::system(cmd.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace corral::testing
