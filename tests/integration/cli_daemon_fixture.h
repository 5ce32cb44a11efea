// The fixture of the CLI's client verbs' tests (cli_client_test.cc,
// cli_task_test.cc): a real `corral serve` and a temp dir of the test's,
// with CORRAL_URL and CORRAL_API_KEY unset so that only the flags say
// where the daemon is.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>

#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {

class CliDaemonTest : public ::testing::Test {
 protected:
  explicit CliDaemonTest(std::string dir_tag) : dir_tag_(std::move(dir_tag)) {}

  void SetUp() override {
    unsetenv("CORRAL_URL");
    unsetenv("CORRAL_API_KEY");
    daemon_ = std::make_unique<TestDaemon>();
    ASSERT_TRUE(daemon_->ready()) << daemon_->output();
    dir_ = make_temp_dir(dir_tag_);
  }
  void TearDown() override {
    unsetenv("CORRAL_URL");
    unsetenv("CORRAL_API_KEY");
    daemon_.reset();  // destroys any sandbox a failed test left
    if (!dir_.empty()) host_sh("rm -rf '" + dir_ + "'");
  }

  std::unique_ptr<TestDaemon> daemon_;
  std::string dir_;

 private:
  std::string dir_tag_;
};

}  // namespace corral::testing
