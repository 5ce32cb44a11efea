// A script of tests/npm run by node as a helper server for one test (the
// S3 server, the TLS front of tests/npm/tls_front.js): started, its port read
// from its first line "PORT <n>", and gone with the test (its stdin is our
// pipe, which it watches; PR_SET_PDEATHSIG too).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace corral::testing {

class NodeHelper {
 public:
  // `node [node_flags] tests/npm/<script> args...`, with `env` ("NAME=value")
  // added to the test's environment. kUnavailable (with why) when node or
  // `needs` (a path under tests/npm, e.g. an npm package) is missing: the
  // caller skips with CORRAL_SKIP_OR_FAIL.
  static Result<std::unique_ptr<NodeHelper>> start(const std::string& script,
                                                   const std::vector<std::string>& args,
                                                   const std::string& needs = "",
                                                   const std::vector<std::string>& node_flags = {},
                                                   const std::vector<std::string>& env = {});
  ~NodeHelper();
  NodeHelper(const NodeHelper&) = delete;
  NodeHelper& operator=(const NodeHelper&) = delete;

  int port() const { return port_; }

 private:
  NodeHelper() = default;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int port_ = 0;
};

}  // namespace corral::testing
