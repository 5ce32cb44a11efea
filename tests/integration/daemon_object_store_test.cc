// The daemon opens serve.object_store at start (REQUIREMENTS D5;
// docs/config.md "object_store"): the default local store under the data
// dir, mode 0700; an s3 store whose credentials the secret store lacks, or
// that the service refuses, stops the start with what to fix; an
// unreachable service is a warning only.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "support/daemon_harness.h"
#include "support/s3_test_server.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"

namespace corral::testing {
namespace {

std::string s3_config(const std::string& endpoint, const std::string& secrets_file) {
  return "serve:\n  secrets:\n    file: " + secrets_file +
         "\n  object_store:\n    kind: s3\n    endpoint: " + endpoint +
         "\n    bucket: corral-test\n    prefix: daemon/\n    access_key_secret: s3_id\n"
         "    secret_key_secret: s3_key\n    timeout: 2s\n";
}

std::string secrets_file(const std::string& dir, const std::string& content) {
  std::string path = dir + "/secrets";
  std::ofstream(path) << content;
  chmod(path.c_str(), 0600);
  return path;
}

TEST(DaemonObjectStore, TheDefaultLocalStoreIsMadePrivateUnderTheDataDir) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  struct stat st {};
  ASSERT_EQ(stat((d.data_dir() + "/objects").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(stat((d.data_dir() + "/objects/~tmp").c_str(), &st), 0);
}

TEST(DaemonObjectStore, S3CredentialsMissingFromTheSecretStoreStopTheStart) {
  std::string dir = make_temp_dir("objstore-daemon");
  std::string secrets = secrets_file(dir, "s3_id=CORRALTESTACCESSKEY\n");  // no s3_key
  TestDaemon d({}, s3_config("http://127.0.0.1:9", secrets));
  EXPECT_FALSE(d.ready());
  EXPECT_TRUE(d.wait_output("secret_key_secret names secret s3_key, which the secret store does "
                            "not have"))
      << d.output();
  std::filesystem::remove_all(dir);
}

TEST(DaemonObjectStore, AnUnreachableS3ServiceIsAWarningOnly) {
  std::string dir = make_temp_dir("objstore-daemon");
  std::string secrets = secrets_file(dir, "s3_id=CORRALTESTACCESSKEY\ns3_key=corral-test-secret-key-0123456789\n");
  TestDaemon d({}, s3_config("http://127.0.0.1:9", secrets));  // discard port: refused
  ASSERT_TRUE(d.ready()) << d.output();
  EXPECT_TRUE(d.wait_output("warning: object store http://127.0.0.1:9/corral-test/daemon"))
      << d.output();
  std::filesystem::remove_all(dir);
}

TEST(DaemonObjectStore, RefusedS3CredentialsStopTheStartAndGoodOnesStartIt) {
  auto server = S3TestServer::start("corral-test");
  if (!server) CORRAL_SKIP_OR_FAIL("no S3 test server: " + server.error().to_string());
  std::string dir = make_temp_dir("objstore-daemon");
  {
    std::string secrets = secrets_file(dir, "s3_id=CORRALTESTACCESSKEY\ns3_key=wrong-secret-value\n");
    TestDaemon d({}, s3_config((*server)->endpoint(), secrets));
    EXPECT_FALSE(d.ready());
    EXPECT_TRUE(d.wait_output("SignatureDoesNotMatch")) << d.output();
    EXPECT_EQ(d.output().find("wrong-secret-value"), std::string::npos);
  }
  std::string secrets = secrets_file(dir, "s3_id=CORRALTESTACCESSKEY\ns3_key=corral-test-secret-key-0123456789\n");
  TestDaemon d({}, s3_config((*server)->endpoint(), secrets));
  EXPECT_TRUE(d.ready()) << d.output();
  EXPECT_EQ(d.output().find("warning: object store"), std::string::npos) << d.output();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace corral::testing
