// The strict JSON reader (json_reader.h). nlohmann::json is used without
// exceptions on the parsing side (Json::sax_parse with our own DOM builder,
// whose parse_error() turns nlohmann's error into a value).
#include "api/json_reader.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <set>

#include "base/strings.h"
#include "api/base64.h"
#include "base/json_text.h"
#include "spec/mount_arg.h"  // is_valid_env_name

namespace corral::api::json {
namespace {

constexpr double kMaxCpus = 1024.0;

bool is_plain_key(std::string_view key) {
  if (key.empty() || key.size() > 64) return false;
  if (!((key[0] >= 'a' && key[0] <= 'z') || (key[0] >= 'A' && key[0] <= 'Z') || key[0] == '_')) {
    return false;
  }
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string describe(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return *v.get_ptr<const Json::boolean_t*>() ? "true" : "false";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "the number " + json_text(v);
    case Json::value_t::string:
      return "the string " + quote_for_message(*v.get_ptr<const Json::string_t*>());
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::binary:
    case Json::value_t::discarded:
      break;
  }
  return "an unexpected value";
}

// A negative integer, else nullptr. (nlohmann's get_ptr<number_integer_t>
// also answers for unsigned values: is_number_integer() covers both.)
const Json::number_integer_t* negative_int(const Json& v) {
  return v.is_number_unsigned() ? nullptr : v.get_ptr<const Json::number_integer_t*>();
}

// "30s", "250ms", "168h" for a duration in milliseconds.
std::string format_ms(std::int64_t ms) {
  if (ms != 0 && ms % (3600 * kSecondMs) == 0) return std::to_string(ms / (3600 * kSecondMs)) + "h";
  if (ms != 0 && ms % (60 * kSecondMs) == 0) return std::to_string(ms / (60 * kSecondMs)) + "m";
  if (ms % kSecondMs == 0) return std::to_string(ms / kSecondMs) + "s";
  return std::to_string(ms) + "ms";
}

std::string join(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out.append(", ");
    out.append(n);
  }
  return out;
}

// Refuses bodies nested deeper than kMaxDepth before nlohmann sees them
// (its DOM builder keeps a stack per level). Brackets inside strings do not
// count; malformed text is left to the parser.
bool too_deep(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxDepth) return true;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return false;
}

// Builds the document from nlohmann's SAX events (Json::sax_parse, which
// reports errors to parse_error() instead of throwing). Unlike nlohmann's
// own DOM parser it appends fields without looking them up (ordered_json
// looks keys up linearly, which would make a 4096-variable env quadratic);
// a set per object refuses a field given twice instead (nlohmann would keep
// the last one). It also bounds the fields per object and per request, and
// tracks the JSON path to name what it refuses.
class DomBuilder {
 public:
  explicit DomBuilder(bool bound_request) : bound_request_(bound_request) {}

  bool null() { return put(Json(nullptr)) != nullptr; }
  bool boolean(bool b) { return put(Json(b)) != nullptr; }
  bool number_integer(Json::number_integer_t n) { return put(Json(n)) != nullptr; }
  bool number_unsigned(Json::number_unsigned_t n) { return put(Json(n)) != nullptr; }
  bool number_float(Json::number_float_t f, const Json::string_t&) {
    return put(Json(f)) != nullptr;
  }
  bool string(Json::string_t& s) { return put(Json(std::move(s))) != nullptr; }
  bool binary(Json::binary_t&) { return put(Json(nullptr)) != nullptr; }  // not in JSON text

  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(Json::string_t& key) {
    Frame& f = frames_.back();
    if (!f.keys.insert(key).second) {
      return refuse(ApiErrorCode::kBadJson, join_path(f.path, key),
                    "the field is given twice (each field may appear once)");
    }
    if (f.keys.size() > kMaxFieldsPerObject) {
      return refuse(ApiErrorCode::kInvalidValue, f.path,
                    "more than " + std::to_string(kMaxFieldsPerObject) + " fields in one object");
    }
    if (bound_request_ && ++total_keys_ > kMaxFieldsPerRequest) {
      return refuse(ApiErrorCode::kInvalidValue, "",
                    "more than " + std::to_string(kMaxFieldsPerRequest) + " fields in the body");
    }
    f.key = std::move(key);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const Json::exception& ex) {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    std::string what = ex.what();
    if (what.starts_with("[json.exception.")) {
      std::size_t close = what.find("] ");
      if (close != std::string::npos) what.erase(0, close + 2);
    }
    return refuse(ApiErrorCode::kBadJson, "", printable_ascii(what, 300));
  }

  const std::optional<Error>& error() const { return error_; }
  Json& root() { return root_; }

 private:
  struct Frame {
    Json* container;
    std::string path;
    std::set<std::string> keys;  // objects: the fields seen so far
    std::string key;             // objects: the field being read
  };

  bool refuse(ApiErrorCode code, std::string_view path, std::string_view message) {
    if (!error_) error_ = fail(code, path, message).value();
    return false;
  }

  // Places a value in the container being read; returns where it went.
  Json* put(Json&& value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.container->is_array()) {
      auto& array = *f.container->get_ptr<Json::array_t*>();
      array.push_back(std::move(value));
      return &array.back();
    }
    // ordered_map is a std::vector of pairs: append without a lookup (the
    // key was checked to be new in key()).
    auto& object = *f.container->get_ptr<Json::object_t*>();
    object.emplace_back(std::move(f.key), std::move(value));
    return &object.back().second;
  }

  bool open(Json&& container) {
    if (frames_.size() >= static_cast<std::size_t>(kMaxDepth)) {
      return refuse(ApiErrorCode::kBadJson, "",
                    "nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    std::string path;
    if (!frames_.empty()) {
      const Frame& parent = frames_.back();
      path = parent.container->is_object() ? join_path(parent.path, parent.key)
                                           : index_path(parent.path, parent.container->size());
    }
    Json* placed = put(std::move(container));
    frames_.push_back({placed, std::move(path), {}, {}});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  bool bound_request_;
  std::size_t total_keys_ = 0;
  Json root_;
  std::vector<Frame> frames_;
  std::optional<Error> error_;
};

}  // namespace

// Parse errors: "<code>: <path>: <message>" with the path as hint (see
// to_api_error). unknown_field messages name the path themselves.
tl::unexpected<Error> fail(ApiErrorCode code, std::string_view path, std::string_view message) {
  std::string msg(wire_name(code));
  msg.append(": ");
  if (!path.empty()) msg.append(path).append(": ");
  msg.append(message);
  return make_error(ErrorCode::kInvalidArgument, std::move(msg), std::string(path));
}

// An error of a spec-layer parser (parse_size, normalize_mount_target...)
// as an invalid_value, its hint folded into the message.
tl::unexpected<Error> fail_with(std::string_view path, const Error& cause) {
  std::string msg = cause.message;
  if (!cause.hint.empty()) msg.append(" (").append(cause.hint).append(")");
  return fail(ApiErrorCode::kInvalidValue, path, msg);
}

// "limits.memory", "env[\"1X\"]", "mounts[2].target".
std::string join_path(std::string_view parent, std::string_view key) {
  std::string path(parent);
  if (is_plain_key(key)) {
    if (!path.empty()) path.push_back('.');
    path.append(key);
  } else {
    path.append("[").append(quote_for_message(key)).append("]");
  }
  return path;
}

std::string index_path(std::string_view parent, std::size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

tl::unexpected<Error> wrong_type(std::string_view path, std::string_view expected, const Json& v) {
  return fail(ApiErrorCode::kWrongType, path,
              "expected " + std::string(expected) + ", found " + describe(v));
}

Result<Json> parse_json(std::string_view text, const Ctx& ctx) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return fail(ApiErrorCode::kBadJson, "", "the body is empty; expected a JSON object");
  }
  if (too_deep(text)) {
    return fail(ApiErrorCode::kBadJson, "",
                "nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  DomBuilder builder(ctx.strict);
  bool parsed = Json::sax_parse(text.begin(), text.end(), &builder, Json::input_format_t::json,
                                /*strict=*/true, /*ignore_comments=*/false);
  if (builder.error()) return tl::unexpected<Error>(*builder.error());
  if (!parsed) return fail(ApiErrorCode::kBadJson, "", "not valid JSON");
  return std::move(builder.root());
}

Result<Obj> open_object(const Json& v, std::string path, const Ctx& ctx,
                        std::initializer_list<std::string_view> known, std::string_view expected) {
  if (!v.is_object()) {
    if (path.empty()) {
      return fail(ApiErrorCode::kWrongType, "",
                  "expected the body to be a JSON object, found " + describe(v));
    }
    return wrong_type(path, expected, v);
  }
  if (ctx.strict) {
    for (auto it = v.cbegin(); it != v.cend(); ++it) {
      const std::string& key = it.key();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string field = join_path(path, key);
        return make_error(ErrorCode::kInvalidArgument,
                          std::string(wire_name(ApiErrorCode::kUnknownField)) +
                              ": unknown field \"" + field + "\" (known: " + join(known) + ")",
                          field);
      }
    }
  }
  return Obj(v, std::move(path), ctx);
}

Result<std::string> read_string(const Json& v, std::string_view path, const Ctx& ctx,
                                std::string_view expected) {
  const auto* s = v.get_ptr<const Json::string_t*>();
  if (s == nullptr) return wrong_type(path, expected, v);
  if (s->size() > ctx.max_string) {
    return fail(ApiErrorCode::kInvalidValue, path,
                "longer than " + std::to_string(ctx.max_string) + " bytes (" +
                    std::to_string(s->size()) + ")");
  }
  return *s;
}

// A string that the kernel will see as a C string.
Result<std::string> read_c_string(const Json& v, std::string_view path, const Ctx& ctx) {
  auto s = read_string(v, path, ctx);
  if (!s) return s;
  if (s->find('\0') != std::string::npos) {
    return fail(ApiErrorCode::kInvalidValue, path, "contains a NUL byte (\\u0000)");
  }
  return s;
}

Result<bool> read_bool(const Json& v, std::string_view path) {
  const auto* b = v.get_ptr<const Json::boolean_t*>();
  if (b == nullptr) return wrong_type(path, "true or false", v);
  return *b;
}

// An integer in [min, max].
Result<std::uint64_t> read_uint(const Json& v, std::string_view path, std::uint64_t min,
                                std::uint64_t max, std::string_view expected) {
  std::string range = "must be between " + std::to_string(min) + " and " + std::to_string(max);
  if (const auto* n = negative_int(v)) {
    return fail(ApiErrorCode::kInvalidValue, path, range + ", found " + std::to_string(*n));
  }
  const auto* u = v.get_ptr<const Json::number_unsigned_t*>();
  if (u == nullptr) return wrong_type(path, expected, v);
  if (*u < min || *u > max) {
    return fail(ApiErrorCode::kInvalidValue, path, range + ", found " + std::to_string(*u));
  }
  return *u;
}

Result<std::int64_t> read_int(const Json& v, std::string_view path, std::int64_t min,
                              std::int64_t max) {
  std::int64_t value = 0;
  if (const auto* n = negative_int(v)) {
    value = *n;
  } else if (const auto* u = v.get_ptr<const Json::number_unsigned_t*>()) {
    if (*u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return fail(ApiErrorCode::kInvalidValue, path, "too large, found " + std::to_string(*u));
    }
    value = static_cast<std::int64_t>(*u);
  } else {
    return wrong_type(path, "an integer", v);
  }
  if (value < min || value > max) {
    return fail(ApiErrorCode::kInvalidValue, path,
                "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                    ", found " + std::to_string(value));
  }
  return value;
}

// A size: bytes as an integer, or a string with a unit (parse_size).
Result<std::uint64_t> read_size(const Json& v, std::string_view path, const Ctx& ctx) {
  constexpr std::string_view kExpected =
      "a size: bytes as an integer (536870912) or a string with a unit (\"512Mi\")";
  if (v.is_string()) {
    auto text = read_string(v, path, ctx);
    if (!text) return tl::unexpected<Error>(text.error());
    auto size = parse_size(*text);
    if (!size) return fail_with(path, size.error());
    return *size;
  }
  if (const auto* n = negative_int(v)) {
    return fail(ApiErrorCode::kInvalidValue, path,
                "must be greater than zero, found " + std::to_string(*n));
  }
  const auto* u = v.get_ptr<const Json::number_unsigned_t*>();
  if (u == nullptr) return wrong_type(path, kExpected, v);
  if (*u == 0) return fail(ApiErrorCode::kInvalidValue, path, "must be greater than zero, found 0");
  return *u;
}

Result<std::uint64_t> read_size_at_least(const Json& v, std::string_view path, const Ctx& ctx,
                                         std::uint64_t min) {
  auto size = read_size(v, path, ctx);
  if (size && *size < min) {
    return fail(ApiErrorCode::kInvalidValue, path,
                "must be at least " + format_size(min) + ", found " + format_size(*size));
  }
  return size;
}

// A duration in milliseconds: whole seconds as an integer, or a string
// with units (parse_duration); in [min_ms, max_ms].
Result<std::int64_t> read_duration_ms(const Json& v, std::string_view path, const Ctx& ctx,
                                      std::int64_t min_ms, std::int64_t max_ms) {
  constexpr std::string_view kExpected =
      "a duration: whole seconds as an integer (30) or a string with units (\"30s\", \"1500ms\", "
      "\"1h30m\")";
  std::string range = "must be between " + format_ms(min_ms) + " and " + format_ms(max_ms);
  if (max_ms == kMaxLifetimeMs) range.append(" (7 days)");
  std::int64_t ms = 0;
  if (v.is_string()) {
    auto text = read_string(v, path, ctx);
    if (!text) return tl::unexpected<Error>(text.error());
    auto d = parse_duration(*text);
    if (!d) return fail_with(path, d.error());
    ms = d->count();
  } else if (const auto* n = negative_int(v)) {
    return fail(ApiErrorCode::kInvalidValue, path,
                range + ", found " + std::to_string(*n) + " seconds");
  } else if (const auto* u = v.get_ptr<const Json::number_unsigned_t*>()) {
    if (*u > static_cast<std::uint64_t>(max_ms / kSecondMs)) {
      return fail(ApiErrorCode::kInvalidValue, path,
                  range + ", found " + std::to_string(*u) + " seconds");
    }
    ms = static_cast<std::int64_t>(*u) * kSecondMs;
  } else {
    return wrong_type(path, kExpected, v);
  }
  if (ms < min_ms || ms > max_ms) {
    return fail(ApiErrorCode::kInvalidValue, path, range + ", found " + format_ms(ms));
  }
  return ms;
}

Result<double> read_cpus(const Json& v, std::string_view path, const Ctx& ctx) {
  constexpr std::string_view kRange = "must be more than 0 and at most 1024";
  if (v.is_string()) {
    auto text = read_string(v, path, ctx);
    if (!text) return tl::unexpected<Error>(text.error());
    auto cpus = parse_cpus(*text);
    if (!cpus) return fail_with(path, cpus.error());
    return *cpus;
  }
  if (!v.is_number()) {
    return wrong_type(path, "a number of cores (1.5) or a string (\"500m\" for millicores)", v);
  }
  double cpus = 0;
  if (const auto* f = v.get_ptr<const Json::number_float_t*>()) {
    cpus = *f;
  } else if (const auto* n = negative_int(v)) {
    cpus = static_cast<double>(*n);
  } else {
    cpus = static_cast<double>(*v.get_ptr<const Json::number_unsigned_t*>());
  }
  if (!std::isfinite(cpus) || !(cpus > 0.0) || cpus > kMaxCpus) {
    return fail(ApiErrorCode::kInvalidValue, path, std::string(kRange) + ", found " + json_text(v));
  }
  return cpus;
}

// An absolute path inside the sandbox (workdir, cwd).
Status check_absolute(const std::string& value, std::string_view path) {
  std::string quoted = quote_for_message(value);
  if (value.empty() || value.front() != '/') {
    return fail(ApiErrorCode::kInvalidValue, path,
                quoted + " is not an absolute path (such as /workspace)");
  }
  if (value.size() > kMaxPathBytes) {
    return fail(ApiErrorCode::kInvalidValue, path,
                "longer than " + std::to_string(kMaxPathBytes) + " bytes");
  }
  if (value.find('\0') != std::string::npos) {
    return fail(ApiErrorCode::kInvalidValue, path, "contains a NUL byte (\\u0000)");
  }
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t slash = value.find('/', start);
    std::size_t end = slash == std::string::npos ? value.size() : slash;
    if (std::string_view(value).substr(start, end - start) == "..") {
      return fail(ApiErrorCode::kInvalidValue, path, quoted + " contains a \"..\" component");
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return ok();
}

// A path for the file API: relative or absolute, resolved inside the
// sandbox by the file layer (docs/file-api.md), which checks the rest.
Status check_file_path(const std::string& value, std::string_view path) {
  if (value.empty())
    return fail(ApiErrorCode::kInvalidValue, path, "is empty (use \"/\" for the root)");
  if (value.size() > kMaxPathBytes) {
    return fail(ApiErrorCode::kInvalidValue, path,
                "longer than " + std::to_string(kMaxPathBytes) + " bytes");
  }
  if (value.find('\0') != std::string::npos) {
    return fail(ApiErrorCode::kInvalidValue, path, "contains a NUL byte (\\u0000)");
  }
  return ok();
}

// An env object. With `unset` (a create's env, which goes on top of the
// daemon's defaults) a null value is allowed too: the name goes to *unset.
Result<std::vector<std::pair<std::string, std::string>>> read_env(const Json& v,
                                                                  std::string_view path,
                                                                  const Ctx& ctx,
                                                                  std::vector<std::string>* unset) {
  if (!v.is_object()) return wrong_type(path, "an object of \"NAME\": \"value\"", v);
  if (v.size() > kMaxEnv) {
    return fail(
        ApiErrorCode::kInvalidValue, path,
        "more than " + std::to_string(kMaxEnv) + " variables (" + std::to_string(v.size()) + ")");
  }
  std::vector<std::pair<std::string, std::string>> env;
  env.reserve(v.size());
  for (auto it = v.cbegin(); it != v.cend(); ++it) {
    const std::string& name = it.key();
    std::string var_path = join_path(path, name);
    if (!is_valid_env_name(name) || name.size() > ctx.max_string) {
      return fail(ApiErrorCode::kInvalidValue, var_path,
                  "invalid variable name: it must match [A-Za-z_][A-Za-z0-9_]*");
    }
    if (unset != nullptr && it.value().is_null()) {
      unset->push_back(name);
      continue;
    }
    auto value = read_string(it.value(), var_path, ctx,
                             unset != nullptr ? "a string value or null" : "a string value");
    if (!value) return tl::unexpected<Error>(value.error());
    if (value->find('\0') != std::string::npos) {
      return fail(ApiErrorCode::kInvalidValue, var_path, "the value contains a NUL byte (\\u0000)");
    }
    env.emplace_back(name, std::move(*value));
  }
  return env;
}

Result<std::map<std::string, std::string>> read_metadata(const Json& v, std::string_view path,
                                                         const Ctx& ctx) {
  if (!v.is_object()) return wrong_type(path, "an object of \"key\": \"value\"", v);
  if (v.size() > kMaxMetadata)
    return fail(ApiErrorCode::kInvalidValue, path,
                "more than " + std::to_string(kMaxMetadata) + " entries (" +
                    std::to_string(v.size()) + ")");
  std::map<std::string, std::string> out;
  for (auto it = v.cbegin(); it != v.cend(); ++it) {
    const std::string& key = it.key();
    std::string item_path = join_path(path, key);
    if (key.empty() || key.size() > kMaxMetadataKey || key.find('\0') != std::string::npos)
      return fail(ApiErrorCode::kInvalidValue, item_path,
                  "a metadata key is 1 to " + std::to_string(kMaxMetadataKey) +
                      " bytes without NUL");
    auto value = read_string(it.value(), item_path, ctx, "a string value");
    if (!value) return tl::unexpected<Error>(value.error());
    if (value->size() > kMaxMetadataValue || value->find('\0') != std::string::npos)
      return fail(ApiErrorCode::kInvalidValue, item_path,
                  "a metadata value is at most " + std::to_string(kMaxMetadataValue) +
                      " bytes without NUL");
    out.emplace(key, std::move(*value));
  }
  return out;
}

Result<std::vector<std::string>> read_string_list(const Json& v, std::string_view path,
                                                  const Ctx& ctx, std::size_t max_items,
                                                  bool c_strings) {
  if (!v.is_array()) return wrong_type(path, "an array of strings", v);
  if (v.size() > max_items) {
    return fail(
        ApiErrorCode::kInvalidValue, path,
        "more than " + std::to_string(max_items) + " entries (" + std::to_string(v.size()) + ")");
  }
  std::vector<std::string> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto s = c_strings ? read_c_string(v[i], index_path(path, i), ctx)
                       : read_string(v[i], index_path(path, i), ctx);
    if (!s) return tl::unexpected<Error>(s.error());
    out.push_back(std::move(*s));
  }
  return out;
}

// A byte string sent as "<key>" (UTF-8 text) or "<key>_b64" (base64), at
// most one of them. Absent: nullopt.
Result<std::optional<std::string>> read_bytes(const Obj& obj, std::string_view key,
                                              std::size_t max_bytes) {
  std::string b64_key = std::string(key) + "_b64";
  const Json* text = obj.get(key);
  const Json* b64 = obj.get(b64_key);
  if (text != nullptr && b64 != nullptr) {
    return fail(ApiErrorCode::kInvalidValue, obj.at(key),
                "give either \"" + std::string(key) + "\" or \"" + b64_key + "\", not both");
  }
  Ctx ctx = obj.ctx();
  ctx.max_string = std::max(ctx.max_string, max_bytes);
  if (text != nullptr) {
    auto s = read_string(*text, obj.at(key), ctx);
    if (!s) return tl::unexpected<Error>(s.error());
    if (s->size() > max_bytes) {
      return fail(ApiErrorCode::kInvalidValue, obj.at(key),
                  "longer than " + std::to_string(max_bytes) + " bytes");
    }
    return std::optional<std::string>(std::move(*s));
  }
  if (b64 != nullptr) {
    std::size_t max_text = max_bytes / 3 * 4 + 4;
    if (max_text < max_bytes) max_text = std::numeric_limits<std::size_t>::max();  // overflow
    ctx.max_string = max_text;
    auto s = read_string(*b64, obj.at(b64_key), ctx, "a base64 string");
    if (!s) return tl::unexpected<Error>(s.error());
    auto bytes = base64_decode(*s);
    if (!bytes) return fail_with(obj.at(b64_key), bytes.error());
    if (bytes->size() > max_bytes) {
      return fail(ApiErrorCode::kInvalidValue, obj.at(b64_key),
                  "longer than " + std::to_string(max_bytes) + " bytes once decoded");
    }
    return std::optional<std::string>(std::move(*bytes));
  }
  return std::optional<std::string>();
}

}  // namespace corral::api::json
