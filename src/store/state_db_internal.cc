#include "store/state_db_internal.h"

#include <nlohmann/json.hpp>
#include <string>

namespace corral::store_detail {

Result<std::string> canonical_json(std::string_view text, std::string_view what,
                                   std::string_view hint) {
  nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return make_error(ErrorCode::kInvalidArgument, std::string(what) + " is not valid JSON",
                      std::string(hint));
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status check_id(std::string_view what, std::string_view id) {
  if (id.empty() || id.size() > kMaxIdBytes) {
    return make_error(ErrorCode::kInvalidArgument, std::string(what) + " id must be 1-" +
                                                       std::to_string(kMaxIdBytes) +
                                                       " bytes, got " + std::to_string(id.size()));
  }
  return ok();
}

tl::unexpected<Error> bad_row(std::string_view table, std::string_view column,
                              std::string_view value) {
  return make_error(ErrorCode::kInternal,
                    "state store: " + std::string(table) + "." + std::string(column) +
                        " holds unknown value '" + std::string(value) + "'",
                    "the database was written by another program or a newer corral");
}

Result<std::int64_t> fleet_now_ms(sql::Connection& h) {
  if (h.backend() != sql::Backend::kPostgres) return StateStore::now_ms();
  // clock_timestamp(), not now(): the time of this statement, not of the
  // transaction's start (a sweep or placement may have waited for a lock).
  const std::string what = "reading the database's clock";
  auto st = h.prepare("SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)");
  if (!st) return tl::unexpected<Error>(std::move(st).error().wrap(what));
  auto row = st->step("SELECT clock_timestamp()");
  if (!row) return tl::unexpected<Error>(std::move(row).error().wrap(what));
  if (!*row) return make_error(ErrorCode::kInternal, what + ": no row");
  return st->int64(0);
}

}  // namespace corral::store_detail
