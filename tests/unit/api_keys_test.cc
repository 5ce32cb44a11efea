#include "daemon/api_keys.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "support/skip.h"

namespace corral {
namespace {

constexpr std::string_view kKeyA = "alpha-key-0123456789";
constexpr std::string_view kKeyB = "bravo-key-ABCDEFGHIJ";

class ApiKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-apikeys-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      ::chmod(dir_.c_str(), 0700);
      std::string cmd = "rm -rf '" + dir_ + "'";
      ASSERT_EQ(std::system(cmd.c_str()), 0);
    }
  }

  std::string write_file(const std::string& name, const std::string& content, mode_t mode) {
    std::string path = dir_ + "/" + name;
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << content;
    }
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }

  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    return names;
  }

  std::string dir_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(ApiKeysTest, EmptyVerifiesNothing) {
  ApiKeys keys;
  EXPECT_TRUE(keys.empty());
  EXPECT_FALSE(keys.verify(""));
  EXPECT_FALSE(keys.verify(kKeyA));
  auto loaded = ApiKeys::load({}, {});
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(loaded->empty());
}

TEST_F(ApiKeysTest, HashesVerifyTheirKeysOnly) {
  std::string upper = sha256_hex(kKeyB);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto keys = ApiKeys::load({sha256_hex(kKeyA), upper}, {});
  ASSERT_TRUE(keys.has_value()) << keys.error().to_string();
  EXPECT_FALSE(keys->empty());
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->verify(kKeyA));
  EXPECT_TRUE(keys->verify(kKeyB));
  EXPECT_FALSE(keys->verify("alpha-key-012345678"));    // one short
  EXPECT_FALSE(keys->verify("alpha-key-01234567890"));  // one more
  EXPECT_FALSE(keys->verify("Alpha-key-0123456789"));
  EXPECT_FALSE(keys->verify(""));
  EXPECT_FALSE(keys->verify(sha256_hex(kKeyA)));  // the digest is not the key
}

TEST_F(ApiKeysTest, RefusesMalformedHashes) {
  for (const std::string& bad : {std::string("abc"), sha256_hex(kKeyA) + "0",
                                 sha256_hex(kKeyA).substr(1) + "g", std::string(64, ' ')}) {
    auto keys = ApiKeys::load({sha256_hex(kKeyB), bad}, {});
    ASSERT_FALSE(keys.has_value()) << bad;
    EXPECT_EQ(keys.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(keys.error().message.find("api_keys.sha256[1]"), std::string::npos)
        << keys.error().message;
    EXPECT_NE(keys.error().message.find("64 hex digits"), std::string::npos);
  }
}

TEST_F(ApiKeysTest, KeyFileWithCommentsBlanksAndCrlf) {
  std::string path = write_file("keys",
                                "# corral API keys\n"
                                "\n" +
                                    std::string(kKeyA) +
                                    "\r\n"
                                    "   \t\n"
                                    "  # indented comment\n"
                                    "\t" +
                                    std::string(kKeyB) + "  \n",
                                0600);
  auto keys = ApiKeys::load({}, {path});
  ASSERT_TRUE(keys.has_value()) << keys.error().to_string();
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->verify(kKeyA));
  EXPECT_TRUE(keys->verify(kKeyB));
  EXPECT_FALSE(keys->verify("# corral API keys"));
}

TEST_F(ApiKeysTest, KeyFilesAndHashesTogether) {
  std::string path = write_file("keys", std::string(kKeyA) + "\n", 0400);
  auto keys = ApiKeys::load({sha256_hex(kKeyB)}, {path});
  ASSERT_TRUE(keys.has_value()) << keys.error().to_string();
  EXPECT_TRUE(keys->verify(kKeyA));
  EXPECT_TRUE(keys->verify(kKeyB));
}

TEST_F(ApiKeysTest, RefusesKeyFileOpenToGroupOrOthers) {
  for (mode_t mode : {0644, 0640, 0604, 0602, 0620, 0660}) {
    std::string path = write_file("keys", std::string(kKeyA) + "\n", mode);
    auto keys = ApiKeys::load({}, {path});
    ASSERT_FALSE(keys.has_value()) << std::oct << mode;
    EXPECT_EQ(keys.error().code, ErrorCode::kPermissionDenied);
    EXPECT_NE(keys.error().to_string().find("chmod 600 " + path), std::string::npos)
        << keys.error().to_string();
    EXPECT_EQ(keys.error().to_string().find(kKeyA), std::string::npos);
  }
}

TEST_F(ApiKeysTest, RefusesSymlinkedKeyFile) {
  std::string target = write_file("real-keys", std::string(kKeyA) + "\n", 0600);
  std::string link = dir_ + "/keys";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(ApiKeys::load({}, {target}).has_value());
  auto keys = ApiKeys::load({}, {link});
  ASSERT_FALSE(keys.has_value());
  EXPECT_NE(keys.error().message.find("symbolic link"), std::string::npos) << keys.error().message;
}

TEST_F(ApiKeysTest, RefusesWhatIsNotARegularFile) {
  std::string sub = dir_ + "/sub";
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  auto keys = ApiKeys::load({}, {sub});
  ASSERT_FALSE(keys.has_value());
  EXPECT_NE(keys.error().message.find("not a regular file"), std::string::npos);

  std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  keys = ApiKeys::load({}, {fifo});  // must not hang
  ASSERT_FALSE(keys.has_value());
  EXPECT_NE(keys.error().message.find("not a regular file"), std::string::npos);

  keys = ApiKeys::load({}, {dir_ + "/missing"});
  ASSERT_FALSE(keys.has_value());
  EXPECT_EQ(keys.error().code, ErrorCode::kNotFound);
  EXPECT_NE(keys.error().message.find("ENOENT"), std::string::npos);
}

TEST_F(ApiKeysTest, RefusesKeyFileOfAnotherOwner) {
  if (::geteuid() != 0) CORRAL_SKIP_OR_FAIL("needs root to chown a file to another uid");
  std::string path = write_file("keys", std::string(kKeyA) + "\n", 0600);
  ASSERT_EQ(::chown(path.c_str(), 12345, 12345), 0);
  auto keys = ApiKeys::load({}, {path});
  ASSERT_FALSE(keys.has_value());
  EXPECT_EQ(keys.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(keys.error().message.find("owned by uid 12345"), std::string::npos)
      << keys.error().message;
}

TEST_F(ApiKeysTest, RefusesBadLinesWithoutQuotingThem) {
  const std::string secret_with_space = "almost-a-key 0123456789";
  std::string path =
      write_file("keys", "# c\n" + std::string(kKeyA) + "\n" + secret_with_space + "\n", 0600);
  auto keys = ApiKeys::load({}, {path});
  ASSERT_FALSE(keys.has_value());
  EXPECT_NE(keys.error().message.find("line 3"), std::string::npos) << keys.error().message;
  EXPECT_EQ(keys.error().to_string().find("almost-a-key"), std::string::npos);

  path = write_file("short", "short-key\n", 0600);
  keys = ApiKeys::load({}, {path});
  ASSERT_FALSE(keys.has_value());
  EXPECT_NE(keys.error().message.find("line 1"), std::string::npos);

  path = write_file("none", "# only a comment\n\n", 0600);
  keys = ApiKeys::load({}, {path});
  ASSERT_FALSE(keys.has_value());
  EXPECT_NE(keys.error().message.find("holds no keys"), std::string::npos);
}

TEST_F(ApiKeysTest, ParseBearer) {
  const std::string key(kKeyA);
  for (const std::string& header :
       {"Bearer " + key, "bearer " + key, "BEARER " + key, "BeArEr    " + key,
        "  Bearer " + key + " \t", "Bearer " + std::string(16, 'x'),
        "Bearer " + std::string(256, '~')}) {
    auto parsed = ApiKeys::parse_bearer(header);
    ASSERT_TRUE(parsed.has_value()) << header << ": " << parsed.error().message;
    EXPECT_EQ(*parsed, header.find('x') != std::string::npos   ? std::string(16, 'x')
                       : header.find('~') != std::string::npos ? std::string(256, '~')
                                                               : key);
  }
  for (const std::string& header :
       {std::string(""), std::string("Bearer"), std::string("Bearer "), "Basic " + key,
        "Bearer" + key, "Bearer\t" + key, "Token " + key, "Bearer " + key + " extra",
        "Bearer " + std::string(15, 'x'), "Bearer " + std::string(257, 'x'),
        "Bearer " + key + "\x7f", "Bearer " + key + "\xc3\xa9", "Bearers " + key,
        "Bearer " + key + "\n"}) {
    auto parsed = ApiKeys::parse_bearer(header);
    ASSERT_FALSE(parsed.has_value()) << header;
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(parsed.error().to_string().find(key), std::string::npos)
        << "an error must not echo the key";
  }
}

TEST_F(ApiKeysTest, GenerateIntoWritesA0600FileAtomically) {
  const std::string path = dir_ + "/api-keys";
  auto key = ApiKeys::generate_into(path);
  ASSERT_TRUE(key.has_value()) << key.error().to_string();
  ASSERT_EQ(key->size(), 68u);
  EXPECT_TRUE(key->starts_with("crl_"));
  for (char c : key->substr(4)) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(read_all(path), *key + "\n");
  EXPECT_EQ(entries(), std::vector<std::string>{"api-keys"}) << "no temporary file left";

  auto keys = ApiKeys::load({}, {path});
  ASSERT_TRUE(keys.has_value()) << keys.error().to_string();
  EXPECT_TRUE(keys->verify(*key));
  EXPECT_TRUE(ApiKeys::parse_bearer("Bearer " + *key).has_value());

  // A second key never replaces the first.
  auto again = ApiKeys::generate_into(path);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(read_all(path), *key + "\n");
  EXPECT_EQ(entries(), std::vector<std::string>{"api-keys"});

  auto other = ApiKeys::generate_into(dir_ + "/other");
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(*other, *key);
}

TEST_F(ApiKeysTest, GenerateIntoIgnoresTheUmask) {
  mode_t old = ::umask(0);
  auto key = ApiKeys::generate_into(dir_ + "/k");
  ::umask(old);
  ASSERT_TRUE(key.has_value()) << key.error().to_string();
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/k").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(ApiKeysTest, GenerateIntoRefusesAnUnsafeDirectory) {
  for (mode_t mode : {0770, 0757, 01777}) {
    ASSERT_EQ(::chmod(dir_.c_str(), mode), 0);
    auto key = ApiKeys::generate_into(dir_ + "/k");
    ASSERT_FALSE(key.has_value()) << std::oct << mode;
    EXPECT_EQ(key.error().code, ErrorCode::kPermissionDenied);
    EXPECT_NE(key.error().message.find("group or others may replace files"), std::string::npos)
        << key.error().message;
  }
  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
  EXPECT_TRUE(entries().empty());

  if (::geteuid() == 0) {
    std::string sub = dir_ + "/sub";
    ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
    ASSERT_EQ(::chown(sub.c_str(), 12345, 12345), 0);
    auto key = ApiKeys::generate_into(sub + "/k");
    ASSERT_FALSE(key.has_value());
    EXPECT_NE(key.error().message.find("owned by uid 12345"), std::string::npos);
  }

  auto key = ApiKeys::generate_into(dir_ + "/missing/k");
  ASSERT_FALSE(key.has_value());
  EXPECT_EQ(key.error().code, ErrorCode::kNotFound);
  for (const std::string& bad : {dir_ + "/", dir_ + "/.", dir_ + "/.."}) {
    key = ApiKeys::generate_into(bad);
    ASSERT_FALSE(key.has_value()) << bad;
    EXPECT_EQ(key.error().code, ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace corral
