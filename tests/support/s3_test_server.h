// A real S3-compatible server for the object-store tests (REQUIREMENTS D5):
// tests/npm/s3_server.js (@20minutes/s3rver, which checks SigV4 signatures)
// run by node on 127.0.0.1 (support/node_helper.h), one bucket, its files in
// a temp dir of the test.
//
// curl() is the second, independent client: `curl --aws-sigv4`, so a test
// reads what corral stored with code that is not corral's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "support/node_helper.h"

namespace corral::testing {

class S3TestServer {
 public:
  // A key pair of our own: the server's built-in S3RVER/S3RVER is shorter
  // than the secret store accepts (8 bytes at least).
  static constexpr const char* kAccessKey = "CORRALTESTACCESSKEY";
  static constexpr const char* kSecretKey = "corral-test-secret-key-0123456789";
  static constexpr const char* kRegion = "us-east-1";

  // kUnavailable (with why) when node or the npm package is missing: the
  // caller skips with CORRAL_SKIP_OR_FAIL.
  static Result<std::unique_ptr<S3TestServer>> start(const std::string& bucket);
  ~S3TestServer();

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(node_->port()); }
  const std::string& bucket() const { return bucket_; }

  struct CurlResult {
    int status = 0;       // HTTP status, 0 if curl failed
    std::string body;     // the answer's body
    std::string headers;  // the answer's header lines
  };
  // `method` on endpoint + `path` ("/bucket/key"), signed with `secret_key`;
  // `upload_file` is sent as the body (PUT), with its sha256 as
  // x-amz-content-sha256; `headers` are added as they are.
  CurlResult curl(const std::string& method, const std::string& path,
                  const std::string& upload_file = "", const std::vector<std::string>& headers = {},
                  const std::string& secret_key = kSecretKey) const;

 private:
  S3TestServer() = default;
  std::unique_ptr<NodeHelper> node_;
  std::string bucket_;
  std::string dir_;
};

}  // namespace corral::testing
