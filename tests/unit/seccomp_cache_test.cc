// The seccomp program cache returns exactly what the compiler produces,
// and never trusts a damaged cache file.
#include "jail/seccomp_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "jail/fs_util.h"

namespace corral {
namespace {

class SeccompCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-seccomp-cache-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)remove_tree(dir_); }
  std::string cache_file() const { return dir_ + "/seccomp-" + seccomp_policy_key() + ".bpf"; }
  std::string dir_;
};

bool same(const std::vector<sock_filter>& a, const std::vector<sock_filter>& b) {
  return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(sock_filter)) == 0;
}

TEST_F(SeccompCache, FirstLoadCompilesAndCachesTheSameProgram) {
  auto compiled = compile_seccomp_filter(SeccompOptions{});
  ASSERT_TRUE(compiled) << compiled.error().to_string();
  auto first = load_seccomp_program(dir_);
  ASSERT_TRUE(first) << first.error().to_string();
  EXPECT_TRUE(same(*first, *compiled));
  struct stat st;
  ASSERT_EQ(stat(cache_file().c_str(), &st), 0) << "cache file not written";
  EXPECT_EQ(static_cast<size_t>(st.st_size), compiled->size() * sizeof(sock_filter));
  auto second = load_seccomp_program(dir_);
  ASSERT_TRUE(second);
  EXPECT_TRUE(same(*second, *compiled));
}

TEST_F(SeccompCache, DamagedCacheIsIgnored) {
  auto compiled = compile_seccomp_filter(SeccompOptions{});
  ASSERT_TRUE(compiled);
  {
    std::ofstream out(cache_file(), std::ios::binary);
    out << "short";  // not a whole number of instructions
  }
  auto loaded = load_seccomp_program(dir_);
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(same(*loaded, *compiled));
}

TEST_F(SeccompCache, WorldWritableCacheIsIgnored) {
  auto compiled = compile_seccomp_filter(SeccompOptions{});
  ASSERT_TRUE(compiled);
  {
    // A well-formed but empty-policy program (one "allow" instruction
    // repeated) in a file anyone could have written.
    std::vector<sock_filter> allow_all(4, sock_filter{0x06, 0, 0, 0x7fff0000});
    std::ofstream out(cache_file(), std::ios::binary);
    out.write(reinterpret_cast<const char*>(allow_all.data()),
              static_cast<std::streamsize>(allow_all.size() * sizeof(sock_filter)));
  }
  ASSERT_EQ(chmod(cache_file().c_str(), 0666), 0);
  auto loaded = load_seccomp_program(dir_);
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(same(*loaded, *compiled));
}

TEST(SeccompCacheKey, IsStableWithinABuild) {
  EXPECT_EQ(seccomp_policy_key(), seccomp_policy_key());
  EXPECT_EQ(seccomp_policy_key().size(), 16u);
}

// The cache file is named after the key, so a policy change must change it:
// else a corral upgrade would keep installing the old program.
TEST(SeccompCacheKey, ChangesWithEveryFieldOfEveryRule) {
  const std::vector<SeccompRule>& table = seccomp_policy();
  const std::string key = seccomp_policy_key(table);
  EXPECT_EQ(key, seccomp_policy_key());
  std::set<std::string> keys = {key};
  auto changed = [&](auto edit) {
    std::vector<SeccompRule> copy = table;
    edit(copy);
    return seccomp_policy_key(copy);
  };
  for (std::size_t i = 0; i < table.size(); i += 7) {  // a spread of rows
    for (std::string k : {
             changed([&](auto& t) {
               t[i].action = t[i].action == SeccompAction::kAllow ? SeccompAction::kErrno
                                                                  : SeccompAction::kAllow;
             }),
             changed([&](auto& t) { t[i].errno_value += 1; }),
             changed([&](auto& t) { t[i].arches ^= kSeccompAarch64; }),
             changed([&](auto& t) { t[i].optional = !t[i].optional; }),
             changed([&](auto& t) { t[i].fallback_nr += 1; }),
             changed([&](auto& t) { t[i].arg_values.push_back(3); }),
             changed([&](auto& t) { t.erase(t.begin() + static_cast<std::ptrdiff_t>(i)); }),
         }) {
      EXPECT_TRUE(keys.insert(k).second)
          << "row " << i << " (" << table[i].syscall << "): an edit left the key as it was";
    }
  }
  // Moving a syscall between rows (same rows, other order) counts too.
  EXPECT_NE(changed([](auto& t) { std::swap(t[0].syscall, t[1].syscall); }), key);
}

}  // namespace
}  // namespace corral
