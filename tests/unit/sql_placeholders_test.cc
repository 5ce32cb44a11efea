// store/sql.h: `?` placeholders become PostgreSQL's $1, $2, ... in order,
// never inside a string literal, a quoted name or a comment (issue 18).
#include <gtest/gtest.h>

#include "store/sql.h"

namespace corral::sql {
namespace {

TEST(SqlPlaceholders, AreNumberedInOrder) {
  EXPECT_EQ(number_placeholders("SELECT a FROM t WHERE b = ? AND c > ? LIMIT ?"),
            "SELECT a FROM t WHERE b = $1 AND c > $2 LIMIT $3");
  EXPECT_EQ(number_placeholders("INSERT INTO t(a,b) VALUES(?,?)"),
            "INSERT INTO t(a,b) VALUES($1,$2)");
  EXPECT_EQ(number_placeholders("SELECT 1"), "SELECT 1");
}

TEST(SqlPlaceholders, NumberedOnesKeepTheirNumbers) {
  EXPECT_EQ(number_placeholders("UPDATE t SET a = ?2 WHERE id = ?1 AND b = ?12"),
            "UPDATE t SET a = $2 WHERE id = $1 AND b = $12");
  EXPECT_EQ(number_placeholders("SELECT '?1' WHERE a = ?1"), "SELECT '?1' WHERE a = $1");
}

TEST(SqlPlaceholders, AreLeftAloneInLiteralsNamesAndComments) {
  EXPECT_EQ(number_placeholders("SELECT '?', \"a?\" FROM t WHERE x = ? -- why?\nAND y = ?"),
            "SELECT '?', \"a?\" FROM t WHERE x = $1 -- why?\nAND y = $2");
  // A doubled quote inside a literal is part of it.
  EXPECT_EQ(number_placeholders("SELECT 'it''s ?' WHERE a = ?"), "SELECT 'it''s ?' WHERE a = $1");
  // An unterminated literal or comment runs to the end (the server refuses it).
  EXPECT_EQ(number_placeholders("SELECT '?"), "SELECT '?");
  EXPECT_EQ(number_placeholders("SELECT ? -- ?"), "SELECT $1 -- ?");
}

TEST(SqlPlaceholders, PostgresUrlsAreTold) {
  EXPECT_TRUE(is_postgres_url("postgres://u@h/db"));
  EXPECT_TRUE(is_postgres_url("postgresql://h:5432/db?sslmode=require"));
  EXPECT_FALSE(is_postgres_url("/var/lib/corral/state.db"));
  EXPECT_FALSE(is_postgres_url("state.db"));
  EXPECT_FALSE(is_postgres_url("Postgres://h/db"));
}

}  // namespace
}  // namespace corral::sql
