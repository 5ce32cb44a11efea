// `corral secrets keygen|encrypt|check` (src/cli/secrets_cmd.cc), run as a
// user runs them: exit codes, file modes, refusals, and that no value is
// ever printed.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

std::string random_value() {
  static constexpr char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::random_device rd;
  std::string v = "sk-";
  for (int i = 0; i < 32; ++i) v.push_back(kChars[rd() % 62]);
  return v;
}

class SecretsCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("secrets-cli"); }
  void TearDown() override {
    if (!dir_.empty()) host_sh("rm -rf '" + dir_ + "'");
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write(const std::string& name, const std::string& data, mode_t mode) const {
    {
      std::ofstream out(path(name), std::ios::binary | std::ios::trunc);
      out << data;
    }
    ASSERT_EQ(chmod(path(name).c_str(), mode), 0);
  }
  static mode_t mode_of(const std::string& p) {
    struct stat st {};
    EXPECT_EQ(stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  std::string dir_;
};

TEST_F(SecretsCli, KeygenEncryptCheck) {
  const std::string a = random_value();
  const std::string b = random_value();

  RunOutcome k = run_corral({"secrets", "keygen", "--out", path("key")});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  EXPECT_EQ(mode_of(path("key")), 0600u);
  const std::string key = read_host_file(path("key"));
  ASSERT_EQ(key.size(), 65u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), 64u);
  EXPECT_EQ(k.out.find(key.substr(0, 64)), std::string::npos);  // the key is not printed

  // Never overwritten.
  RunOutcome again = run_corral({"secrets", "keygen", "--out", path("key")});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("refusing to overwrite"), std::string::npos) << again.err;
  EXPECT_EQ(read_host_file(path("key")), key);

  // A plain file readable by others is refused.
  write("plain", "# store\nopenai=" + a + "\ngithub=" + b + "\n", 0644);
  RunOutcome open = run_corral(
      {"secrets", "encrypt", "--key", path("key"), "--in", path("plain"), "--out", path("enc")});
  EXPECT_EQ(open.exit_code, 1);
  EXPECT_NE(open.err.find("chmod 600"), std::string::npos) << open.err;
  EXPECT_EQ(access(path("enc").c_str(), F_OK), -1);

  ASSERT_EQ(chmod(path("plain").c_str(), 0600), 0);
  RunOutcome enc = run_corral(
      {"secrets", "encrypt", "--key", path("key"), "--in", path("plain"), "--out", path("enc")});
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  EXPECT_NE(enc.out.find("encrypted 2 keys"), std::string::npos) << enc.out;
  EXPECT_EQ(mode_of(path("enc")), 0600u);
  const std::string sealed = read_host_file(path("enc"));
  EXPECT_EQ(sealed.substr(0, 7), "CORRALS");
  EXPECT_EQ(sealed.find(a), std::string::npos);
  EXPECT_EQ(sealed.find(b), std::string::npos);

  RunOutcome over = run_corral(
      {"secrets", "encrypt", "--key", path("key"), "--in", path("plain"), "--out", path("enc")});
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_EQ(read_host_file(path("enc")), sealed);

  RunOutcome check =
      run_corral({"secrets", "check", "--encrypted", path("enc"), "--key=" + path("key")});
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_EQ(check.out, "github\tencrypted file " + path("enc") +
                           " line 3\nopenai\tencrypted file " + path("enc") + " line 2\n2 keys\n");

  // Both sources at once: the duplicate is named, the values are not.
  RunOutcome dup = run_corral({"secrets", "check", "--file", path("plain"), "--encrypted",
                               path("enc"), "--key", path("key")});
  EXPECT_EQ(dup.exit_code, 1);
  EXPECT_NE(dup.err.find("'openai' is defined twice: in file " + path("plain") +
                         " line 2 and in encrypted file " + path("enc") + " line 2"),
            std::string::npos)
      << dup.err;

  for (const RunOutcome* r : {&k, &again, &open, &enc, &over, &check, &dup}) {
    for (const std::string& v : {a, b}) {
      EXPECT_EQ(r->out.find(v), std::string::npos) << r->out;
      EXPECT_EQ(r->err.find(v), std::string::npos) << r->err;
    }
  }
}

TEST_F(SecretsCli, MalformedPlainFileNamesTheLineNotItsBytes) {
  const std::string v = random_value();
  RunOutcome k = run_corral({"secrets", "keygen", "--out", path("key")});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  write("plain", "ok=1\n" + v + "\n", 0600);
  RunOutcome enc = run_corral(
      {"secrets", "encrypt", "--key", path("key"), "--in", path("plain"), "--out", path("enc")});
  EXPECT_EQ(enc.exit_code, 1);
  EXPECT_NE(enc.err.find("line 2: no '='"), std::string::npos) << enc.err;
  EXPECT_EQ(enc.err.find(v), std::string::npos) << enc.err;
  EXPECT_EQ(enc.out.find(v), std::string::npos);
}

TEST_F(SecretsCli, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"secrets"},
                                             {"secrets", "bogus"},
                                             {"secrets", "keygen"},
                                             {"secrets", "keygen", "--out"},
                                             {"secrets", "keygen", "--out", "x", "--extra", "y"},
                                             {"secrets", "encrypt", "--key", "k"},
                                             {"secrets", "check"}}) {
    RunOutcome r = run_corral(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("usage: corral secrets"), std::string::npos) << r.err;
  }
  RunOutcome help = run_corral({"secrets", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("corral secrets keygen --out FILE"), std::string::npos);
}

}  // namespace
}  // namespace corral::testing
