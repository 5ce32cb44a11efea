#include "spec/mount_arg.h"

#include <gtest/gtest.h>

#include <string>

namespace corral {
namespace {

std::string mount_error(std::string_view text) {
  auto r = parse_mount_arg(text);
  EXPECT_FALSE(r.has_value()) << text;
  if (r.has_value()) return {};
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  return r.error().message;
}

TEST(mount_arg, ParseMountArgReadOnlyByDefault) {
  auto m = parse_mount_arg("./data:/data");
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->source, "./data");
  EXPECT_EQ(m->target, "/data");
  EXPECT_FALSE(m->writable);
}

TEST(mount_arg, ParseMountArgExplicitModes) {
  auto ro = parse_mount_arg("/srv/in:/input:ro");
  ASSERT_TRUE(ro.has_value());
  EXPECT_FALSE(ro->writable);
  EXPECT_EQ(ro->source, "/srv/in");
  EXPECT_EQ(ro->target, "/input");

  auto rw = parse_mount_arg("out:/workspace/out:rw");
  ASSERT_TRUE(rw.has_value());
  EXPECT_TRUE(rw->writable);
  EXPECT_EQ(rw->target, "/workspace/out");
}

TEST(mount_arg, ParseMountArgTargetIsNormalized) {
  EXPECT_EQ(parse_mount_arg("a://data//x/").value().target, "/data/x");
  EXPECT_EQ(parse_mount_arg("a:/./data/./x").value().target, "/data/x");
  // Names that merely start like a reserved directory are fine.
  EXPECT_EQ(parse_mount_arg("a:/process").value().target, "/process");
  EXPECT_EQ(parse_mount_arg("a:/devices/x").value().target, "/devices/x");
  EXPECT_EQ(parse_mount_arg("a:/system").value().target, "/system");
  EXPECT_EQ(parse_mount_arg("a:/x/proc").value().target, "/x/proc");
  EXPECT_EQ(parse_mount_arg("a:/x/..y").value().target, "/x/..y");
}

TEST(mount_arg, ParseMountArgShape) {
  EXPECT_EQ(mount_error("data"),
            "invalid mount \"data\": expected SRC:DST, SRC:DST:ro or SRC:DST:rw");
  EXPECT_EQ(mount_error(""), "invalid mount \"\": expected SRC:DST, SRC:DST:ro or SRC:DST:rw");
  EXPECT_NE(mount_error("a:/b:/c:rw").find("paths cannot contain ':'"), std::string::npos);
  EXPECT_EQ(mount_error("a:/b:rx"),
            "invalid mount \"a:/b:rx\": mode \"rx\" must be ro or rw (paths cannot contain ':')");
  EXPECT_FALSE(parse_mount_arg("a:/b:").has_value());
  EXPECT_FALSE(parse_mount_arg("a:/b:RW").has_value());
}

TEST(mount_arg, ParseMountArgSource) {
  EXPECT_EQ(mount_error(":/data"), "invalid mount \":/data\": source is empty");
  EXPECT_NE(mount_error(std::string_view("a\0b:/data", 9)).find("NUL"), std::string::npos);
}

TEST(mount_arg, ParseMountArgTargetRules) {
  EXPECT_EQ(mount_error("a:"), "invalid mount \"a:\": target is empty");
  EXPECT_EQ(mount_error("a:data"),
            "invalid mount \"a:data\": target \"data\" is not an absolute path");
  EXPECT_EQ(mount_error("a:/data/../etc"),
            "invalid mount \"a:/data/../etc\": target \"/data/../etc\" contains a \"..\" "
            "component");
  EXPECT_FALSE(parse_mount_arg("a:/..").has_value());
  EXPECT_FALSE(parse_mount_arg("a:/x/..").has_value());
  EXPECT_EQ(mount_error("a:/"),
            "invalid mount \"a:/\": target \"/\" is the sandbox's root directory");
  EXPECT_FALSE(parse_mount_arg("a://").has_value());
  EXPECT_FALSE(parse_mount_arg("a:/.").has_value());
  EXPECT_EQ(mount_error("a:/proc"),
            "invalid mount \"a:/proc\": target \"/proc\" is inside /proc, which corral sets up "
            "itself");
  for (const char* bad : {"a:/proc/self", "a:/sys", "a:/sys/fs/cgroup", "a:/dev", "a:/dev/shm",
                          "a://proc", "a:/./dev/x", "a:/dev/"}) {
    EXPECT_FALSE(parse_mount_arg(bad).has_value()) << bad;
  }
  EXPECT_FALSE(parse_mount_arg("a:/" + std::string(5000, 'x')).has_value());
}

TEST(mount_arg, NormalizeMountTargetDirect) {
  EXPECT_EQ(normalize_mount_target("/a/b/").value(), "/a/b");
  EXPECT_FALSE(normalize_mount_target("relative").has_value());
  EXPECT_FALSE(normalize_mount_target("/sys/x").has_value());
}

TEST(mount_arg, ParseEnvArgValues) {
  auto kv = parse_env_arg("LANG=C.UTF-8");
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->first, "LANG");
  EXPECT_EQ(kv->second, "C.UTF-8");

  EXPECT_EQ(parse_env_arg("EMPTY=").value().second, "");
  EXPECT_EQ(parse_env_arg("X=a=b=c").value().second, "a=b=c");
  EXPECT_EQ(parse_env_arg("_under_1=v").value().first, "_under_1");
  EXPECT_EQ(parse_env_arg("A=with space").value().second, "with space");
}

TEST(mount_arg, ParseEnvArgErrors) {
  auto missing = parse_env_arg("FOO");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(missing.error().message, "invalid environment variable \"FOO\": expected KEY=VALUE");

  auto digit = parse_env_arg("1X=2");
  ASSERT_FALSE(digit.has_value());
  EXPECT_EQ(digit.error().message,
            "invalid environment variable \"1X=2\": name \"1X\" must start with a letter or '_' "
            "and contain only letters, digits and '_'");
  for (const char* bad : {"=v", "A-B=1", "A B=1", "A.B=1", "", "é=1"}) {
    EXPECT_FALSE(parse_env_arg(bad).has_value()) << bad;
  }
  EXPECT_FALSE(parse_env_arg(std::string_view("A=x\0y", 5)).has_value());
}

TEST(mount_arg, IsValidEnvNameGrammar) {
  EXPECT_TRUE(is_valid_env_name("PATH"));
  EXPECT_TRUE(is_valid_env_name("_"));
  EXPECT_TRUE(is_valid_env_name("a1_B2"));
  EXPECT_FALSE(is_valid_env_name(""));
  EXPECT_FALSE(is_valid_env_name("9"));
  EXPECT_FALSE(is_valid_env_name("A-1"));
}

}  // namespace
}  // namespace corral
