// The daemon's secret store (src/secrets/secret_store.h): the plain
// format, file permissions, env sources, the encrypted file, duplicate keys,
// and that no error message ever holds a value.
#include "secrets/secret_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sodium.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>
#include "support/skip.h"
#include "support/temp_dir.h"

namespace corral::secrets {
namespace {

// A fresh random value per call: 32 base62 characters.
std::string random_value(std::string_view prefix = "") {
  EXPECT_TRUE(sodium_ready());
  static constexpr char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string v(prefix);
  for (int i = 0; i < 32; ++i) v.push_back(kChars[randombytes_uniform(62)]);
  return v;
}

class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-secret-store-test") {}
};

std::string error_text(const Error& e) { return e.message + " " + e.hint; }

TEST(SecretStore, PlainFileLoadsKeysValuesAndSources) {
  TempDir dir;
  const std::string a = random_value();
  const std::string b = random_value("x=y==");  // values may hold '='
  const std::string bin = std::string("\x00\x01\n\xff", 4) + random_value();
  char b64[128];
  sodium_bin2base64(b64, sizeof b64, reinterpret_cast<const unsigned char*>(bin.data()), bin.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  std::string text = "# a comment\n\n   # indented comment\nopenai=" + a +
                     "\r\ngithub.token-2=" + b + "\nbinary=base64:" + b64 + "\n";
  SecretStoreConfig config;
  config.file = dir.write("secrets", text);
  auto store = SecretStore::load(config);
  ASSERT_TRUE(store) << store.error().to_string();
  EXPECT_EQ(store->keys(), (std::vector<std::string>{"binary", "github.token-2", "openai"}));
  ASSERT_NE(store->find("openai"), nullptr);
  EXPECT_TRUE(store->find("openai")->equals(a));  // the CR of a CRLF line is dropped
  EXPECT_TRUE(store->find("github.token-2")->equals(b));
  EXPECT_TRUE(store->find("binary")->equals(bin));
  EXPECT_EQ(store->find("absent"), nullptr);
  EXPECT_EQ(store->source_of("openai"), "file " + config.file + " line 4");
  EXPECT_EQ(store->source_of("absent"), "");
}

TEST(SecretStore, GroupOrOtherReadableFileIsRefused) {
  TempDir dir;
  const std::string v = random_value();
  for (mode_t mode : {0644, 0640, 0604, 0660, 0601}) {
    SecretStoreConfig config;
    config.file = dir.write("secrets", "k=" + v + "\n", mode);
    auto store = SecretStore::load(config);
    ASSERT_FALSE(store) << std::oct << mode;
    EXPECT_EQ(store.error().code, ErrorCode::kPermissionDenied);
    EXPECT_NE(store.error().message.find("group and others must have no access"), std::string::npos)
        << store.error().message;
    EXPECT_NE(store.error().hint.find("chmod 600"), std::string::npos);
    EXPECT_EQ(error_text(store.error()).find(v), std::string::npos);
  }
  // 0400 is stricter than 0600: fine.
  SecretStoreConfig config;
  config.file = dir.write("secrets", "k=" + v + "\n", 0400);
  EXPECT_TRUE(SecretStore::load(config));
}

TEST(SecretStore, SymlinkFifoDirectoryAndForeignOwnerAreRefused) {
  TempDir dir;
  const std::string v = random_value();
  const std::string target = dir.write("real", "k=" + v + "\n");
  ASSERT_EQ(symlink(target.c_str(), dir.file("link").c_str()), 0);
  SecretStoreConfig config;
  config.file = dir.file("link");
  auto store = SecretStore::load(config);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message.find("symbolic link"), std::string::npos)
      << store.error().message;

  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0600), 0);
  config.file = dir.file("fifo");
  store = SecretStore::load(config);  // O_NONBLOCK: does not hang
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message.find("not a regular file"), std::string::npos);

  config.file = dir.file("");
  ASSERT_FALSE(SecretStore::load(config));

  config.file = dir.file("missing");
  store = SecretStore::load(config);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().code, ErrorCode::kNotFound);

  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("chown to another uid needs root");
  ASSERT_EQ(chown(target.c_str(), 65534, 65534), 0);
  config.file = target;
  store = SecretStore::load(config);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message.find("owned by uid 65534"), std::string::npos)
      << store.error().message;
}

TEST(SecretStore, MalformedLinesNameTheLineButNeverItsBytes) {
  TempDir dir;
  const std::string v = random_value();
  struct Case {
    std::string text;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"ok=1\n" + v + "\n", "line 2: no '='"},                      // a bare value
      {"ok=1\n# c\n " + v + "=x\n", "line 3: the key is not"},      // a space before the key
      {"bad key=" + v + "\n", "line 1: the key is not"},            // a space in the key
      {std::string(129, 'k') + "=" + v + "\n", "line 1: the key"},  // key too long
      {v + "*=" + v + "\n", "line 1: the key is not"},              // '*' in the key
      {"k=base64:" + v + "!!\n", "line 1 (key 'k'): the value after base64:"},
      // Bytes above 0x7f, which libsodium 1.0.18 alone decodes as digits.
      {"k=base64:Zm\xc3\xa9\n", "line 1 (key 'k'): the value after base64:"},
      {"k=\n", "line 1 (key 'k'): empty value"},
      {"k=" + v + "\nk=" + v + "x\n", "'k' is defined twice in secret file"},
  };
  for (const auto& c : cases) {
    SecretStoreConfig config;
    config.file = dir.write("secrets", c.text);
    auto store = SecretStore::load(config);
    ASSERT_FALSE(store) << c.expect;
    const std::string text = error_text(store.error());
    EXPECT_NE(text.find(c.expect), std::string::npos) << text;
    EXPECT_EQ(text.find(v), std::string::npos) << "the value leaked into: " << text;
  }
}

TEST(SecretStore, EnvVariablesAndPrefixAreTaken) {
  const std::string a = random_value();
  const std::string b = random_value();
  const std::string c = random_value();
  std::string e1 = "OPENAI_API_KEY=" + a;
  std::string e2 = "CORRAL_SECRET_GitHub=" + b;
  std::string e3 = "CORRAL_SECRET_S3.Key=" + c;
  std::string e4 = "PATH=/usr/bin";
  char* envp[] = {e1.data(), e2.data(), e3.data(), e4.data(), nullptr};
  SecretStoreConfig config;
  config.env = {"OPENAI_API_KEY"};
  config.env_prefix = "CORRAL_SECRET_";
  auto store = SecretStore::load(config, envp);
  ASSERT_TRUE(store) << store.error().to_string();
  EXPECT_EQ(store->keys(), (std::vector<std::string>{"OPENAI_API_KEY", "github", "s3.key"}));
  EXPECT_TRUE(store->find("OPENAI_API_KEY")->equals(a));
  EXPECT_TRUE(store->find("github")->equals(b));
  EXPECT_TRUE(store->find("s3.key")->equals(c));
  EXPECT_EQ(store->source_of("github"), "env CORRAL_SECRET_GitHub");

  config.env = {"NOT_SET_ANYWHERE"};
  auto missing = SecretStore::load(config, envp);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("NOT_SET_ANYWHERE is not set"), std::string::npos);
}

TEST(SecretStore, DuplicateKeyAcrossSourcesNamesBothSourcesAndNoValue) {
  TempDir dir;
  const std::string a = random_value();
  const std::string b = random_value();
  std::string e1 = "openai=" + b;
  char* envp[] = {e1.data(), nullptr};
  SecretStoreConfig config;
  config.file = dir.write("secrets", "x=1\nopenai=" + a + "\n");
  config.env = {"openai"};
  auto store = SecretStore::load(config, envp);
  ASSERT_FALSE(store);
  const std::string text = error_text(store.error());
  EXPECT_NE(text.find("'openai' is defined twice"), std::string::npos) << text;
  EXPECT_NE(text.find("file " + config.file + " line 2"), std::string::npos) << text;
  EXPECT_NE(text.find("env openai"), std::string::npos) << text;
  EXPECT_EQ(text.find(a), std::string::npos);
  EXPECT_EQ(text.find(b), std::string::npos);

  // Two prefixed variables that lower-case to one key.
  std::string p1 = "S_KEY=" + a;
  std::string p2 = "S_key=" + b;
  char* envp2[] = {p1.data(), p2.data(), nullptr};
  SecretStoreConfig pc;
  pc.env_prefix = "S_";
  auto dup = SecretStore::load(pc, envp2);
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find("env S_KEY and in env S_key"), std::string::npos)
      << dup.error().message;
  EXPECT_EQ(error_text(dup.error()).find(a), std::string::npos);
  EXPECT_EQ(error_text(dup.error()).find(b), std::string::npos);
}

TEST(SecretStore, EncryptedFileRoundTrip) {
  TempDir dir;
  const std::string a = random_value();
  const std::string b = random_value();
  auto key = generate_key();
  ASSERT_TRUE(key);
  ASSERT_EQ(key->size(), 32u);
  const std::string plain = "# store\nopenai=" + a + "\nanthropic=" + b + "\n";
  auto sealed = encrypt_store(plain, *key);
  ASSERT_TRUE(sealed) << sealed.error().to_string();
  EXPECT_EQ(sealed->substr(0, 7), "CORRALS");
  EXPECT_EQ(sealed->find(a), std::string::npos);
  EXPECT_EQ(sealed->find(b), std::string::npos);
  // A fresh nonce each time.
  EXPECT_NE(*sealed, *encrypt_store(plain, *key));

  auto hex = encode_key_hex(*key);
  ASSERT_TRUE(hex);
  EXPECT_EQ(hex->size(), 65u);
  SecretStoreConfig config;
  config.key_file = dir.write("key", hex->view());
  config.encrypted_file = dir.write("store.enc", *sealed, 0644);  // need not be private
  auto store = SecretStore::load(config);
  ASSERT_TRUE(store) << store.error().to_string();
  EXPECT_EQ(store->keys(), (std::vector<std::string>{"anthropic", "openai"}));
  EXPECT_TRUE(store->find("openai")->equals(a));
  EXPECT_TRUE(store->find("anthropic")->equals(b));
  EXPECT_EQ(store->source_of("anthropic"), "encrypted file " + config.encrypted_file + " line 3");

  // The key as 32 raw bytes and as base64 works too.
  config.key_file = dir.write("key.raw", key->view());
  EXPECT_TRUE(SecretStore::load(config));
  char b64[64];
  sodium_bin2base64(b64, sizeof b64, reinterpret_cast<const unsigned char*>(key->view().data()), 32,
                    sodium_base64_VARIANT_ORIGINAL);
  config.key_file = dir.write("key.b64", std::string(b64) + "\n");
  EXPECT_TRUE(SecretStore::load(config));
}

TEST(SecretStore, EncryptRefusesAMalformedPlainFileWithoutShowingIt) {
  auto key = generate_key();
  ASSERT_TRUE(key);
  const std::string v = random_value();
  auto sealed = encrypt_store("ok=1\n" + v + "\n", *key);
  ASSERT_FALSE(sealed);
  EXPECT_NE(sealed.error().message.find("line 2"), std::string::npos);
  EXPECT_EQ(error_text(sealed.error()).find(v), std::string::npos);
}

TEST(SecretStore, TamperingAnyByteOrAWrongKeyIsRefused) {
  const std::string a = random_value();
  auto key = generate_key();
  auto other = generate_key();
  ASSERT_TRUE(key && other);
  auto sealed = encrypt_store("openai=" + a + "\n", *key);
  ASSERT_TRUE(sealed);
  ASSERT_TRUE(decrypt_store(*sealed, *key));
  // Every byte, flipped in turn: header, nonce, ciphertext, tag.
  for (std::size_t i = 0; i < sealed->size(); ++i) {
    std::string bad = *sealed;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    auto r = decrypt_store(bad, *key);
    ASSERT_FALSE(r) << "byte " << i;
    EXPECT_EQ(error_text(r.error()).find(a), std::string::npos);
  }
  auto trunc = decrypt_store(sealed->substr(0, sealed->size() - 1), *key);
  ASSERT_FALSE(trunc);
  auto wrong = decrypt_store(*sealed, *other);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("authentication failed"), std::string::npos);
  EXPECT_EQ(error_text(wrong.error()).find(a), std::string::npos);

  auto junk = decrypt_store("not a store at all, not at all", *key);
  ASSERT_FALSE(junk);
  EXPECT_NE(junk.error().message.find("bad header"), std::string::npos);
}

TEST(SecretStore, KeyFilePermissionsAndFormatAreChecked) {
  TempDir dir;
  auto key = generate_key();
  ASSERT_TRUE(key);
  auto hex = encode_key_hex(*key);
  ASSERT_TRUE(hex);
  const std::string path = dir.write("key", hex->view(), 0640);  // group-readable
  auto r = read_key_file(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  // The loader refuses it too, before touching the encrypted file.
  SecretStoreConfig config;
  config.key_file = path;
  config.encrypted_file = dir.write("enc", *encrypt_store("a=b\n", *key));
  auto store = SecretStore::load(config);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message.find("secret key file"), std::string::npos);
  EXPECT_EQ(error_text(store.error()).find(std::string(hex->view().substr(0, 64))),
            std::string::npos);

  const std::string short_key = dir.write("short", "abcdef\n");
  auto s = read_key_file(short_key);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("expected 32 raw bytes"), std::string::npos);
  EXPECT_EQ(s.error().message.find("abcdef"), std::string::npos);

  SecretStoreConfig half;
  half.encrypted_file = config.encrypted_file;
  EXPECT_FALSE(SecretStore::load(half));
}

TEST(SecretStore, AddRefusesBadKeysEmptyValuesAndDuplicates) {
  SecretStore store;
  const std::string v = random_value();
  EXPECT_TRUE(store.add("k", SecretValue(v), "test"));
  EXPECT_FALSE(store.add("k", SecretValue(v), "test2"));
  EXPECT_FALSE(store.add("", SecretValue(v), "test"));
  EXPECT_FALSE(store.add("a b", SecretValue(v), "test"));
  EXPECT_FALSE(store.add("e", SecretValue(), "test"));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_TRUE(valid_secret_key(std::string(128, 'a')));
  EXPECT_FALSE(valid_secret_key(std::string(129, 'a')));
}

}  // namespace
}  // namespace corral::secrets
