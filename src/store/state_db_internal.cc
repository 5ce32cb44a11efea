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

}  // namespace corral::store_detail
