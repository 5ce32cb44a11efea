// The strict JSON reader under the API's codecs (api_model.h): parses a
// body with bounds (nesting depth, fields per object and per request,
// string sizes), then reads typed fields out of it. Every error names the
// JSON path of the field ("limits.memory", "mounts[2].target") and starts
// with its API error code ("wrong_type: ...", see to_api_error). Requests
// are read strictly (unknown fields refused by name), stored documents the
// same without the string bound, responses leniently (unknown fields
// ignored, known ones still typed).
//
// Internal to src/api: it brings nlohmann/json.hpp (a heavy header), which
// api_model.h keeps away from its users. Nothing here throws; guarded()
// turns whatever might still escape (std::bad_alloc) into an error value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/api_error.h"
#include "base/result.h"
#include "base/strings.h"
#include "spec/sandbox_spec.h"  // kKiB
#include "spec/units.h"

namespace corral::api::json {

using Json = nlohmann::ordered_json;

// ---- bounds ----------------------------------------------------------------

inline constexpr int kMaxDepth = 32;
inline constexpr std::size_t kMaxEnv = 4096;
inline constexpr std::size_t kMaxArgv = 4096;
inline constexpr std::size_t kMaxStringBytes = 128 * kKiB;
inline constexpr std::size_t kMaxPathBytes = 4096;
// Fields of one JSON object, and of a whole request body. nlohmann's
// ordered_json looks keys up linearly, so both bounds also keep parsing
// linear in practice.
inline constexpr std::size_t kMaxFieldsPerObject = 4096;
inline constexpr std::size_t kMaxFieldsPerRequest = kMaxEnv + 1024;

inline constexpr std::int64_t kSecondMs = 1000;
inline constexpr std::int64_t kDayMs = 24 * 3600 * kSecondMs;
inline constexpr std::int64_t kMaxLifetimeMs = 7 * kDayMs;

// ---- messages --------------------------------------------------------------

// Parse errors: "<code>: <path>: <message>" with the path as hint (see
// to_api_error). unknown_field messages name the path themselves.
tl::unexpected<Error> fail(ApiErrorCode code, std::string_view path, std::string_view message);

// An error of a spec-layer parser (parse_size, normalize_mount_target...)
// as an invalid_value, its hint folded into the message.
tl::unexpected<Error> fail_with(std::string_view path, const Error& cause);

// "limits.memory", "env[\"1X\"]", "mounts[2].target".
std::string join_path(std::string_view parent, std::string_view key);
std::string index_path(std::string_view parent, std::size_t index);

tl::unexpected<Error> wrong_type(std::string_view path, std::string_view expected, const Json& v);

// ---- documents -------------------------------------------------------------

// What to accept while reading one document. Inline variables: one object
// each in the whole program, so that a reader may tell requests apart by
// address (&ctx == &kRequest).
struct Ctx {
  bool strict = true;                        // refuse unknown fields
  std::size_t max_string = kMaxStringBytes;  // per string
};
inline constexpr Ctx kRequest{true, kMaxStringBytes};
inline constexpr Ctx kStored{true, std::numeric_limits<std::size_t>::max()};
inline constexpr Ctx kResponse{false, std::numeric_limits<std::size_t>::max()};

Result<Json> parse_json(std::string_view text, const Ctx& ctx);

// One JSON object being read: its path, and the fields it may have.
class Obj {
 public:
  Obj(const Json& json, std::string path, const Ctx& ctx)
      : json_(&json), path_(std::move(path)), ctx_(&ctx) {}

  const Json* get(std::string_view key) const {
    auto it = json_->find(std::string(key));
    return it == json_->end() ? nullptr : &*it;
  }
  std::string at(std::string_view key) const { return join_path(path_, key); }
  const std::string& path() const { return path_; }
  const Ctx& ctx() const { return *ctx_; }

 private:
  const Json* json_;
  std::string path_;
  const Ctx* ctx_;
};

Result<Obj> open_object(const Json& v, std::string path, const Ctx& ctx,
                        std::initializer_list<std::string_view> known,
                        std::string_view expected = "an object");

// ---- fields ----------------------------------------------------------------

Result<std::string> read_string(const Json& v, std::string_view path, const Ctx& ctx,
                                std::string_view expected = "a string");
// A string that the kernel will see as a C string.
Result<std::string> read_c_string(const Json& v, std::string_view path, const Ctx& ctx);
Result<bool> read_bool(const Json& v, std::string_view path);
// An integer in [min, max].
Result<std::uint64_t> read_uint(const Json& v, std::string_view path, std::uint64_t min,
                                std::uint64_t max, std::string_view expected = "an integer");
Result<std::int64_t> read_int(const Json& v, std::string_view path, std::int64_t min,
                              std::int64_t max);
// A size: bytes as an integer, or a string with a unit (parse_size).
Result<std::uint64_t> read_size(const Json& v, std::string_view path, const Ctx& ctx);
Result<std::uint64_t> read_size_at_least(const Json& v, std::string_view path, const Ctx& ctx,
                                         std::uint64_t min);
// A duration in milliseconds: whole seconds as an integer, or a string
// with units (parse_duration); in [min_ms, max_ms].
Result<std::int64_t> read_duration_ms(const Json& v, std::string_view path, const Ctx& ctx,
                                      std::int64_t min_ms, std::int64_t max_ms);
// A number of cores (1.5) or a string ("500m"), more than 0, at most 1024.
Result<double> read_cpus(const Json& v, std::string_view path, const Ctx& ctx);
// An absolute path inside the sandbox (workdir, cwd).
Status check_absolute(const std::string& value, std::string_view path);
// A path for the file API: relative or absolute, resolved inside the
// sandbox by the file layer (docs/file-api.md), which checks the rest.
Status check_file_path(const std::string& value, std::string_view path);
// An env object. With `unset` (a create's env, which goes on top of the
// daemon's defaults) a null value is allowed too: the name goes to *unset.
Result<std::vector<std::pair<std::string, std::string>>> read_env(
    const Json& v, std::string_view path, const Ctx& ctx,
    std::vector<std::string>* unset = nullptr);
// A sandbox's metadata: an object of string values, at most
// kMaxMetadata entries, keys 1-kMaxMetadataKey bytes, values at most
// kMaxMetadataValue bytes, no NUL.
inline constexpr std::size_t kMaxMetadata = 64;
inline constexpr std::size_t kMaxMetadataKey = 128;
inline constexpr std::size_t kMaxMetadataValue = 1024;
Result<std::map<std::string, std::string>> read_metadata(const Json& v, std::string_view path,
                                                         const Ctx& ctx);
Result<std::vector<std::string>> read_string_list(const Json& v, std::string_view path,
                                                  const Ctx& ctx, std::size_t max_items,
                                                  bool c_strings);
// A byte string sent as "<key>" (UTF-8 text) or "<key>_b64" (base64), at
// most one of them. Absent: nullopt.
Result<std::optional<std::string>> read_bytes(const Obj& obj, std::string_view key,
                                              std::size_t max_bytes);

// Helpers for optional fields: `set` runs only when the field is present.
template <typename T, typename Reader>
Status read_into(const Obj& obj, std::string_view key, T& out, Reader reader) {
  const Json* v = obj.get(key);
  if (v == nullptr) return ok();
  auto value = reader(*v, obj.at(key));
  if (!value) return tl::unexpected<Error>(value.error());
  out = static_cast<T>(std::move(*value));
  return ok();
}

// A nullable integer of a response ("exit_code": null), of type T.
template <typename T>
Status read_optional_int(const Obj& obj, std::string_view key, std::optional<T>& out) {
  const Json* v = obj.get(key);
  if (v == nullptr || v->is_null()) {
    out.reset();
    return ok();
  }
  auto n = read_int(*v, obj.at(key), std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  if (!n) return tl::unexpected<Error>(n.error());
  out = static_cast<T>(*n);
  return ok();
}

// A nullable string of a response ("error": null).
inline Status read_optional_string(const Obj& obj, std::string_view key,
                                   std::optional<std::string>& out) {
  const Json* v = obj.get(key);
  if (v == nullptr || v->is_null()) {
    out.reset();
    return ok();
  }
  auto s = read_string(*v, obj.at(key), obj.ctx());
  if (!s) return tl::unexpected<Error>(s.error());
  out = std::move(*s);
  return ok();
}

inline auto any_i64() {
  return [](const Json& v, std::string_view path) {
    return read_int(v, path, std::numeric_limits<std::int64_t>::min(),
                    std::numeric_limits<std::int64_t>::max());
  };
}
inline auto any_u64() {
  return [](const Json& v, std::string_view path) {
    return read_uint(v, path, 0, std::numeric_limits<std::uint64_t>::max());
  };
}
inline auto any_bool() {
  return [](const Json& v, std::string_view path) { return read_bool(v, path); };
}
inline auto any_string(const Ctx& ctx) {
  return [&ctx](const Json& v, std::string_view path) { return read_string(v, path, ctx); };
}

// Runs `body`, turning anything thrown into an internal error: parsers
// never throw.
template <typename T, typename Body>
Result<T> guarded(Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInternal,
                      std::string(wire_name(ApiErrorCode::kInternal)) +
                          ": parsing the JSON body: " + printable_ascii(e.what(), 200));
  } catch (...) {
    return make_error(ErrorCode::kInternal, std::string(wire_name(ApiErrorCode::kInternal)) +
                                                ": parsing the JSON body failed");
  }
}

// Parses `text` as one document and reads it with reader(doc, "", ctx),
// guarded: the public parse_* functions whose whole body is one reader.
template <typename T, typename Reader>
Result<T> read_document(std::string_view text, const Ctx& ctx, Reader reader) {
  return guarded<T>([&]() -> Result<T> {
    auto doc = parse_json(text, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return reader(*doc, "", ctx);
  });
}

// A top-level {"<key>": [...]} list of a response.
template <typename T, typename Reader>
Result<std::vector<T>> read_list(const Json& doc, std::string_view key, const Ctx& ctx,
                                 Reader reader) {
  auto obj = open_object(doc, "", ctx, {key});
  if (!obj) return tl::unexpected<Error>(obj.error());
  std::vector<T> out;
  const Json* list = obj->get(key);
  if (list == nullptr) return fail(ApiErrorCode::kInvalidValue, key, "is missing");
  if (!list->is_array()) return wrong_type(key, "an array", *list);
  out.reserve(list->size());
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto item = reader((*list)[i], index_path(key, i), ctx);
    if (!item) return tl::unexpected<Error>(item.error());
    out.push_back(std::move(*item));
  }
  return out;
}

// A response's {"<key>": [...]} body, each item read by
// reader(item, path, ctx).
template <typename T, typename Reader>
Result<std::vector<T>> read_list_document(std::string_view text, std::string_view key,
                                          Reader reader) {
  return guarded<std::vector<T>>([&]() -> Result<std::vector<T>> {
    auto doc = parse_json(text, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_list<T>(*doc, key, kResponse, reader);
  });
}

}  // namespace corral::api::json
