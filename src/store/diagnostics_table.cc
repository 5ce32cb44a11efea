// The diagnostics of destroyed sandboxes (REQUIREMENTS.md T1, issue 16):
// StateStore's sandbox_diagnostics methods. The table is state_store.cc's
// migration 6 -> 7. Each write is one transaction under the store's lock.
#include <nlohmann/json.hpp>

#include "store/state_db_internal.h"
#include "store/state_store.h"

namespace corral {
namespace {

using sql::Stmt;
using store_detail::check_id;

constexpr std::size_t kMaxNsBytes = 128;

}  // namespace

Status StateStore::put_diagnostics(const DiagnosticsRecord& record) {
  CORRAL_TRY(check_id("sandbox", record.sandbox_id));
  const std::string what = "storing the diagnostics of sandbox " + record.sandbox_id;
  if (record.ns.empty() || record.ns.size() > kMaxNsBytes)
    return make_error(ErrorCode::kInvalidArgument, what + ": namespace must be 1-128 bytes");
  auto parsed = nlohmann::json::parse(record.diagnostics_json, nullptr, false);
  if (!parsed.is_object())
    return make_error(ErrorCode::kInvalidArgument, what + ": not a JSON object");
  std::lock_guard lock(db_->mu);
  sql::Connection& h = *db_->conn;
  auto st = h.prepare(
      "INSERT INTO sandbox_diagnostics (sandbox_id, ns, recorded_at, diagnostics_json) "
      "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (sandbox_id) DO UPDATE SET ns = excluded.ns, "
      "recorded_at = excluded.recorded_at, diagnostics_json = excluded.diagnostics_json");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, record.sandbox_id)
      .bind(2, record.ns)
      .bind(3, record.recorded_at_ms)
      .bind(4, record.diagnostics_json);
  CORRAL_TRY_CTX(st->run("INSERT INTO sandbox_diagnostics"), what);
  return ok();
}

Result<std::optional<DiagnosticsRecord>> StateStore::get_diagnostics(std::string_view sandbox_id) {
  CORRAL_TRY(check_id("sandbox", sandbox_id));
  const std::string what = "reading the diagnostics of sandbox " + std::string(sandbox_id);
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare(
      "SELECT sandbox_id, ns, recorded_at, diagnostics_json "
      "FROM sandbox_diagnostics WHERE sandbox_id = ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, sandbox_id);
  auto row = st->step("SELECT sandbox_diagnostics");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  if (!*row) return std::optional<DiagnosticsRecord>();
  DiagnosticsRecord r;
  r.sandbox_id = st->text(0);
  r.ns = st->text(1);
  r.recorded_at_ms = st->int64(2);
  r.diagnostics_json = st->text(3);
  return std::optional<DiagnosticsRecord>(std::move(r));
}

Result<std::size_t> StateStore::prune_diagnostics(std::int64_t before_ms) {
  const std::string what = "pruning sandbox diagnostics";
  std::lock_guard lock(db_->mu);
  auto st = db_->conn->prepare("DELETE FROM sandbox_diagnostics WHERE recorded_at < ?1");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  st->bind(1, before_ms);
  CORRAL_TRY_CTX(st->run("DELETE FROM sandbox_diagnostics"), what);
  return static_cast<std::size_t>(st->changes());
}

}  // namespace corral
