#include "api/json_writer.h"

#include "api/base64.h"
#include "base/utf8.h"

namespace corral::api::json {

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// "<key>": text when the bytes are UTF-8, else "<key>_b64": base64.
void put_bytes(Json& j, std::string_view key, std::string_view bytes) {
  if (is_valid_utf8(bytes)) {
    j[std::string(key)] = std::string(bytes);
  } else {
    j[std::string(key) + "_b64"] = base64_encode(bytes);
  }
}

Json env_json(const std::vector<std::pair<std::string, std::string>>& env) {
  Json j = Json::object();
  for (const auto& [name, value] : env) j[name] = value;
  return j;
}

Json strings_json(const std::vector<std::string>& list) {
  Json j = Json::array();
  for (const auto& s : list) j.push_back(s);
  return j;
}

// Durations of requests: whole seconds as an integer, else "<n>ms".
Json duration_json(std::int64_t ms) {
  if (ms % kSecondMs == 0) return Json(ms / kSecondMs);
  return Json(std::to_string(ms) + "ms");
}

}  // namespace corral::api::json
