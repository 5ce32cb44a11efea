// Helpers for the JSON the API's codecs write (api_model.h): text that
// never throws, byte strings as text or base64, and the request forms of
// durations. Internal to src/api, like json_reader.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/json_reader.h"

namespace corral::api::json {

// The body text; bytes that are not UTF-8 become U+FFFD instead of
// throwing (byte strings that may not be UTF-8 go through put_bytes).
std::string dump(const Json& j);

// "<key>": text when the bytes are UTF-8, else "<key>_b64": base64.
void put_bytes(Json& j, std::string_view key, std::string_view bytes);

template <typename T>
Json nullable(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json env_json(const std::vector<std::pair<std::string, std::string>>& env);
Json strings_json(const std::vector<std::string>& list);
// Durations of requests: whole seconds as an integer, else "<n>ms".
Json duration_json(std::int64_t ms);

// {"<key>": [item_json(item)...]}: the body of a list response.
template <typename T, typename ItemJson>
Json list_json(std::string_view key, const std::vector<T>& items, ItemJson item_json) {
  Json list = Json::array();
  for (const auto& item : items) list.push_back(item_json(item));
  Json j = Json::object();
  j[std::string(key)] = std::move(list);
  return j;
}

}  // namespace corral::api::json
