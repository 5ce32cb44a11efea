// A state store test run on both backends (issue 18, ADR 0020): the same
// test body against SQLite (a file in a temporary directory) and
// PostgreSQL (a fresh database of the process's shared throwaway cluster,
// support/pg_cluster.h). open() may be called more than once: every store
// it returns shares the one target, as the daemons of a fleet do.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "store/state_store.h"
#include "support/pg_cluster.h"
#include "support/skip.h"

namespace corral::testing {

enum class StoreKind { kSqlite, kPostgres };

inline std::string store_kind_name(const ::testing::TestParamInfo<StoreKind>& info) {
  return info.param == StoreKind::kSqlite ? "Sqlite" : "Postgres";
}

class StoreBackendTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    if (GetParam() == StoreKind::kPostgres) {
      CORRAL_FRESH_PG_DATABASE(target_);
    } else {
      char tmpl[] = "/tmp/corral-store-XXXXXX";
      dir_ = ::mkdtemp(tmpl);
      target_ = dir_ + "/state.db";
    }
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // A store on the test's target; with `node`, writing for that node.
  std::unique_ptr<StateStore> open(const std::string& node = "") {
    auto s = StateStore::open(target_);
    EXPECT_TRUE(s) << s.error().to_string();
    if (!s) return nullptr;
    if (!node.empty()) {
      auto set = s->set_node(node);
      EXPECT_TRUE(set) << set.error().to_string();
    }
    return std::make_unique<StateStore>(std::move(*s));
  }

  std::string dir_;
  std::string target_;
};

}  // namespace corral::testing
