// The API's JSON codec. nlohmann::json is used without exceptions on the
// parsing side (Json::sax_parse with our own DOM builder, whose
// parse_error() turns nlohmann's error into a value), and every dump()
// replaces invalid UTF-8 instead of throwing; byte strings
// that may not be UTF-8 (outputs, file names, stdin) are checked first and
// sent as "*_b64" when they are not. Every public function also catches
// whatever might still escape (std::bad_alloc), so that a request can never
// take the daemon down.
//
// Requests (what the server reads from clients) are parsed strictly:
// unknown fields are refused by name, strings and counts are bounded.
// Responses (what clients read from the server) ignore unknown fields, so
// that an older client keeps working against a newer daemon that added one,
// but still check the type of every field they know.
#include "api/api_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "api/base64.h"
#include "api/json_string.h"
#include "base/json_text.h"
#include "netns/network_policy.h"
#include "spec/mount_arg.h"
#include "spec/units.h"

namespace corral::api {
namespace {

using Json = nlohmann::ordered_json;

// ---- bounds ----------------------------------------------------------------

constexpr int kMaxDepth = 32;
constexpr std::size_t kMaxEnv = 4096;
constexpr std::size_t kMaxMounts = 64;
constexpr std::size_t kMaxArgv = 4096;
constexpr std::size_t kMaxStringBytes = 128 * kKiB;
// stdin is data rather than a name or a value: bounded like one output
// stream (the body size limit of the HTTP layer bounds it first).
constexpr std::size_t kMaxStdinBytes = 64 * kMiB;
constexpr std::size_t kMaxPathBytes = 4096;
// Fields of one JSON object, and of a whole request body. nlohmann's
// ordered_json looks keys up linearly, so both bounds also keep parsing
// linear in practice.
constexpr std::size_t kMaxFieldsPerObject = 4096;
constexpr std::size_t kMaxFieldsPerRequest = kMaxEnv + 1024;

constexpr std::uint64_t kMinMemoryBytes = 4 * kMiB;
constexpr std::uint64_t kMinDiskBytes = 1 * kMiB;
constexpr std::uint64_t kMaxPids = 65536;
constexpr std::uint64_t kMaxInodes = std::uint64_t{1} << 32;
constexpr double kMaxCpus = 1024.0;
constexpr std::int64_t kSecondMs = 1000;
constexpr std::int64_t kDayMs = 24 * 3600 * kSecondMs;
constexpr std::int64_t kMaxLifetimeMs = 7 * kDayMs;
constexpr std::uint64_t kMaxOutputBytes = 64 * kMiB;
constexpr std::uint32_t kMaxMode = 0777;
constexpr std::size_t kMaxRawErrorBytes = 1024;

// ---- error table -------------------------------------------------------------

const std::vector<ErrorCodeInfo> kErrorCodes = {
    {"bad_json", 400},
    {"unknown_field", 400},
    {"wrong_type", 400},
    {"invalid_value", 400},
    {"path_escape", 400},
    {"unauthorized", 401},
    {"secret_file", 403},
    {"not_found", 404},
    {"method_not_allowed", 405},
    {"request_timeout", 408},
    {"conflict", 409},
    {"idempotency_mismatch", 409},
    {"sandbox_expired", 410},
    {"body_too_large", 413},
    {"unsupported_media_type", 415},
    {"over_capacity", 429},
    {"internal", 500},
    {"setup_failed", 500},
    {"unavailable", 503},
    {"network_unavailable", 503},
    {"insufficient_storage", 507},
};

const ErrorCodeInfo* find_code(std::string_view code) {
  for (const auto& info : kErrorCodes) {
    if (info.code == code) return &info;
  }
  return nullptr;
}

// ---- messages ----------------------------------------------------------------

// Any text made printable ASCII (other bytes as \xNN), cut after `max`
// bytes.
std::string printable_text(std::string_view text, std::size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  std::size_t n = std::min(text.size(), max);
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f) {
      out.append("\\x");
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (n < text.size()) out.append("...");
  return out;
}

// Parse errors: "<code>: <path>: <message>" with the path as hint (see
// to_api_error). unknown_field messages name the path themselves.
tl::unexpected<Error> fail(std::string_view code, std::string_view path, std::string_view message) {
  std::string msg(code);
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
  return fail("invalid_value", path, msg);
}

bool is_plain_key(std::string_view key) {
  if (key.empty() || key.size() > 64) return false;
  if (!((key[0] >= 'a' && key[0] <= 'z') || (key[0] >= 'A' && key[0] <= 'Z') || key[0] == '_')) {
    return false;
  }
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
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

tl::unexpected<Error> wrong_type(std::string_view path, std::string_view expected, const Json& v) {
  return fail("wrong_type", path, "expected " + std::string(expected) + ", found " + describe(v));
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

// ---- parsing -----------------------------------------------------------------

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
      return refuse("bad_json", join_path(f.path, key),
                    "the field is given twice (each field may appear once)");
    }
    if (f.keys.size() > kMaxFieldsPerObject) {
      return refuse("invalid_value", f.path,
                    "more than " + std::to_string(kMaxFieldsPerObject) + " fields in one object");
    }
    if (bound_request_ && ++total_keys_ > kMaxFieldsPerRequest) {
      return refuse("invalid_value", "",
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
    return refuse("bad_json", "", printable_text(what, 300));
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

  bool refuse(std::string_view code, std::string_view path, std::string_view message) {
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
      return refuse("bad_json", "", "nested deeper than " + std::to_string(kMaxDepth) + " levels");
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

// What to accept while reading one document.
struct Ctx {
  bool strict = true;                        // refuse unknown fields
  std::size_t max_string = kMaxStringBytes;  // per string
};
constexpr Ctx kRequest{true, kMaxStringBytes};
constexpr Ctx kStored{true, std::numeric_limits<std::size_t>::max()};
constexpr Ctx kResponse{false, std::numeric_limits<std::size_t>::max()};

Result<Json> parse_json(std::string_view text, const Ctx& ctx) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return fail("bad_json", "", "the body is empty; expected a JSON object");
  }
  if (too_deep(text)) {
    return fail("bad_json", "", "nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  DomBuilder builder(ctx.strict);
  bool parsed = Json::sax_parse(text.begin(), text.end(), &builder, Json::input_format_t::json,
                                /*strict=*/true, /*ignore_comments=*/false);
  if (builder.error()) return tl::unexpected<Error>(*builder.error());
  if (!parsed) return fail("bad_json", "", "not valid JSON");
  return std::move(builder.root());
}

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
                        std::string_view expected = "an object") {
  if (!v.is_object()) {
    if (path.empty()) {
      return fail("wrong_type", "", "expected the body to be a JSON object, found " + describe(v));
    }
    return wrong_type(path, expected, v);
  }
  if (ctx.strict) {
    for (auto it = v.cbegin(); it != v.cend(); ++it) {
      const std::string& key = it.key();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string field = join_path(path, key);
        return make_error(
            ErrorCode::kInvalidArgument,
            "unknown_field: unknown field \"" + field + "\" (known: " + join(known) + ")", field);
      }
    }
  }
  return Obj(v, std::move(path), ctx);
}

Result<std::string> read_string(const Json& v, std::string_view path, const Ctx& ctx,
                                std::string_view expected = "a string") {
  const auto* s = v.get_ptr<const Json::string_t*>();
  if (s == nullptr) return wrong_type(path, expected, v);
  if (s->size() > ctx.max_string) {
    return fail("invalid_value", path,
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
    return fail("invalid_value", path, "contains a NUL byte (\\u0000)");
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
                                std::uint64_t max, std::string_view expected = "an integer") {
  std::string range = "must be between " + std::to_string(min) + " and " + std::to_string(max);
  if (const auto* n = negative_int(v)) {
    return fail("invalid_value", path, range + ", found " + std::to_string(*n));
  }
  const auto* u = v.get_ptr<const Json::number_unsigned_t*>();
  if (u == nullptr) return wrong_type(path, expected, v);
  if (*u < min || *u > max) {
    return fail("invalid_value", path, range + ", found " + std::to_string(*u));
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
      return fail("invalid_value", path, "too large, found " + std::to_string(*u));
    }
    value = static_cast<std::int64_t>(*u);
  } else {
    return wrong_type(path, "an integer", v);
  }
  if (value < min || value > max) {
    return fail("invalid_value", path,
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
    return fail("invalid_value", path, "must be greater than zero, found " + std::to_string(*n));
  }
  const auto* u = v.get_ptr<const Json::number_unsigned_t*>();
  if (u == nullptr) return wrong_type(path, kExpected, v);
  if (*u == 0) return fail("invalid_value", path, "must be greater than zero, found 0");
  return *u;
}

Result<std::uint64_t> read_size_at_least(const Json& v, std::string_view path, const Ctx& ctx,
                                         std::uint64_t min) {
  auto size = read_size(v, path, ctx);
  if (size && *size < min) {
    return fail("invalid_value", path,
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
    return fail("invalid_value", path, range + ", found " + std::to_string(*n) + " seconds");
  } else if (const auto* u = v.get_ptr<const Json::number_unsigned_t*>()) {
    if (*u > static_cast<std::uint64_t>(max_ms / kSecondMs)) {
      return fail("invalid_value", path, range + ", found " + std::to_string(*u) + " seconds");
    }
    ms = static_cast<std::int64_t>(*u) * kSecondMs;
  } else {
    return wrong_type(path, kExpected, v);
  }
  if (ms < min_ms || ms > max_ms) {
    return fail("invalid_value", path, range + ", found " + format_ms(ms));
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
    return fail("invalid_value", path, std::string(kRange) + ", found " + json_text(v));
  }
  return cpus;
}

// An absolute path inside the sandbox (workdir, cwd).
Status check_absolute(const std::string& value, std::string_view path) {
  std::string quoted = quote_for_message(value);
  if (value.empty() || value.front() != '/') {
    return fail("invalid_value", path, quoted + " is not an absolute path (such as /workspace)");
  }
  if (value.size() > kMaxPathBytes) {
    return fail("invalid_value", path, "longer than " + std::to_string(kMaxPathBytes) + " bytes");
  }
  if (value.find('\0') != std::string::npos) {
    return fail("invalid_value", path, "contains a NUL byte (\\u0000)");
  }
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t slash = value.find('/', start);
    std::size_t end = slash == std::string::npos ? value.size() : slash;
    if (std::string_view(value).substr(start, end - start) == "..") {
      return fail("invalid_value", path, quoted + " contains a \"..\" component");
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return ok();
}

// A path for the file API: relative or absolute, resolved inside the
// sandbox by the file layer (docs/file-api.md), which checks the rest.
Status check_file_path(const std::string& value, std::string_view path) {
  if (value.empty()) return fail("invalid_value", path, "is empty (use \"/\" for the root)");
  if (value.size() > kMaxPathBytes) {
    return fail("invalid_value", path, "longer than " + std::to_string(kMaxPathBytes) + " bytes");
  }
  if (value.find('\0') != std::string::npos) {
    return fail("invalid_value", path, "contains a NUL byte (\\u0000)");
  }
  return ok();
}

// An env object. With `unset` (a create's env, which goes on top of the
// daemon's defaults) a null value is allowed too: the name goes to *unset.
Result<std::vector<std::pair<std::string, std::string>>> read_env(
    const Json& v, std::string_view path, const Ctx& ctx,
    std::vector<std::string>* unset = nullptr) {
  if (!v.is_object()) return wrong_type(path, "an object of \"NAME\": \"value\"", v);
  if (v.size() > kMaxEnv) {
    return fail(
        "invalid_value", path,
        "more than " + std::to_string(kMaxEnv) + " variables (" + std::to_string(v.size()) + ")");
  }
  std::vector<std::pair<std::string, std::string>> env;
  env.reserve(v.size());
  for (auto it = v.cbegin(); it != v.cend(); ++it) {
    const std::string& name = it.key();
    std::string var_path = join_path(path, name);
    if (!is_valid_env_name(name) || name.size() > ctx.max_string) {
      return fail("invalid_value", var_path,
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
      return fail("invalid_value", var_path, "the value contains a NUL byte (\\u0000)");
    }
    env.emplace_back(name, std::move(*value));
  }
  return env;
}

// A create's env on top of the base's (the daemon's defaults): a name set
// in `body` replaces the base's value in place, a new one is appended, and
// a name in `unset` is removed.
Status merge_env(std::vector<std::pair<std::string, std::string>>& base,
                 std::vector<std::pair<std::string, std::string>> body,
                 const std::vector<std::string>& unset, std::string_view path) {
  if (base.empty() && unset.empty()) {
    base = std::move(body);
    return ok();
  }
  std::unordered_map<std::string, std::size_t> index;
  index.reserve(base.size() + body.size());
  for (std::size_t i = 0; i < base.size(); ++i) index.emplace(base[i].first, i);
  for (auto& [name, value] : body) {
    auto [it, added] = index.emplace(name, base.size());
    if (added) {
      base.emplace_back(std::move(name), std::move(value));
    } else {
      base[it->second].second = std::move(value);
    }
  }
  if (!unset.empty()) {
    std::unordered_set<std::string_view> drop(unset.begin(), unset.end());
    std::erase_if(base, [&](const auto& var) { return drop.contains(var.first); });
  }
  if (base.size() > kMaxEnv) {
    return fail("invalid_value", path,
                "more than " + std::to_string(kMaxEnv) + " variables with the daemon's defaults (" +
                    std::to_string(base.size()) + ")");
  }
  return ok();
}

Result<std::vector<std::string>> read_string_list(const Json& v, std::string_view path,
                                                  const Ctx& ctx, std::size_t max_items,
                                                  bool c_strings) {
  if (!v.is_array()) return wrong_type(path, "an array of strings", v);
  if (v.size() > max_items) {
    return fail(
        "invalid_value", path,
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
    return fail("invalid_value", obj.at(key),
                "give either \"" + std::string(key) + "\" or \"" + b64_key + "\", not both");
  }
  Ctx ctx = obj.ctx();
  ctx.max_string = std::max(ctx.max_string, max_bytes);
  if (text != nullptr) {
    auto s = read_string(*text, obj.at(key), ctx);
    if (!s) return tl::unexpected<Error>(s.error());
    if (s->size() > max_bytes) {
      return fail("invalid_value", obj.at(key),
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
      return fail("invalid_value", obj.at(b64_key),
                  "longer than " + std::to_string(max_bytes) + " bytes once decoded");
    }
    return std::optional<std::string>(std::move(*bytes));
  }
  return std::optional<std::string>();
}

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

// A nullable integer of a response ("exit_code": null).
Status read_optional_int(const Obj& obj, std::string_view key, std::optional<int>& out) {
  const Json* v = obj.get(key);
  if (v == nullptr || v->is_null()) {
    out.reset();
    return ok();
  }
  auto n =
      read_int(*v, obj.at(key), std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  if (!n) return tl::unexpected<Error>(n.error());
  out = static_cast<int>(*n);
  return ok();
}

Status read_optional_i64(const Obj& obj, std::string_view key, std::optional<std::int64_t>& out) {
  const Json* v = obj.get(key);
  if (v == nullptr || v->is_null()) {
    out.reset();
    return ok();
  }
  auto n = read_int(*v, obj.at(key), std::numeric_limits<std::int64_t>::min(),
                    std::numeric_limits<std::int64_t>::max());
  if (!n) return tl::unexpected<Error>(n.error());
  out = *n;
  return ok();
}

auto any_i64() {
  return [](const Json& v, std::string_view path) {
    return read_int(v, path, std::numeric_limits<std::int64_t>::min(),
                    std::numeric_limits<std::int64_t>::max());
  };
}
auto any_u64() {
  return [](const Json& v, std::string_view path) {
    return read_uint(v, path, 0, std::numeric_limits<std::uint64_t>::max());
  };
}
auto any_bool() {
  return [](const Json& v, std::string_view path) { return read_bool(v, path); };
}
auto any_string(const Ctx& ctx) {
  return [&ctx](const Json& v, std::string_view path) { return read_string(v, path, ctx); };
}

// Runs `body`, turning anything thrown into an internal error: parsers
// never throw.
template <typename T, typename Body>
Result<T> guarded(Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInternal, std::string("internal: parsing the JSON body: ") +
                                                printable_text(e.what(), 200));
  } catch (...) {
    return make_error(ErrorCode::kInternal, "internal: parsing the JSON body failed");
  }
}

// ---- writing -----------------------------------------------------------------

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// "<key>": text when the bytes are UTF-8, else "<key>_b64": base64.
void put_bytes(Json& j, std::string_view key, std::string_view bytes) {
  if (is_valid_utf8(bytes)) {
    j[std::string(key)] = std::string(bytes);
  } else {
    j[std::string(key) + "_b64"] = base64_encode(bytes);
  }
}

template <typename T>
Json nullable(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
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

Json error_body_json(const ApiError& e) {
  Json j = Json::object();
  j["code"] = e.code;
  j["message"] = e.message;
  if (!e.field.empty()) j["field"] = e.field;
  if (!e.hint.empty()) j["hint"] = e.hint;
  return j;
}

Result<ApiError> read_error_body(const Json& v, std::string_view path, const Ctx& ctx) {
  auto obj = open_object(v, std::string(path), ctx, {"code", "message", "field", "hint"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  ApiError e;
  const Json* code = obj->get("code");
  if (code == nullptr) return fail("invalid_value", obj->at("code"), "is missing");
  CORRAL_TRY(read_into(*obj, "code", e.code, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "message", e.message, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "field", e.field, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "hint", e.hint, any_string(ctx)));
  const ErrorCodeInfo* info = find_code(e.code);
  e.http_status = info != nullptr ? info->http_status : 500;
  return e;
}

// ---- the spec ------------------------------------------------------------------

// ---- network ---------------------------------------------------------------------

constexpr std::size_t kMaxNetworkRules = 1024;
constexpr std::int64_t kMaxNetworkTimeoutMs = 3600 * kSecondMs;
constexpr double kMaxNetworkRate = 1e6;

// The API form, which is also the stored form: absent lists are empty, an
// absent timeout or rate is the daemon's default.
Json network_json(const NetworkSpec& n) {
  Json j = Json::object();
  j["mode"] = n.mode;
  if (!n.template_name.empty()) j["template"] = n.template_name;
  j["allow"] = strings_json(n.allow);
  j["deny"] = strings_json(n.deny);
  if (!n.remove.empty()) j["remove"] = strings_json(n.remove);
  j["allow_domains"] = strings_json(n.allow_domains);
  j["dns_servers"] = strings_json(n.dns_servers);
  if (n.timeout_ms > 0) j["timeout"] = duration_json(n.timeout_ms);
  if (n.rate_per_second >= 0) {
    Json rate = Json::object();
    rate["per_second"] = n.rate_per_second;
    rate["burst"] = n.rate_burst >= 0       ? n.rate_burst
                    : n.rate_per_second > 0 ? std::max(1.0, 2 * n.rate_per_second)
                                            : 0.0;
    j["rate"] = std::move(rate);
  }
  j["gateway"] = strings_json(n.gateway);
  return j;
}

Result<double> read_rate_number(const Json& v, std::string_view path) {
  if (!v.is_number()) return wrong_type(path, "a number", v);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0 || d > kMaxNetworkRate)
    return fail("invalid_value", path,
                "must be between 0 (no limit) and 1000000, found " + json_text(v));
  return d;
}

// Checks each rule of a request with the policy's own parser, so that the
// error names the entry ("network.allow[2]").
Status check_rules(const std::vector<std::string>& rules, const std::string& path, bool deny) {
  for (std::size_t i = 0; i < rules.size(); ++i) {
    auto rule = net::parse_rule(rules[i], deny);
    if (!rule) return fail("invalid_value", index_path(path, i), rule.error().message);
  }
  return ok();
}

Result<NetworkSpec> read_network_object(const Json& v, const std::string& path, const Ctx& ctx) {
  auto obj = open_object(v, path, ctx,
                         {"mode", "default", "template", "allow", "deny", "remove", "allow_domains",
                          "dns_servers", "timeout", "rate", "gateway"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  NetworkSpec n;
  const bool request = &ctx == &kRequest;
  // The design source's form (its section 8.1): `default: deny` with
  // `allow_domains`, or `default: allow` for everything public.
  std::optional<bool> default_allow;
  if (const Json* d = obj->get("default")) {
    auto text = read_string(*d, obj->at("default"), ctx, "\"deny\" or \"allow\"");
    if (!text) return tl::unexpected<Error>(text.error());
    if (*text != "deny" && *text != "allow")
      return fail("invalid_value", obj->at("default"),
                  quote_for_message(*text) + " is not a default: use \"deny\" or \"allow\"");
    default_allow = *text == "allow";
    if (const Json* m = obj->get("mode");
        m != nullptr && m->is_string() && (m->get<std::string>() == "open") != *default_allow)
      return fail("invalid_value", obj->at("mode"),
                  "mode " + quote_for_message(m->get<std::string>()) + " contradicts default " +
                      quote_for_message(*text) + ": give only one of them");
    if (*default_allow && obj->get("allow_domains") != nullptr &&
        !obj->get("allow_domains")->empty())
      return fail("invalid_value", obj->at("allow_domains"),
                  "lists domains, but default \"allow\" reaches every public domain: use "
                  "default \"deny\" to allow only these");
  }
  if (const Json* mode = obj->get("mode")) {
    auto m =
        read_string(*mode, obj->at("mode"), ctx, "a string (\"none\", \"allowlist\", \"open\")");
    if (!m) return tl::unexpected<Error>(m.error());
    // "" is what GET shows for a policy given by its rules alone: sent back,
    // it means the same.
    if (*m != "none" && *m != "allowlist" && *m != "open" && !m->empty())
      return fail("invalid_value", obj->at("mode"),
                  quote_for_message(*m) +
                      " is not a network mode: use \"none\" (loopback only), "
                      "\"allowlist\" or \"open\"");
    n.mode = *m;
  } else if (default_allow && *default_allow) {
    n.mode = "open";
  } else if (obj->get("allow") != nullptr || obj->get("template") != nullptr ||
             obj->get("allow_domains") != nullptr || obj->get("gateway") != nullptr) {
    n.mode = "";  // what the rules, template or gateway say (resolve_policy)
  }
  auto list = [&](std::string_view key, std::vector<std::string>& out) -> Status {
    const Json* l = obj->get(key);
    if (l == nullptr) return ok();
    auto items = read_string_list(*l, obj->at(key), ctx, kMaxNetworkRules, true);
    if (!items) return tl::unexpected<Error>(items.error());
    out = std::move(*items);
    return ok();
  };
  CORRAL_TRY(read_into(*obj, "template", n.template_name, any_string(ctx)));
  CORRAL_TRY(list("allow", n.allow));
  CORRAL_TRY(list("deny", n.deny));
  CORRAL_TRY(list("remove", n.remove));
  CORRAL_TRY(list("allow_domains", n.allow_domains));
  CORRAL_TRY(list("dns_servers", n.dns_servers));
  CORRAL_TRY(list("gateway", n.gateway));
  if (request) {
    CORRAL_TRY(check_rules(n.allow, obj->at("allow"), false));
    CORRAL_TRY(check_rules(n.deny, obj->at("deny"), true));
    CORRAL_TRY(check_rules(n.remove, obj->at("remove"), false));
  }
  if (const Json* t = obj->get("timeout")) {
    auto ms = read_duration_ms(*t, obj->at("timeout"), ctx, 1, kMaxNetworkTimeoutMs);
    if (!ms) return tl::unexpected<Error>(ms.error());
    n.timeout_ms = *ms;
  }
  if (const Json* r = obj->get("rate")) {
    auto rate = open_object(*r, obj->at("rate"), ctx, {"per_second", "burst"});
    if (!rate) return tl::unexpected<Error>(rate.error());
    if (rate->get("per_second") == nullptr)
      return fail("invalid_value", rate->at("per_second"),
                  "is missing: new connections per second (0: no limit)");
    CORRAL_TRY(read_into(*rate, "per_second", n.rate_per_second, read_rate_number));
    // Without a burst: twice the rate (at least 1), as the CLI's --network-rate.
    n.rate_burst = n.rate_per_second > 0 ? std::max(1.0, 2 * n.rate_per_second) : 0;
    CORRAL_TRY(read_into(*rate, "burst", n.rate_burst, read_rate_number));
  }
  return n;
}

// ---- secrets ---------------------------------------------------------------------

// Shapes only: the rules (tiers, modes, hosts, the store's keys) are the
// secrets layer's (secrets/secret_spec.h), checked by the daemon. No value
// ever passes here: a spec names secrets, the store holds them.
constexpr std::size_t kMaxSecrets = 32;
constexpr std::size_t kMaxSecretHosts = 64;

Json secrets_json(const std::vector<SecretSpec>& secrets) {
  Json list = Json::array();
  for (const auto& sp : secrets) {
    Json j = Json::object();
    j["name"] = sp.name;
    if (!sp.key.empty()) j["key"] = sp.key;
    if (!sp.mode.empty()) j["mode"] = sp.mode;
    if (!sp.tier.empty()) j["tier"] = sp.tier;
    if (!sp.env_var.empty()) j["env_var"] = sp.env_var;
    if (!sp.path.empty()) j["path"] = sp.path;
    if (!sp.hosts.empty()) {
      Json hosts = Json::array();
      for (const auto& h : sp.hosts) {
        Json hj = Json::object();
        hj["host"] = h.host;
        hj["port"] = h.port;
        hj["intercept"] = h.intercept;
        hosts.push_back(std::move(hj));
      }
      j["hosts"] = std::move(hosts);
    }
    if (sp.ttl_ms > 0) j["ttl"] = duration_json(sp.ttl_ms);
    list.push_back(std::move(j));
  }
  return list;
}

std::optional<std::uint16_t> parse_port_text(std::string_view text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535)
    return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// "host" or "host:port" (port 443 by default), or an object
// {"host", "port", "intercept"}.
Result<SecretHostSpec> read_secret_host(const Json& v, const std::string& path, const Ctx& ctx) {
  SecretHostSpec h;
  if (v.is_string()) {
    std::string text = v.get<std::string>();
    auto colon = text.rfind(':');
    if (colon != std::string::npos) {
      auto port = parse_port_text(std::string_view(text).substr(colon + 1));
      if (!port)
        return fail("invalid_value", path,
                    quote_for_message(text) + " has no valid port after ':' (1-65535)");
      h.port = *port;
      text.resize(colon);
    }
    h.host = std::move(text);
  } else {
    auto obj = open_object(v, path, ctx, {"host", "port", "intercept"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    if (obj->get("host") == nullptr)
      return fail("invalid_value", obj->at("host"), "is missing: the host the token may go to");
    CORRAL_TRY(read_into(*obj, "host", h.host, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "port", h.port, [](const Json& j, std::string_view p) {
      return read_uint(j, p, 1, 65535);
    }));
    CORRAL_TRY(read_into(*obj, "intercept", h.intercept, any_bool()));
  }
  if (h.host.empty()) return fail("invalid_value", path, "names no host");
  return h;
}

Result<std::vector<SecretSpec>> read_secrets(const Json& v, const std::string& path,
                                             const Ctx& ctx) {
  if (!v.is_array()) return wrong_type(path, "an array of secrets", v);
  if (v.size() > kMaxSecrets)
    return fail("invalid_value", path,
                "lists " + std::to_string(v.size()) + " secrets; at most " +
                    std::to_string(kMaxSecrets) + " (one per external service)");
  std::vector<SecretSpec> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string at = index_path(path, i);
    auto obj = open_object(v[i], at, ctx,
                           {"name", "key", "mode", "tier", "env_var", "path", "hosts", "ttl"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    SecretSpec sp;
    if (obj->get("name") == nullptr)
      return fail("invalid_value", obj->at("name"), "is missing: every secret needs a name");
    CORRAL_TRY(read_into(*obj, "name", sp.name, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "key", sp.key, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "mode", sp.mode, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "tier", sp.tier, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "env_var", sp.env_var, any_string(ctx)));
    CORRAL_TRY(read_into(*obj, "path", sp.path, any_string(ctx)));
    if (const Json* hv = obj->get("hosts")) {
      const std::string hpath = obj->at("hosts");
      if (!hv->is_array()) return wrong_type(hpath, "an array of hosts", *hv);
      if (hv->size() > kMaxSecretHosts)
        return fail("invalid_value", hpath,
                    "lists more than " + std::to_string(kMaxSecretHosts) + " hosts");
      for (std::size_t k = 0; k < hv->size(); ++k) {
        auto h = read_secret_host((*hv)[k], index_path(hpath, k), ctx);
        if (!h) return tl::unexpected<Error>(h.error());
        sp.hosts.push_back(std::move(*h));
      }
    }
    if (const Json* t = obj->get("ttl")) {
      auto ms = read_duration_ms(*t, obj->at("ttl"), ctx, kSecondMs, kMaxLifetimeMs);
      if (!ms) return tl::unexpected<Error>(ms.error());
      sp.ttl_ms = *ms;
    }
    out.push_back(std::move(sp));
  }
  return out;
}

Json spec_json(const SandboxSpec& s) {
  Json j = Json::object();
  j["image"] = s.image;
  j["argv"] = strings_json(s.argv);
  Json limits = Json::object();
  limits["memory_bytes"] = s.limits.memory_bytes;
  limits["cpus"] = s.limits.cpus;
  limits["pids"] = s.limits.pids;
  limits["disk_bytes"] = s.limits.disk_bytes;
  limits["inodes"] = s.limits.inodes;
  limits["timeout_ms"] = s.limits.timeout.count();
  limits["max_lifetime_ms"] = s.limits.max_lifetime.count();
  j["limits"] = std::move(limits);
  j["env"] = env_json(s.env);
  Json mounts = Json::array();
  for (const auto& m : s.mounts) {
    Json mj = Json::object();
    mj["source"] = m.source;
    mj["target"] = m.target;
    mj["writable"] = m.writable;
    mounts.push_back(std::move(mj));
  }
  j["mounts"] = std::move(mounts);
  j["workdir"] = s.workdir;
  j["hostname"] = s.hostname;
  j["root"] = s.root;
  j["network"] = network_json(s.network);
  j["secrets"] = secrets_json(s.secrets);
  if (s.expected_duration_ms > 0) j["expected_duration_ms"] = s.expected_duration_ms;
  return j;
}

// The stored form: every field typed, missing ones default. Values are not
// range-checked beyond their C++ types (the request parser did that when
// the spec came through the API).
Result<SandboxSpec> read_spec(const Json& v, std::string path, const Ctx& ctx) {
  auto obj = open_object(v, std::move(path), ctx,
                         {"image", "argv", "limits", "env", "mounts", "workdir", "hostname", "root",
                          "network", "secrets", "expected_duration_ms"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  SandboxSpec s;
  CORRAL_TRY(read_into(*obj, "image", s.image, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "argv", s.argv, [&](const Json& j, std::string_view p) {
    return read_string_list(j, p, ctx, kMaxArgv, false);
  }));
  if (const Json* lv = obj->get("limits")) {
    auto limits = open_object(
        *lv, obj->at("limits"), ctx,
        {"memory_bytes", "cpus", "pids", "disk_bytes", "inodes", "timeout_ms", "max_lifetime_ms"});
    if (!limits) return tl::unexpected<Error>(limits.error());
    Limits& l = s.limits;
    CORRAL_TRY(read_into(*limits, "memory_bytes", l.memory_bytes, any_u64()));
    CORRAL_TRY(
        read_into(*limits, "cpus", l.cpus, [](const Json& j, std::string_view p) -> Result<double> {
          if (!j.is_number()) return wrong_type(p, "a number", j);
          double d = j.get<double>();
          if (!std::isfinite(d) || !(d > 0.0)) {
            return fail("invalid_value", p, "must be more than 0, found " + json_text(j));
          }
          return d;
        }));
    CORRAL_TRY(read_into(*limits, "pids", l.pids, [](const Json& j, std::string_view p) {
      return read_uint(j, p, 0, std::numeric_limits<std::uint32_t>::max());
    }));
    CORRAL_TRY(read_into(*limits, "disk_bytes", l.disk_bytes, any_u64()));
    CORRAL_TRY(read_into(*limits, "inodes", l.inodes, any_u64()));
    auto ms = [](const Json& j, std::string_view p) -> Result<std::chrono::milliseconds> {
      auto n = read_int(j, p, 0, std::numeric_limits<std::int64_t>::max());
      if (!n) return tl::unexpected<Error>(n.error());
      return std::chrono::milliseconds(*n);
    };
    CORRAL_TRY(read_into(*limits, "timeout_ms", l.timeout, ms));
    CORRAL_TRY(read_into(*limits, "max_lifetime_ms", l.max_lifetime, ms));
  }
  CORRAL_TRY(read_into(*obj, "env", s.env,
                       [&](const Json& j, std::string_view p) { return read_env(j, p, ctx); }));
  if (const Json* mv = obj->get("mounts")) {
    std::string mpath = obj->at("mounts");
    if (!mv->is_array()) return wrong_type(mpath, "an array of mounts", *mv);
    for (std::size_t i = 0; i < mv->size(); ++i) {
      auto m = open_object((*mv)[i], index_path(mpath, i), ctx, {"source", "target", "writable"});
      if (!m) return tl::unexpected<Error>(m.error());
      MountSpec mount;
      CORRAL_TRY(read_into(*m, "source", mount.source, any_string(ctx)));
      CORRAL_TRY(read_into(*m, "target", mount.target, any_string(ctx)));
      CORRAL_TRY(read_into(*m, "writable", mount.writable, any_bool()));
      s.mounts.push_back(std::move(mount));
    }
  }
  CORRAL_TRY(read_into(*obj, "workdir", s.workdir, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "hostname", s.hostname, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "root", s.root, any_bool()));
  if (const Json* nv = obj->get("network")) {
    auto n = read_network_object(*nv, obj->at("network"), ctx);
    if (!n) return tl::unexpected<Error>(n.error());
    s.network = std::move(*n);
  }
  if (const Json* sv = obj->get("secrets")) {
    auto secrets = read_secrets(*sv, obj->at("secrets"), ctx);
    if (!secrets) return tl::unexpected<Error>(secrets.error());
    s.secrets = std::move(*secrets);
  }
  CORRAL_TRY(read_into(*obj, "expected_duration_ms", s.expected_duration_ms,
                       [](const Json& j, std::string_view p) {
                         return read_int(j, p, 0, std::numeric_limits<std::int64_t>::max());
                       }));
  return s;
}

// ---- the create request ----------------------------------------------------------

bool is_valid_image_name(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto lower_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_digit(name.front())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return lower_digit(c) || c == '.' || c == '_' || c == '-'; });
}

Status read_limits(const Json& v, const std::string& path, Limits& l) {
  const Ctx& ctx = kRequest;
  auto obj = open_object(v, path, ctx, {"memory", "cpus", "pids", "disk", "inodes", "timeout"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  CORRAL_TRY(read_into(*obj, "memory", l.memory_bytes, [&](const Json& j, std::string_view p) {
    return read_size_at_least(j, p, ctx, kMinMemoryBytes);
  }));
  CORRAL_TRY(read_into(*obj, "cpus", l.cpus,
                       [&](const Json& j, std::string_view p) { return read_cpus(j, p, ctx); }));
  CORRAL_TRY(read_into(*obj, "pids", l.pids, [](const Json& j, std::string_view p) {
    return read_uint(j, p, 1, kMaxPids);
  }));
  CORRAL_TRY(read_into(*obj, "disk", l.disk_bytes, [&](const Json& j, std::string_view p) {
    return read_size_at_least(j, p, ctx, kMinDiskBytes);
  }));
  CORRAL_TRY(read_into(*obj, "inodes", l.inodes, [](const Json& j, std::string_view p) {
    return read_uint(j, p, 1, kMaxInodes);
  }));
  CORRAL_TRY(read_into(*obj, "timeout", l.timeout,
                       [&](const Json& j, std::string_view p) -> Result<std::chrono::milliseconds> {
                         auto ms = read_duration_ms(j, p, ctx, 1, kMaxLifetimeMs);
                         if (!ms) return tl::unexpected<Error>(ms.error());
                         return std::chrono::milliseconds(*ms);
                       }));
  return ok();
}

Result<std::vector<MountSpec>> read_mounts(const Json& v, const std::string& path) {
  const Ctx& ctx = kRequest;
  if (!v.is_array()) {
    return wrong_type(path, "an array of {\"source\", \"target\", \"writable\"} objects", v);
  }
  if (v.size() > kMaxMounts) {
    return fail(
        "invalid_value", path,
        "more than " + std::to_string(kMaxMounts) + " mounts (" + std::to_string(v.size()) + ")");
  }
  std::vector<MountSpec> mounts;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string item_path = index_path(path, i);
    auto obj = open_object(v[i], item_path, ctx, {"source", "target", "writable"},
                           "an object {\"source\", \"target\", \"writable\"}");
    if (!obj) return tl::unexpected<Error>(obj.error());
    MountSpec mount;
    const Json* source = obj->get("source");
    const Json* target = obj->get("target");
    if (source == nullptr) {
      return fail("invalid_value", obj->at("source"),
                  "is missing (the host path to mount, such as /srv/data)");
    }
    if (target == nullptr) {
      return fail("invalid_value", obj->at("target"),
                  "is missing (the path inside the sandbox, such as /data)");
    }
    auto src = read_string(*source, obj->at("source"), ctx);
    if (!src) return tl::unexpected<Error>(src.error());
    if (auto st = check_mount_source(*src); !st) return fail_with(obj->at("source"), st.error());
    if (auto st = check_absolute(*src, obj->at("source")); !st) {
      return tl::unexpected<Error>(st.error());
    }
    auto dst = read_string(*target, obj->at("target"), ctx);
    if (!dst) return tl::unexpected<Error>(dst.error());
    auto normalized = normalize_mount_target(*dst);
    if (!normalized) return fail_with(obj->at("target"), normalized.error());
    CORRAL_TRY(read_into(*obj, "writable", mount.writable, any_bool()));
    mount.source = std::move(*src);
    mount.target = std::move(*normalized);
    for (const MountSpec& earlier : mounts) {
      if (earlier.target == mount.target) {
        return fail("invalid_value", obj->at("target"),
                    "a second mount on " + quote_for_message(mount.target));
      }
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

Result<CreateSandboxRequest> parse_create(std::string_view body, const SandboxSpec* base) {
  const Ctx& ctx = kRequest;
  auto doc = parse_json(body, ctx);
  if (!doc) return tl::unexpected<Error>(doc.error());
  auto obj = open_object(*doc, "", ctx,
                         {"image", "limits", "max_lifetime", "env", "mounts", "workdir", "hostname",
                          "root", "network", "secrets", "expected_duration"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  CreateSandboxRequest request;
  if (base != nullptr) request.spec = *base;
  SandboxSpec& s = request.spec;
  if (const Json* image = obj->get("image")) {
    auto name = read_string(*image, obj->at("image"), ctx);
    if (!name) return tl::unexpected<Error>(name.error());
    if (!is_valid_image_name(*name)) {
      return fail("invalid_value", obj->at("image"),
                  quote_for_message(*name) +
                      " is not an image name ([a-z0-9][a-z0-9._-]{0,62}); omit \"image\" for "
                      "the host base");
    }
    s.image = std::move(*name);
  }
  if (const Json* limits = obj->get("limits"))
    CORRAL_TRY(read_limits(*limits, obj->at("limits"), s.limits));
  CORRAL_TRY(read_into(*obj, "max_lifetime", s.limits.max_lifetime,
                       [&](const Json& j, std::string_view p) -> Result<std::chrono::milliseconds> {
                         auto ms = read_duration_ms(j, p, ctx, kSecondMs, kMaxLifetimeMs);
                         if (!ms) return tl::unexpected<Error>(ms.error());
                         return std::chrono::milliseconds(*ms);
                       }));
  // env goes on top of the defaults' env instead of replacing it.
  if (const Json* env = obj->get("env")) {
    auto body_env = read_env(*env, obj->at("env"), ctx, &request.env_unset);
    if (!body_env) return tl::unexpected<Error>(body_env.error());
    CORRAL_TRY(merge_env(s.env, std::move(*body_env), request.env_unset, obj->at("env")));
  }
  if (const Json* mounts = obj->get("mounts")) {
    auto m = read_mounts(*mounts, obj->at("mounts"));
    if (!m) return tl::unexpected<Error>(m.error());
    s.mounts = std::move(*m);
  }
  if (const Json* workdir = obj->get("workdir")) {
    auto dir = read_string(*workdir, obj->at("workdir"), ctx);
    if (!dir) return tl::unexpected<Error>(dir.error());
    CORRAL_TRY(check_absolute(*dir, obj->at("workdir")));
    s.workdir = std::move(*dir);
  }
  if (const Json* hostname = obj->get("hostname")) {
    auto name = read_string(*hostname, obj->at("hostname"), ctx);
    if (!name) return tl::unexpected<Error>(name.error());
    if (!is_valid_hostname(*name)) {
      return fail("invalid_value", obj->at("hostname"),
                  quote_for_message(*name) +
                      " is not a valid hostname (letters, digits, '-' and '.', labels not "
                      "starting or ending with '-', at most 64 bytes)");
    }
    s.hostname = std::move(*name);
  }
  CORRAL_TRY(read_into(*obj, "root", s.root, any_bool()));
  // A network object replaces the defaults' network as a whole.
  if (const Json* network = obj->get("network")) {
    auto n = read_network_object(*network, obj->at("network"), ctx);
    if (!n) return tl::unexpected<Error>(n.error());
    s.network = std::move(*n);
  }
  if (const Json* secrets = obj->get("secrets")) {
    auto list = read_secrets(*secrets, obj->at("secrets"), ctx);
    if (!list) return tl::unexpected<Error>(list.error());
    s.secrets = std::move(*list);
  }
  if (const Json* d = obj->get("expected_duration")) {
    auto ms = read_duration_ms(*d, obj->at("expected_duration"), ctx, kSecondMs, kMaxLifetimeMs);
    if (!ms) return tl::unexpected<Error>(ms.error());
    s.expected_duration_ms = *ms;
  }
  return request;
}

// ---- exec ----------------------------------------------------------------------

Result<ExecRequest> parse_exec_request(std::string_view body) {
  const Ctx& ctx = kRequest;
  auto doc = parse_json(body, ctx);
  if (!doc) return tl::unexpected<Error>(doc.error());
  auto obj = open_object(
      *doc, "", ctx,
      {"argv", "cmd", "env", "cwd", "stdin", "stdin_b64", "timeout", "max_output_bytes", "stream"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  ExecRequest request;
  const Json* argv = obj->get("argv");
  const Json* cmd = obj->get("cmd");
  if (argv != nullptr && cmd != nullptr) {
    return fail("invalid_value", "argv",
                "give either \"argv\" (a list of arguments) or \"cmd\" (a shell command line), "
                "not both");
  }
  if (argv == nullptr && cmd == nullptr) {
    return fail("invalid_value", "argv",
                "no command: give \"argv\" (a list of arguments, such as [\"python3\", "
                "\"x.py\"]) or \"cmd\" (a shell command line, run by /bin/sh -c)");
  }
  if (argv != nullptr) {
    auto list = read_string_list(*argv, "argv", ctx, kMaxArgv, true);
    if (!list) return tl::unexpected<Error>(list.error());
    if (list->empty()) {
      return fail("invalid_value", "argv", "is empty: it needs at least the program to run");
    }
    if (list->front().empty()) {
      return fail("invalid_value", "argv[0]", "is empty: it is the program to run");
    }
    request.argv = std::move(*list);
  } else {
    auto line = read_c_string(*cmd, "cmd", ctx);
    if (!line) return tl::unexpected<Error>(line.error());
    if (line->empty()) return fail("invalid_value", "cmd", "is empty");
    request.argv = {"/bin/sh", "-c", *line};
    request.cmd = std::move(*line);
  }
  CORRAL_TRY(read_into(*obj, "env", request.env,
                       [&](const Json& j, std::string_view p) { return read_env(j, p, ctx); }));
  if (const Json* cwd = obj->get("cwd")) {
    auto dir = read_string(*cwd, "cwd", ctx);
    if (!dir) return tl::unexpected<Error>(dir.error());
    CORRAL_TRY(check_absolute(*dir, "cwd"));
    request.cwd = std::move(*dir);
  }
  auto stdin_data = read_bytes(*obj, "stdin", kMaxStdinBytes);
  if (!stdin_data) return tl::unexpected<Error>(stdin_data.error());
  if (*stdin_data) request.stdin_data = std::move(**stdin_data);
  if (const Json* timeout = obj->get("timeout")) {
    auto ms = read_duration_ms(*timeout, "timeout", ctx, 1, kMaxLifetimeMs);
    if (!ms) return tl::unexpected<Error>(ms.error());
    request.timeout_ms = *ms;
  }
  if (const Json* max = obj->get("max_output_bytes")) {
    if (max->is_string()) {
      auto size = read_size(*max, "max_output_bytes", ctx);
      if (!size) return tl::unexpected<Error>(size.error());
      if (*size > kMaxOutputBytes) {
        return fail("invalid_value", "max_output_bytes",
                    "must be at most 64Mi, found " + format_size(*size));
      }
      request.max_output_bytes = *size;
    } else {
      auto n = read_uint(*max, "max_output_bytes", 0, kMaxOutputBytes,
                         "bytes as an integer (1048576) or a size string (\"1Mi\")");
      if (!n) return tl::unexpected<Error>(n.error());
      request.max_output_bytes = *n;
    }
  }
  if (const Json* stream = obj->get("stream")) {
    auto s = read_string(*stream, "stream", ctx, "\"ndjson\" or \"sse\"");
    if (!s) return tl::unexpected<Error>(s.error());
    if (*s != "ndjson" && *s != "sse") {
      return fail("invalid_value", "stream",
                  quote_for_message(*s) +
                      " is not a stream format: use \"ndjson\" or \"sse\" "
                      "(omit it to wait for the result)");
    }
    request.stream = std::move(*s);
  }
  return request;
}

void put_result_fields(Json& j, const ExecResult& r, bool with_outputs) {
  j["exit_code"] = nullable(r.exit_code);
  j["signal"] = nullable(r.signal);
  j["timed_out"] = r.timed_out;
  if (with_outputs) {
    put_bytes(j, "stdout", r.stdout_data);
    put_bytes(j, "stderr", r.stderr_data);
  }
  j["stdout_truncated"] = r.stdout_truncated;
  j["stderr_truncated"] = r.stderr_truncated;
  j["duration_ms"] = r.duration_ms;
  j["process_id"] = r.process_id;
}

Status read_result_fields(const Obj& obj, ExecResult& r, bool with_outputs) {
  CORRAL_TRY(read_optional_int(obj, "exit_code", r.exit_code));
  CORRAL_TRY(read_optional_int(obj, "signal", r.signal));
  CORRAL_TRY(read_into(obj, "timed_out", r.timed_out, any_bool()));
  if (with_outputs) {
    auto out = read_bytes(obj, "stdout", std::numeric_limits<std::size_t>::max());
    if (!out) return tl::unexpected<Error>(out.error());
    if (*out) r.stdout_data = std::move(**out);
    auto err = read_bytes(obj, "stderr", std::numeric_limits<std::size_t>::max());
    if (!err) return tl::unexpected<Error>(err.error());
    if (*err) r.stderr_data = std::move(**err);
  }
  CORRAL_TRY(read_into(obj, "stdout_truncated", r.stdout_truncated, any_bool()));
  CORRAL_TRY(read_into(obj, "stderr_truncated", r.stderr_truncated, any_bool()));
  CORRAL_TRY(read_into(obj, "duration_ms", r.duration_ms, any_i64()));
  CORRAL_TRY(read_into(obj, "process_id", r.process_id, any_string(obj.ctx())));
  return ok();
}

// ---- the rest of the responses -------------------------------------------------

Json usage_json(const SandboxUsage& u) {
  Json j = Json::object();
  j["memory_bytes"] = u.memory_bytes;
  j["memory_peak_bytes"] = u.memory_peak_bytes;
  j["cpu_ms"] = u.cpu_ms;
  j["pids"] = u.pids;
  j["disk_bytes"] = u.disk_bytes;
  j["disk_inodes"] = u.disk_inodes;
  j["oom_kills"] = u.oom_kills;
  j["pids_max_hits"] = u.pids_max_hits;
  return j;
}

Json sandbox_info_json(const SandboxInfo& info) {
  Json j = Json::object();
  j["id"] = info.id;
  j["state"] = info.state;
  j["spec"] = spec_json(info.spec);
  j["usage"] = info.usage ? usage_json(*info.usage) : Json(nullptr);
  j["created_at_ms"] = info.created_at_ms;
  j["updated_at_ms"] = info.updated_at_ms;
  j["expires_at_ms"] = nullable(info.expires_at_ms);
  j["error"] = nullable(info.error);
  j["residue"] = strings_json(info.residue);
  j["residue_bytes"] = info.residue_bytes;
  if (info.network) {
    const NetworkStatus& n = *info.network;
    Json nj = Json::object();
    nj["address"] = n.address;
    nj["host_address"] = n.host_address;
    nj["mode"] = n.mode;
    nj["template"] = n.template_name;
    nj["allow"] = strings_json(n.allow);
    nj["deny"] = strings_json(n.deny);
    nj["gateway"] = strings_json(n.gateway);
    j["network"] = std::move(nj);
  } else {
    j["network"] = nullptr;
  }
  return j;
}

Result<SandboxInfo> read_sandbox_info(const Json& v, std::string path, const Ctx& ctx) {
  auto obj = open_object(v, std::move(path), ctx,
                         {"id", "state", "spec", "usage", "created_at_ms", "updated_at_ms",
                          "expires_at_ms", "error", "residue", "residue_bytes", "network"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  SandboxInfo info;
  if (obj->get("id") == nullptr) return fail("invalid_value", obj->at("id"), "is missing");
  CORRAL_TRY(read_into(*obj, "id", info.id, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "state", info.state, any_string(ctx)));
  if (const Json* spec = obj->get("spec")) {
    auto s = read_spec(*spec, obj->at("spec"), ctx);
    if (!s) return tl::unexpected<Error>(s.error());
    info.spec = std::move(*s);
  }
  if (const Json* usage = obj->get("usage"); usage != nullptr && !usage->is_null()) {
    auto u = open_object(*usage, obj->at("usage"), ctx,
                         {"memory_bytes", "memory_peak_bytes", "cpu_ms", "pids", "disk_bytes",
                          "disk_inodes", "oom_kills", "pids_max_hits"});
    if (!u) return tl::unexpected<Error>(u.error());
    SandboxUsage su;
    CORRAL_TRY(read_into(*u, "memory_bytes", su.memory_bytes, any_u64()));
    CORRAL_TRY(read_into(*u, "memory_peak_bytes", su.memory_peak_bytes, any_u64()));
    CORRAL_TRY(read_into(*u, "cpu_ms", su.cpu_ms, any_u64()));
    CORRAL_TRY(read_into(*u, "pids", su.pids, any_u64()));
    CORRAL_TRY(read_into(*u, "disk_bytes", su.disk_bytes, any_u64()));
    CORRAL_TRY(read_into(*u, "disk_inodes", su.disk_inodes, any_u64()));
    CORRAL_TRY(read_into(*u, "oom_kills", su.oom_kills, any_u64()));
    CORRAL_TRY(read_into(*u, "pids_max_hits", su.pids_max_hits, any_u64()));
    info.usage = su;
  }
  if (const Json* nv = obj->get("network"); nv != nullptr && !nv->is_null()) {
    auto n =
        open_object(*nv, obj->at("network"), ctx,
                    {"address", "host_address", "mode", "template", "allow", "deny", "gateway"});
    if (!n) return tl::unexpected<Error>(n.error());
    NetworkStatus ns;
    auto list = [&](const Json& j, std::string_view p) {
      return read_string_list(j, p, ctx, std::numeric_limits<std::size_t>::max(), false);
    };
    CORRAL_TRY(read_into(*n, "address", ns.address, any_string(ctx)));
    CORRAL_TRY(read_into(*n, "host_address", ns.host_address, any_string(ctx)));
    CORRAL_TRY(read_into(*n, "mode", ns.mode, any_string(ctx)));
    CORRAL_TRY(read_into(*n, "template", ns.template_name, any_string(ctx)));
    CORRAL_TRY(read_into(*n, "allow", ns.allow, list));
    CORRAL_TRY(read_into(*n, "deny", ns.deny, list));
    CORRAL_TRY(read_into(*n, "gateway", ns.gateway, list));
    info.network = std::move(ns);
  }
  CORRAL_TRY(read_into(*obj, "created_at_ms", info.created_at_ms, any_i64()));
  CORRAL_TRY(read_into(*obj, "updated_at_ms", info.updated_at_ms, any_i64()));
  CORRAL_TRY(read_optional_i64(*obj, "expires_at_ms", info.expires_at_ms));
  if (const Json* error = obj->get("error"); error != nullptr && !error->is_null()) {
    auto e = read_string(*error, obj->at("error"), ctx);
    if (!e) return tl::unexpected<Error>(e.error());
    info.error = std::move(*e);
  }
  CORRAL_TRY(read_into(*obj, "residue", info.residue, [&](const Json& j, std::string_view p) {
    return read_string_list(j, p, ctx, std::numeric_limits<std::size_t>::max(), false);
  }));
  CORRAL_TRY(read_into(*obj, "residue_bytes", info.residue_bytes, any_u64()));
  return info;
}

Json process_info_json(const ProcessInfo& p) {
  Json j = Json::object();
  j["id"] = p.id;
  j["sandbox_id"] = p.sandbox_id;
  j["argv"] = strings_json(p.argv);
  j["state"] = p.state;
  j["exit_code"] = nullable(p.exit_code);
  j["signal"] = nullable(p.signal);
  j["timed_out"] = p.timed_out;
  j["started_at_ms"] = p.started_at_ms;
  j["ended_at_ms"] = nullable(p.ended_at_ms);
  j["stdout_bytes"] = p.stdout_bytes;
  j["stderr_bytes"] = p.stderr_bytes;
  return j;
}

Result<ProcessInfo> read_process_info(const Json& v, std::string path, const Ctx& ctx) {
  auto obj = open_object(v, std::move(path), ctx,
                         {"id", "sandbox_id", "argv", "state", "exit_code", "signal", "timed_out",
                          "started_at_ms", "ended_at_ms", "stdout_bytes", "stderr_bytes"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  ProcessInfo p;
  if (obj->get("id") == nullptr) return fail("invalid_value", obj->at("id"), "is missing");
  CORRAL_TRY(read_into(*obj, "id", p.id, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "sandbox_id", p.sandbox_id, any_string(ctx)));
  CORRAL_TRY(read_into(*obj, "argv", p.argv, [&](const Json& j, std::string_view pp) {
    return read_string_list(j, pp, ctx, kMaxArgv, false);
  }));
  CORRAL_TRY(read_into(*obj, "state", p.state, any_string(ctx)));
  CORRAL_TRY(read_optional_int(*obj, "exit_code", p.exit_code));
  CORRAL_TRY(read_optional_int(*obj, "signal", p.signal));
  CORRAL_TRY(read_into(*obj, "timed_out", p.timed_out, any_bool()));
  CORRAL_TRY(read_into(*obj, "started_at_ms", p.started_at_ms, any_i64()));
  CORRAL_TRY(read_optional_i64(*obj, "ended_at_ms", p.ended_at_ms));
  CORRAL_TRY(read_into(*obj, "stdout_bytes", p.stdout_bytes, any_u64()));
  CORRAL_TRY(read_into(*obj, "stderr_bytes", p.stderr_bytes, any_u64()));
  return p;
}

Json file_entry_json(const FileEntry& e) {
  Json j = Json::object();
  put_bytes(j, "name", e.name);
  j["type"] = e.type;
  j["size"] = e.size;
  j["mode"] = e.mode;
  j["mtime_ms"] = e.mtime_ms;
  if (!e.link_target.empty()) put_bytes(j, "link_target", e.link_target);
  return j;
}

Result<FileEntry> read_file_entry(const Json& v, std::string path, const Ctx& ctx) {
  auto obj = open_object(
      v, std::move(path), ctx,
      {"name", "name_b64", "type", "size", "mode", "mtime_ms", "link_target", "link_target_b64"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  FileEntry e;
  constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();
  auto name = read_bytes(*obj, "name", kAny);
  if (!name) return tl::unexpected<Error>(name.error());
  if (*name) e.name = std::move(**name);
  CORRAL_TRY(read_into(*obj, "type", e.type, any_string(ctx)));
  if (e.type != "file" && e.type != "directory" && e.type != "symlink" && e.type != "other") {
    return fail("invalid_value", obj->at("type"),
                quote_for_message(e.type) + " is not one of file, directory, symlink, other");
  }
  CORRAL_TRY(read_into(*obj, "size", e.size, any_u64()));
  CORRAL_TRY(read_into(*obj, "mode", e.mode, [](const Json& j, std::string_view p) {
    return read_uint(j, p, 0, std::numeric_limits<std::uint32_t>::max());
  }));
  CORRAL_TRY(read_into(*obj, "mtime_ms", e.mtime_ms, any_i64()));
  auto target = read_bytes(*obj, "link_target", kAny);
  if (!target) return tl::unexpected<Error>(target.error());
  if (*target) e.link_target = std::move(**target);
  return e;
}

// A file API path given as "<key>" or "<key>_b64" (file names are bytes).
Result<std::string> read_file_path(const Obj& obj, std::string_view key) {
  auto bytes = read_bytes(obj, key, kMaxPathBytes);
  if (!bytes) return tl::unexpected<Error>(bytes.error());
  if (!*bytes) {
    return fail("invalid_value", obj.at(key), "is missing (a path inside the sandbox)");
  }
  CORRAL_TRY(check_file_path(**bytes, obj.at(key)));
  return std::move(**bytes);
}

Result<std::uint32_t> read_mode(const Json& v, std::string_view path, const Ctx& ctx) {
  if (v.is_string()) {
    auto text = read_string(v, path, ctx);
    if (!text) return tl::unexpected<Error>(text.error());
    std::string_view digits = *text;
    if (digits.starts_with("0o")) digits.remove_prefix(2);
    bool octal =
        !digits.empty() && digits.size() <= 4 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '7'; });
    std::uint32_t mode = 0;
    for (char c : digits) mode = mode * 8 + static_cast<std::uint32_t>(c - '0');
    if (!octal || mode > kMaxMode) {
      return fail("invalid_value", path,
                  quote_for_message(*text) +
                      " is not a permission mode: give octal digits up to \"0777\" (such as "
                      "\"0755\"), or an integer up to 511");
    }
    return mode;
  }
  auto n = read_uint(v, path, 0, kMaxMode, "an octal string (\"0755\") or an integer (493)");
  if (!n) return tl::unexpected<Error>(n.error());
  return static_cast<std::uint32_t>(*n);
}

std::string mode_string(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0%03o", mode);
  return buf;
}

// ---- signals -----------------------------------------------------------------

struct SignalName {
  std::string_view name;
  int number;
};
constexpr SignalName kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT},   {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},   {"TERM", SIGTERM},
    {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH},
};
constexpr int kMaxSignal = 64;  // SIGRTMAX on Linux

Result<int> parse_signal(std::string_view body) {
  const Ctx& ctx = kRequest;
  auto doc = parse_json(body, ctx);
  if (!doc) return tl::unexpected<Error>(doc.error());
  auto obj = open_object(*doc, "", ctx, {"signal"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  const Json* v = obj->get("signal");
  if (v == nullptr) {
    return fail("invalid_value", "signal", "is missing (such as \"TERM\", \"SIGKILL\" or 15)");
  }
  if (v->is_string()) {
    auto text = read_string(*v, "signal", ctx);
    if (!text) return tl::unexpected<Error>(text.error());
    std::string_view name = *text;
    if (name.starts_with("SIG")) name.remove_prefix(3);
    for (const auto& s : kSignals) {
      if (s.name == name) return s.number;
    }
    std::string known;
    for (const auto& s : kSignals) {
      if (!known.empty()) known.append(", ");
      known.append(s.name);
    }
    return fail("invalid_value", "signal",
                quote_for_message(*text) + " is not a signal name (known: " + known +
                    "; or give the number)");
  }
  auto n = read_uint(*v, "signal", 1, kMaxSignal, "a signal name (\"TERM\") or number (15)");
  if (!n) return tl::unexpected<Error>(n.error());
  return static_cast<int>(*n);
}

// A top-level {"<key>": [...]} list of a response.
template <typename T, typename Reader>
Result<std::vector<T>> read_list(const Json& doc, std::string_view key, const Ctx& ctx,
                                 Reader reader) {
  auto obj = open_object(doc, "", ctx, {key});
  if (!obj) return tl::unexpected<Error>(obj.error());
  std::vector<T> out;
  const Json* list = obj->get(key);
  if (list == nullptr) return fail("invalid_value", key, "is missing");
  if (!list->is_array()) return wrong_type(key, "an array", *list);
  out.reserve(list->size());
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto item = reader((*list)[i], index_path(key, i), ctx);
    if (!item) return tl::unexpected<Error>(item.error());
    out.push_back(std::move(*item));
  }
  return out;
}

}  // namespace

// ---- public: errors ------------------------------------------------------------

const std::vector<ErrorCodeInfo>& error_codes() { return kErrorCodes; }

ApiError make_api_error(std::string_view code, std::string message, std::string field,
                        std::string hint) {
  ApiError e;
  const ErrorCodeInfo* info = find_code(code);
  e.http_status = info != nullptr ? info->http_status : 500;
  e.code = std::string(code);
  e.message = std::move(message);
  e.field = std::move(field);
  e.hint = std::move(hint);
  return e;
}

std::string to_json(const ApiError& error) {
  Json j = Json::object();
  j["error"] = error_body_json(error);
  return dump(j);
}

ApiError parse_api_error(int http_status, std::string_view body) {
  auto parsed = guarded<ApiError>([&]() -> Result<ApiError> {
    auto doc = parse_json(body, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", kResponse, {"error"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    const Json* error = obj->get("error");
    if (error == nullptr) return fail("invalid_value", "error", "is missing");
    return read_error_body(*error, "error", kResponse);
  });
  if (parsed) {
    parsed->http_status = http_status;
    return *parsed;
  }
  std::string message;
  if (body.empty()) {
    message = "HTTP " + std::to_string(http_status) + " with an empty body";
  } else {
    std::size_t n = std::min(body.size(), kMaxRawErrorBytes);
    // Cut at a character boundary so that the message stays UTF-8 when the
    // body was.
    while (n > 0 && n < body.size() && (static_cast<unsigned char>(body[n]) & 0xc0) == 0x80) --n;
    message = std::string(body.substr(0, n));
    if (n < body.size()) message.append("...");
  }
  ApiError e = make_api_error("internal", std::move(message));
  e.http_status = http_status;
  return e;
}

ApiError to_api_error(const Error& error) {
  std::string_view message = error.message;
  std::size_t colon = message.find(": ");
  if (colon != std::string_view::npos) {
    std::string_view code = message.substr(0, colon);
    if (find_code(code) != nullptr) {
      std::string rest(message.substr(colon + 2));
      if (error.code == ErrorCode::kInvalidArgument) {
        // A parse error: the hint is the field path.
        return make_api_error(code, std::move(rest), error.hint);
      }
      return make_api_error(code, std::move(rest), {}, error.hint);
    }
  }
  std::string_view code = "internal";
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
      code = "invalid_value";
      break;
    case ErrorCode::kNotFound:
      code = "not_found";
      break;
    case ErrorCode::kAlreadyExists:
      code = "conflict";
      break;
    case ErrorCode::kPermissionDenied:
      code = "path_escape";
      break;
    case ErrorCode::kResourceExhausted:
      code = "over_capacity";
      break;
    case ErrorCode::kTimeout:
      code = "request_timeout";
      break;
    case ErrorCode::kUnavailable:
      code = "unavailable";
      break;
    case ErrorCode::kSystem:
    case ErrorCode::kInternal:
      code = "internal";
      break;
  }
  return make_api_error(code, error.message, {}, error.hint);
}

// ---- public: sandboxes -----------------------------------------------------------

Result<CreateSandboxRequest> parse_create_sandbox(std::string_view body) {
  return guarded<CreateSandboxRequest>([&] { return parse_create(body, nullptr); });
}

Result<CreateSandboxRequest> parse_create_sandbox_over(std::string_view body,
                                                       const SandboxSpec& defaults) {
  return guarded<CreateSandboxRequest>([&] { return parse_create(body, &defaults); });
}

std::string to_json(const CreateSandboxRequest& request) {
  const SandboxSpec& s = request.spec;
  Json j = Json::object();
  if (!s.image.empty()) j["image"] = s.image;
  Json limits = Json::object();
  limits["memory"] = s.limits.memory_bytes;
  limits["cpus"] = s.limits.cpus;
  limits["pids"] = s.limits.pids;
  limits["disk"] = s.limits.disk_bytes;
  if (s.limits.inodes != 0) limits["inodes"] = s.limits.inodes;
  limits["timeout"] = duration_json(s.limits.timeout.count());
  j["limits"] = std::move(limits);
  j["max_lifetime"] = duration_json(s.limits.max_lifetime.count());
  Json env = env_json(s.env);
  if (!request.env_unset.empty()) {
    std::unordered_set<std::string_view> set;  // a name set in spec.env wins
    for (const auto& var : s.env) set.insert(var.first);
    for (const auto& name : request.env_unset) {
      if (set.insert(name).second) env[name] = nullptr;
    }
  }
  j["env"] = std::move(env);
  Json mounts = Json::array();
  for (const auto& m : s.mounts) {
    Json mj = Json::object();
    mj["source"] = m.source;
    mj["target"] = m.target;
    mj["writable"] = m.writable;
    mounts.push_back(std::move(mj));
  }
  j["mounts"] = std::move(mounts);
  j["workdir"] = s.workdir;
  j["hostname"] = s.hostname;
  j["root"] = s.root;
  j["network"] = network_json(s.network);
  if (!s.secrets.empty()) j["secrets"] = secrets_json(s.secrets);
  if (s.expected_duration_ms > 0) j["expected_duration"] = duration_json(s.expected_duration_ms);
  return dump(j);
}

std::string spec_to_json(const SandboxSpec& spec) { return dump(spec_json(spec)); }

Result<SandboxSpec> spec_from_json(std::string_view json) {
  return guarded<SandboxSpec>([&]() -> Result<SandboxSpec> {
    auto doc = parse_json(json, kStored);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_spec(*doc, "", kStored);
  });
}

std::string to_json(const SandboxInfo& info) { return dump(sandbox_info_json(info)); }

Result<SandboxInfo> parse_sandbox_info(std::string_view body) {
  return guarded<SandboxInfo>([&]() -> Result<SandboxInfo> {
    auto doc = parse_json(body, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_sandbox_info(*doc, "", kResponse);
  });
}

std::string to_json(const std::vector<SandboxInfo>& list) {
  Json items = Json::array();
  for (const auto& info : list) items.push_back(sandbox_info_json(info));
  Json j = Json::object();
  j["sandboxes"] = std::move(items);
  return dump(j);
}

Result<std::vector<SandboxInfo>> parse_sandbox_list(std::string_view body) {
  return guarded<std::vector<SandboxInfo>>([&]() -> Result<std::vector<SandboxInfo>> {
    auto doc = parse_json(body, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_list<SandboxInfo>(*doc, "sandboxes", kResponse, read_sandbox_info);
  });
}

Result<ExtendRequest> parse_extend(std::string_view body) {
  return guarded<ExtendRequest>([&]() -> Result<ExtendRequest> {
    const Ctx& ctx = kRequest;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"max_lifetime", "extend_by"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    const Json* lifetime = obj->get("max_lifetime");
    const Json* extend = obj->get("extend_by");
    if ((lifetime == nullptr) == (extend == nullptr)) {
      return fail("invalid_value", lifetime != nullptr ? "max_lifetime" : "",
                  std::string(lifetime != nullptr ? "give" : "no change given: give") +
                      " exactly one of \"max_lifetime\" (the new lifetime, counted from now) "
                      "and \"extend_by\" (added to the current expiry)");
    }
    ExtendRequest request;
    if (lifetime != nullptr) {
      auto ms = read_duration_ms(*lifetime, "max_lifetime", ctx, kSecondMs, kMaxLifetimeMs);
      if (!ms) return tl::unexpected<Error>(ms.error());
      request.max_lifetime_ms = *ms;
    } else {
      auto ms = read_duration_ms(*extend, "extend_by", ctx, kSecondMs, kMaxLifetimeMs);
      if (!ms) return tl::unexpected<Error>(ms.error());
      request.extend_by_ms = *ms;
    }
    return request;
  });
}

Result<NetworkSpec> parse_network_update(std::string_view body) {
  return guarded<NetworkSpec>([&]() -> Result<NetworkSpec> {
    auto doc = parse_json(body, kRequest);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_network_object(*doc, "", kRequest);
  });
}

Result<NetworkSpec> network_from_json(std::string_view json) {
  return guarded<NetworkSpec>([&]() -> Result<NetworkSpec> {
    auto doc = parse_json(json, kStored);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_network_object(*doc, "", kStored);
  });
}

std::string to_json(const NetworkSpec& network) { return dump(network_json(network)); }

std::string to_json(const ExtendRequest& request) {
  Json j = Json::object();
  if (request.max_lifetime_ms) j["max_lifetime"] = duration_json(*request.max_lifetime_ms);
  if (request.extend_by_ms) j["extend_by"] = duration_json(*request.extend_by_ms);
  return dump(j);
}

// ---- public: exec and processes ----------------------------------------------------

Result<ExecRequest> parse_exec(std::string_view body) {
  return guarded<ExecRequest>([&] { return parse_exec_request(body); });
}

std::string to_json(const ExecRequest& request) {
  Json j = Json::object();
  if (request.cmd) {
    j["cmd"] = *request.cmd;
  } else {
    j["argv"] = strings_json(request.argv);
  }
  if (!request.env.empty()) j["env"] = env_json(request.env);
  if (request.cwd) j["cwd"] = *request.cwd;
  if (!request.stdin_data.empty()) put_bytes(j, "stdin", request.stdin_data);
  if (request.timeout_ms) j["timeout"] = duration_json(*request.timeout_ms);
  j["max_output_bytes"] = request.max_output_bytes;
  if (!request.stream.empty()) j["stream"] = request.stream;
  return dump(j);
}

std::string to_json(const ExecResult& result) {
  Json j = Json::object();
  put_result_fields(j, result, true);
  return dump(j);
}

Result<ExecResult> parse_exec_result(std::string_view body) {
  return guarded<ExecResult>([&]() -> Result<ExecResult> {
    auto doc = parse_json(body, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(
        *doc, "", kResponse,
        {"exit_code", "signal", "timed_out", "stdout", "stdout_b64", "stderr", "stderr_b64",
         "stdout_truncated", "stderr_truncated", "duration_ms", "process_id"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    ExecResult result;
    CORRAL_TRY(read_result_fields(*obj, result, true));
    return result;
  });
}

// {"type":"stdout","data":"..."} as put_bytes and dump() would write it
// (text when UTF-8, else data_b64), built without a json value: see
// json_string.h. The unit tests hold it to dump()'s output.
std::string exec_output_json(ExecEvent::Kind kind, std::string_view data) {
  std::string line = kind == ExecEvent::kStdout ? R"({"type":"stdout",)" : R"({"type":"stderr",)";
  if (is_valid_utf8(data)) {
    line += R"("data":)";
    append_json_string(line, data);
  } else {
    line += R"("data_b64":")";
    line += base64_encode(data);  // nothing in the alphabet needs escaping
    line += '"';
  }
  line += '}';
  return line;
}

std::string to_json(const ExecEvent& event) {
  Json j = Json::object();
  switch (event.kind) {
    case ExecEvent::kStdout:
    case ExecEvent::kStderr:
      return exec_output_json(event.kind, event.data);
    case ExecEvent::kExit:
      j["type"] = "exit";
      put_result_fields(j, event.result, false);
      break;
    case ExecEvent::kError:
      j["type"] = "error";
      j["error"] = error_body_json(event.error);
      break;
  }
  return dump(j);
}

Result<ExecEvent> parse_exec_event(std::string_view line) {
  return guarded<ExecEvent>([&]() -> Result<ExecEvent> {
    const Ctx& ctx = kResponse;
    auto doc = parse_json(line, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    // Responses ignore unknown fields, so one list serves every type.
    auto obj =
        open_object(*doc, "", ctx,
                    {"type", "data", "data_b64", "exit_code", "signal", "timed_out",
                     "stdout_truncated", "stderr_truncated", "duration_ms", "process_id", "error"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    const Json* type = obj->get("type");
    if (type == nullptr) {
      return fail("invalid_value", "type", "is missing (stdout, stderr, exit or error)");
    }
    auto kind = read_string(*type, "type", ctx, "a string (stdout, stderr, exit or error)");
    if (!kind) return tl::unexpected<Error>(kind.error());
    ExecEvent event;
    if (*kind == "stdout" || *kind == "stderr") {
      event.kind = *kind == "stdout" ? ExecEvent::kStdout : ExecEvent::kStderr;
      auto data = read_bytes(*obj, "data", std::numeric_limits<std::size_t>::max());
      if (!data) return tl::unexpected<Error>(data.error());
      if (!*data) return fail("invalid_value", "data", "is missing (or \"data_b64\")");
      event.data = std::move(**data);
    } else if (*kind == "exit") {
      event.kind = ExecEvent::kExit;
      CORRAL_TRY(read_result_fields(*obj, event.result, false));
    } else if (*kind == "error") {
      event.kind = ExecEvent::kError;
      const Json* error = obj->get("error");
      if (error == nullptr) return fail("invalid_value", "error", "is missing");
      auto e = read_error_body(*error, "error", ctx);
      if (!e) return tl::unexpected<Error>(e.error());
      event.error = std::move(*e);
    } else {
      return fail("invalid_value", "type",
                  quote_for_message(*kind) + " is not an event type (stdout, stderr, exit, error)");
    }
    return event;
  });
}

std::string to_json(const ProcessInfo& info) { return dump(process_info_json(info)); }

Result<ProcessInfo> parse_process_info(std::string_view body) {
  return guarded<ProcessInfo>([&]() -> Result<ProcessInfo> {
    auto doc = parse_json(body, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_process_info(*doc, "", kResponse);
  });
}

std::string to_json(const std::vector<ProcessInfo>& list) {
  Json items = Json::array();
  for (const auto& p : list) items.push_back(process_info_json(p));
  Json j = Json::object();
  j["processes"] = std::move(items);
  return dump(j);
}

Result<std::vector<ProcessInfo>> parse_process_list(std::string_view body) {
  return guarded<std::vector<ProcessInfo>>([&]() -> Result<std::vector<ProcessInfo>> {
    auto doc = parse_json(body, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_list<ProcessInfo>(*doc, "processes", kResponse, read_process_info);
  });
}

Result<int> parse_signal_request(std::string_view body) {
  return guarded<int>([&] { return parse_signal(body); });
}

// ---- public: files ---------------------------------------------------------------

std::string to_json(const FileEntry& entry) { return dump(file_entry_json(entry)); }

Result<FileEntry> parse_file_entry(std::string_view body) {
  return guarded<FileEntry>([&]() -> Result<FileEntry> {
    auto doc = parse_json(body, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    return read_file_entry(*doc, "", kResponse);
  });
}

std::string to_json(const std::vector<FileEntry>& entries, bool truncated) {
  Json items = Json::array();
  for (const auto& e : entries) items.push_back(file_entry_json(e));
  Json j = Json::object();
  j["entries"] = std::move(items);
  j["truncated"] = truncated;
  return dump(j);
}

Result<std::vector<FileEntry>> parse_file_list(std::string_view body, bool* truncated) {
  return guarded<std::vector<FileEntry>>([&]() -> Result<std::vector<FileEntry>> {
    const Ctx& ctx = kResponse;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"entries", "truncated"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    bool cut = false;
    CORRAL_TRY(read_into(*obj, "truncated", cut, any_bool()));
    const Json* list = obj->get("entries");
    if (list == nullptr) return fail("invalid_value", "entries", "is missing");
    if (!list->is_array()) return wrong_type("entries", "an array", *list);
    std::vector<FileEntry> entries;
    entries.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
      auto e = read_file_entry((*list)[i], index_path("entries", i), ctx);
      if (!e) return tl::unexpected<Error>(e.error());
      entries.push_back(std::move(*e));
    }
    if (truncated != nullptr) *truncated = cut;
    return entries;
  });
}

Result<MkdirRequest> parse_mkdir(std::string_view body) {
  return guarded<MkdirRequest>([&]() -> Result<MkdirRequest> {
    const Ctx& ctx = kRequest;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"path", "path_b64", "parents", "mode"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    MkdirRequest request;
    auto path = read_file_path(*obj, "path");
    if (!path) return tl::unexpected<Error>(path.error());
    request.path = std::move(*path);
    CORRAL_TRY(read_into(*obj, "parents", request.parents, any_bool()));
    CORRAL_TRY(read_into(*obj, "mode", request.mode,
                         [&](const Json& j, std::string_view p) { return read_mode(j, p, ctx); }));
    return request;
  });
}

std::string to_json(const MkdirRequest& request) {
  Json j = Json::object();
  put_bytes(j, "path", request.path);
  j["parents"] = request.parents;
  j["mode"] = mode_string(request.mode);
  return dump(j);
}

Result<RenameRequest> parse_rename(std::string_view body) {
  return guarded<RenameRequest>([&]() -> Result<RenameRequest> {
    const Ctx& ctx = kRequest;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"from", "from_b64", "to", "to_b64", "overwrite"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    RenameRequest request;
    auto from = read_file_path(*obj, "from");
    if (!from) return tl::unexpected<Error>(from.error());
    auto to = read_file_path(*obj, "to");
    if (!to) return tl::unexpected<Error>(to.error());
    request.from = std::move(*from);
    request.to = std::move(*to);
    CORRAL_TRY(read_into(*obj, "overwrite", request.overwrite, any_bool()));
    return request;
  });
}

std::string to_json(const RenameRequest& request) {
  Json j = Json::object();
  put_bytes(j, "from", request.from);
  put_bytes(j, "to", request.to);
  j["overwrite"] = request.overwrite;
  return dump(j);
}

std::string to_json(const UploadResult& result) {
  Json j = Json::object();
  put_bytes(j, "path", result.path);
  j["bytes"] = result.bytes;
  j["sha256"] = result.sha256;
  return dump(j);
}

Result<UploadResult> parse_upload_result(std::string_view body) {
  return guarded<UploadResult>([&]() -> Result<UploadResult> {
    const Ctx& ctx = kResponse;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"path", "path_b64", "bytes", "sha256"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    UploadResult result;
    auto path = read_bytes(*obj, "path", std::numeric_limits<std::size_t>::max());
    if (!path) return tl::unexpected<Error>(path.error());
    if (*path) result.path = std::move(**path);
    CORRAL_TRY(read_into(*obj, "bytes", result.bytes, any_u64()));
    CORRAL_TRY(read_into(*obj, "sha256", result.sha256, any_string(ctx)));
    return result;
  });
}

}  // namespace corral::api
