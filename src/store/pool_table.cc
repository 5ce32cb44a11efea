// The warm pools made through POST /v1/pools (REQUIREMENTS.md C4, issue
// 16): StateStore's pools methods. The table is state_store.cc's migration
// 7 -> 8. The daemon rebuilds each stored pool when it starts; pools of
// serve.pools are the config's and never stored.
#include <nlohmann/json.hpp>

#include "store/state_db_internal.h"
#include "store/state_store.h"

namespace corral {

using sql::Stmt;
using store_detail::check_id;

Status StateStore::put_pool(const PoolRecord& record) {
  CORRAL_TRY(check_id("pool", record.name));
  const std::string what = "storing pool " + record.name;
  if (!nlohmann::json::parse(record.settings_json, nullptr, false).is_object())
    return make_error(ErrorCode::kInvalidArgument, what + ": its settings are not a JSON object");
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  auto st = h.prepare("INSERT INTO pools (name, settings_json, created_at) VALUES (?1, ?2, ?3)");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, record.name).bind(2, record.settings_json).bind(3, record.created_at_ms);
  if (auto r = st->run("INSERT INTO pools"); !r) {
    if (st->fault() == sql::Fault::kUniqueViolation)
      return make_error(ErrorCode::kAlreadyExists, "a pool named " + record.name + " is stored");
    return tl::unexpected<Error>(std::move(r).error().wrap(what));
  }
  return ok();
}

Result<bool> StateStore::delete_pool(std::string_view name) {
  CORRAL_TRY(check_id("pool", name));
  const std::string what = "removing pool " + std::string(name);
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare("DELETE FROM pools WHERE name = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, name);
  CORRAL_TRY_CTX(st->run("DELETE FROM pools"), what);
  return st->changes() > 0;
}

Result<std::vector<PoolRecord>> StateStore::list_pools() {
  const std::string what = "listing the stored pools";
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare("SELECT name, settings_json, created_at FROM pools ORDER BY name");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  std::vector<PoolRecord> out;
  for (;;) {
    auto row = st->step("SELECT pools");
    if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
    if (!*row) break;
    out.push_back(PoolRecord{st->text(0), st->text(1), st->int64(2)});
  }
  return out;
}

}  // namespace corral
