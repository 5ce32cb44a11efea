// Tasks (task_model.h): the POST /v1/tasks body, its canonical form, and
// the task as the API shows it.
#include <time.h>

#include <algorithm>
#include <cstdio>

#include "api/api_model.h"
#include "api/codec_internal.h"
#include "api/json_writer.h"
#include "api/task_model.h"
#include "base/sha256.h"
#include "base/strings.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

constexpr std::size_t kMaxStdinBytes = 64 * kMiB;
constexpr std::int64_t kMaxTaskTimeoutMs = 7 * kDayMs;

bool is_hex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The parts of a multipart submit (task_model.h), and the names taken.
struct PartSource {
  const TaskContentParts* parts = nullptr;
  std::map<std::string, std::string, std::less<>> taken_by;  // name -> field

  // The bytes of the part that field `at` names with `name`.
  Result<std::string_view> take(const Obj& obj, std::string_view key) {
    auto name = read_string(*obj.get(key), obj.at(key), obj.ctx());
    if (!name) return tl::unexpected<Error>(name.error());
    if (parts == nullptr)
      return fail(ApiErrorCode::kInvalidValue, obj.at(key),
                  "names a part of a multipart/form-data body, and this body is JSON; send the "
                  "bytes in the JSON (\"content\", \"content_b64\") or send multipart");
    auto it = parts->find(*name);
    if (it == parts->end())
      return fail(ApiErrorCode::kInvalidValue, obj.at(key),
                  "no part of the body is named " + quote_for_message(*name));
    auto [taken, fresh] = taken_by.emplace(*name, obj.at(key));
    if (!fresh)
      return fail(ApiErrorCode::kInvalidValue, obj.at(key),
                  "part " + quote_for_message(*name) + " is already the bytes of " +
                      taken->second + "; give each its own part");
    return it->second;
  }
};

// An absolute path that is already in normal form: no ".", "..", empty
// component or trailing '/', not the root itself (F6: a task names files,
// never a directory to be replaced or read whole).
Status check_task_path(const std::string& value, std::string_view path) {
  CORRAL_TRY(check_absolute(value, path));
  std::string quoted = quote_for_message(value);
  if (value == "/") return fail(ApiErrorCode::kInvalidValue, path, "\"/\" is not a file");
  std::size_t start = 1;
  for (;;) {
    std::size_t slash = value.find('/', start);
    std::string_view part = std::string_view(value).substr(
        start, (slash == std::string::npos ? value.size() : slash) - start);
    if (part.empty() || part == ".")
      return fail(ApiErrorCode::kInvalidValue, path,
                  quoted + " is not normalized (an empty or \".\" component, or a trailing "
                           "'/'); write it as a plain absolute path such as /workspace/out.txt");
    if (part.size() > 255)
      return fail(ApiErrorCode::kInvalidValue, path, "a component is longer than 255 bytes");
    if (slash == std::string::npos) return ok();
    start = slash + 1;
  }
}

Result<std::string> read_task_path(const Obj& obj, std::string_view key) {
  const Json* v = obj.get(key);
  if (v == nullptr)
    return fail(ApiErrorCode::kInvalidValue, obj.at(key),
                "is missing (an absolute path inside the sandbox, such as /workspace/in.txt)");
  auto s = read_string(*v, obj.at(key), obj.ctx());
  if (!s) return tl::unexpected<Error>(s.error());
  CORRAL_TRY(check_task_path(*s, obj.at(key)));
  return std::move(*s);
}

Result<std::optional<std::string>> read_sha256(const Obj& obj) {
  std::optional<std::string> s;
  CORRAL_TRY(read_optional_string(obj, "sha256", s));
  if (s && !is_hex64(*s))
    return fail(ApiErrorCode::kInvalidValue, obj.at("sha256"),
                "is not a SHA-256 digest (64 lowercase hex digits)");
  return s;
}

// A stored request's inline input: the hash and size of bytes the state
// store keeps (task_model.h).
Status read_stored_content(const Obj& obj, TaskInput& in) {
  auto hash = read_string(*obj.get("content_sha256"), obj.at("content_sha256"), obj.ctx());
  if (!hash) return tl::unexpected<Error>(hash.error());
  if (!is_hex64(*hash))
    return fail(ApiErrorCode::kInvalidValue, obj.at("content_sha256"), "is not a SHA-256 digest");
  const Json* size = obj.get("content_size");
  if (size == nullptr || !size->is_number_unsigned())
    return fail(ApiErrorCode::kInvalidValue, obj.at("content_size"), "is not a byte count");
  in.content_sha256 = std::move(*hash);
  in.content_size = size->get<std::uint64_t>();
  return ok();
}

Result<TaskInput> read_input(const Json& v, const std::string& path, const Ctx& ctx,
                             std::uint64_t& inline_left, PartSource& parts) {
  // Only a stored request names its bytes by hash; a request sends them.
  const bool stored = &ctx == &kStored;
  constexpr std::string_view kExpected =
      "an object {\"path\", and one of \"content\", \"content_b64\", \"object\", \"volume\"}";
  auto obj = stored ? open_object(v, path, ctx,
                                  {"path", "content", "content_b64", "object", "volume",
                                   "volume_path", "sha256", "content_sha256", "content_size"},
                                  kExpected)
                    : open_object(v, path, ctx,
                                  {"path", "content", "content_b64", "content_part", "object",
                                   "volume", "volume_path", "sha256"},
                                  kExpected);
  if (!obj) return tl::unexpected<Error>(obj.error());
  TaskInput in;
  auto p = read_task_path(*obj, "path");
  if (!p) return tl::unexpected<Error>(p.error());
  in.path = std::move(*p);
  const bool has_stored = stored && obj->get("content_sha256") != nullptr;
  const bool has_content = has_stored || obj->get("content") != nullptr ||
                           obj->get("content_b64") != nullptr;
  const bool has_part = !stored && obj->get("content_part") != nullptr;
  const bool has_object = obj->get("object") != nullptr;
  const bool has_volume = obj->get("volume") != nullptr;
  if (int(has_content) + int(has_part) + int(has_object) + int(has_volume) != 1)
    return fail(ApiErrorCode::kInvalidValue, obj->at("content"),
                "give exactly one source: \"content\" (text), \"content_b64\", "
                "\"content_part\" (a part of a multipart body), \"object\" (an object-store key) "
                "or \"volume\" with \"volume_path\"");
  if (!has_volume && obj->get("volume_path") != nullptr)
    return fail(ApiErrorCode::kInvalidValue, obj->at("volume_path"), "is only for a volume input");
  if (has_stored) {
    CORRAL_TRY(read_stored_content(*obj, in));
  } else if (has_part) {
    auto bytes = parts.take(*obj, "content_part");
    if (!bytes) return tl::unexpected<Error>(bytes.error());
    if (bytes->size() > inline_left)
      return fail(ApiErrorCode::kInvalidValue, obj->at("content_part"),
                  "the inputs' bytes are more than " + std::to_string(inline_left) +
                      " bytes in all");
    in.content.assign(bytes->data(), bytes->size());
    in.content_held = true;
    in.content_sha256 = sha256_hex(in.content);
    in.content_size = in.content.size();
    inline_left -= in.content.size();
  } else if (has_content) {
    auto bytes = read_bytes(*obj, "content", static_cast<std::size_t>(inline_left));
    if (!bytes) return tl::unexpected<Error>(bytes.error());
    in.content = std::move(**bytes);
    in.content_held = true;
    in.content_sha256 = sha256_hex(in.content);
    in.content_size = in.content.size();
    inline_left -= in.content.size();
  } else if (has_object) {
    auto key = read_string(*obj->get("object"), obj->at("object"), ctx);
    if (!key) return tl::unexpected<Error>(key.error());
    if (key->empty() || key->size() > 512 ||
        key->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/-") !=
            std::string::npos ||
        key->front() == '/' || key->back() == '/' || key->find("//") != std::string::npos ||
        ("/" + *key + "/").find("/../") != std::string::npos ||
        ("/" + *key + "/").find("/./") != std::string::npos)
      return fail(ApiErrorCode::kInvalidValue, obj->at("object"),
                  "is not an object key (1-512 of [A-Za-z0-9._/-], no empty, \".\" or \"..\" "
                  "segment, no leading or trailing '/')");
    in.source = TaskInput::Source::kObject;
    in.object_key = std::move(*key);
  } else {
    auto name = read_string(*obj->get("volume"), obj->at("volume"), ctx);
    if (!name) return tl::unexpected<Error>(name.error());
    if (name->empty()) return fail(ApiErrorCode::kInvalidValue, obj->at("volume"), "is empty");
    const Json* vp = obj->get("volume_path");
    if (vp == nullptr)
      return fail(ApiErrorCode::kInvalidValue, obj->at("volume_path"),
                  "is missing (the file's path inside the volume)");
    auto sub = read_c_string(*vp, obj->at("volume_path"), ctx);
    if (!sub) return tl::unexpected<Error>(sub.error());
    if (sub->empty() || sub->front() == '/')
      return fail(ApiErrorCode::kInvalidValue, obj->at("volume_path"),
                  "is a file's path inside the volume, relative to its root, such as dir/in.txt");
    CORRAL_TRY(check_task_path("/" + *sub, obj->at("volume_path")));
    in.source = TaskInput::Source::kVolume;
    in.volume = std::move(*name);
    in.volume_path = std::move(*sub);
  }
  auto sha = read_sha256(*obj);
  if (!sha) return tl::unexpected<Error>(sha.error());
  in.sha256 = std::move(*sha);
  return in;
}

Result<TaskOutputSpec> read_output(const Json& v, const std::string& path, const Ctx& ctx) {
  auto obj = open_object(v, path, ctx, {"path", "required", "max_size"},
                         "an object {\"path\", \"required\", \"max_size\"}");
  if (!obj) return tl::unexpected<Error>(obj.error());
  TaskOutputSpec out;
  auto p = read_task_path(*obj, "path");
  if (!p) return tl::unexpected<Error>(p.error());
  out.path = std::move(*p);
  CORRAL_TRY(read_into(*obj, "required", out.required, any_bool()));
  if (const Json* m = obj->get("max_size"); m != nullptr && !m->is_null()) {
    auto size = read_size(*m, obj->at("max_size"), ctx);
    if (!size) return tl::unexpected<Error>(size.error());
    out.max_size = *size;
  }
  return out;
}

// Volumes are checked for their shape here and by the sandbox create for
// the rest (the volume service owns names, sub-paths and namespaces).
Result<std::string> read_volumes(const Json& v, const std::string& path, const Ctx& ctx) {
  if (!v.is_array()) return wrong_type(path, "an array of volume objects", v);
  if (v.size() > kMaxTaskVolumes)
    return fail(ApiErrorCode::kInvalidValue, path,
                "more than " + std::to_string(kMaxTaskVolumes) + " volumes");
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto obj = open_object(v[i], index_path(path, i), ctx,
                           {"volume", "subpath", "target", "writable"},
                           "an object {\"volume\", \"subpath\", \"target\", \"writable\"}");
    if (!obj) return tl::unexpected<Error>(obj.error());
  }
  return dump(v);
}

template <typename T, typename Reader>
Result<std::vector<T>> read_items(const Obj& obj, std::string_view key, std::size_t max,
                                  Reader reader) {
  std::vector<T> out;
  const Json* v = obj.get(key);
  if (v == nullptr) return out;
  if (!v->is_array()) return wrong_type(obj.at(key), "an array", *v);
  if (v->size() > max)
    return fail(ApiErrorCode::kInvalidValue, obj.at(key),
                "more than " + std::to_string(max) + " items (" + std::to_string(v->size()) + ")");
  for (std::size_t i = 0; i < v->size(); ++i) {
    auto item = reader((*v)[i], index_path(obj.at(key), i));
    if (!item) return tl::unexpected<Error>(item.error());
    out.push_back(std::move(*item));
  }
  return out;
}

// A create-codec error about the "sandbox" object, re-pathed under it.
tl::unexpected<Error> sandbox_error(const Error& e) {
  std::string message = e.message;
  const std::string field = e.hint;
  std::string code = "invalid_value";
  if (auto colon = message.find(": "); colon != std::string::npos) {
    code = message.substr(0, colon);
    message = message.substr(colon + 2);
    if (!field.empty() && message.rfind(field + ": ", 0) == 0)
      message = message.substr(field.size() + 2);
  }
  auto id = parse_error_code(code).value_or(ApiErrorCode::kInvalidValue);
  return fail(id, field.empty() ? "sandbox" : "sandbox." + field, message);
}

Result<TaskRequest> read_task(const Json& doc, const Ctx& ctx, std::uint64_t max_inline,
                              PartSource& parts) {
  auto obj = &ctx == &kStored
                 ? open_object(doc, "", ctx,
                               {"id", "sandbox", "inputs", "command", "sh", "env", "cwd", "stdin",
                                "stdin_b64", "timeout", "outputs", "volumes", "snapshot",
                                "keep_sandbox", "dry_run"})
                 : open_object(doc, "", ctx,
                               {"id", "sandbox", "inputs", "command", "sh", "env", "cwd", "stdin",
                                "stdin_b64", "stdin_part", "timeout", "outputs", "volumes",
                                "snapshot", "keep_sandbox", "dry_run"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  TaskRequest t;
  const Json* id = obj->get("id");
  if (id == nullptr)
    return fail(ApiErrorCode::kInvalidValue, "id",
                "is missing: choose the task's id (1-128 of [A-Za-z0-9._:-]); a repeat with the "
                "same id and body returns the same task");
  auto id_text = read_string(*id, "id", ctx);
  if (!id_text) return tl::unexpected<Error>(id_text.error());
  if (!valid_task_id(*id_text))
    return fail(ApiErrorCode::kInvalidValue, "id",
                quote_for_message(*id_text) + " is not a task id (1-128 of [A-Za-z0-9._:-])");
  t.id = std::move(*id_text);
  if (const Json* sb = obj->get("sandbox"); sb != nullptr) {
    if (!sb->is_object()) return wrong_type("sandbox", "an object (a POST /v1/sandboxes body)", *sb);
    t.sandbox_json = dump(*sb);
    // "pool" (C4) is the daemon's to read (over that pool's spec): the
    // rest is checked here.
    Json rest = *sb;
    if (auto pool = rest.find("pool"); pool != rest.end()) {
      if (!pool->is_string()) return wrong_type("sandbox.pool", "a string (a pool's name)", *pool);
      rest.erase(pool);
    }
    if (auto checked = parse_create_sandbox(dump(rest)); !checked)
      return sandbox_error(checked.error());
  }
  std::uint64_t inline_left = max_inline;
  auto inputs = read_items<TaskInput>(
      *obj, "inputs", kMaxTaskInputs,
      [&](const Json& v, const std::string& p) {
        return read_input(v, p, ctx, inline_left, parts);
      });
  if (!inputs) return tl::unexpected<Error>(inputs.error());
  t.inputs = std::move(*inputs);
  const Json* command = obj->get("command");
  const Json* sh = obj->get("sh");
  if (command != nullptr && !command->is_null() && sh != nullptr && !sh->is_null())
    return fail(ApiErrorCode::kInvalidValue, "command",
                "give either \"command\" (argv) or \"sh\" (a shell command line), not both");
  if (command != nullptr && !command->is_null()) {
    auto argv = read_string_list(*command, "command", ctx, kMaxArgv, true);
    if (!argv) return tl::unexpected<Error>(argv.error());
    if (argv->empty() || argv->front().empty())
      return fail(ApiErrorCode::kInvalidValue, "command",
                  "needs at least the program to run, such as [\"python3\", \"main.py\"]");
    t.command = std::move(*argv);
  } else if (sh != nullptr && !sh->is_null()) {
    auto line = read_c_string(*sh, "sh", ctx);
    if (!line) return tl::unexpected<Error>(line.error());
    if (line->empty()) return fail(ApiErrorCode::kInvalidValue, "sh", "is empty");
    t.sh = std::move(*line);
  } else {
    return fail(ApiErrorCode::kInvalidValue, "command",
                "no command: give \"command\" (argv, such as [\"python3\", \"main.py\"]) or "
                "\"sh\" (a shell command line)");
  }
  CORRAL_TRY(read_into(*obj, "env", t.env,
                       [&](const Json& j, std::string_view p) { return read_env(j, p, ctx); }));
  if (const Json* cwd = obj->get("cwd"); cwd != nullptr && !cwd->is_null()) {
    auto dir = read_string(*cwd, "cwd", ctx);
    if (!dir) return tl::unexpected<Error>(dir.error());
    CORRAL_TRY(check_absolute(*dir, "cwd"));
    t.cwd = std::move(*dir);
  }
  if (obj->get("stdin_part") != nullptr) {
    if (obj->get("stdin") != nullptr || obj->get("stdin_b64") != nullptr)
      return fail(ApiErrorCode::kInvalidValue, "stdin_part",
                  "give one of \"stdin\", \"stdin_b64\" and \"stdin_part\"");
    auto bytes = parts.take(*obj, "stdin_part");
    if (!bytes) return tl::unexpected<Error>(bytes.error());
    if (bytes->size() > kMaxStdinBytes)
      return fail(ApiErrorCode::kInvalidValue, "stdin_part",
                  "is longer than " + std::to_string(kMaxStdinBytes) + " bytes");
    t.stdin_data.assign(bytes->data(), bytes->size());
  } else {
    auto stdin_data = read_bytes(*obj, "stdin", kMaxStdinBytes);
    if (!stdin_data) return tl::unexpected<Error>(stdin_data.error());
    if (*stdin_data) t.stdin_data = std::move(**stdin_data);
  }
  // "timeout_ms" is the canonical form's name; requests say "timeout".
  if (const Json* timeout = obj->get("timeout"); timeout != nullptr && !timeout->is_null()) {
    auto ms = read_duration_ms(*timeout, "timeout", ctx, 1, kMaxTaskTimeoutMs);
    if (!ms) return tl::unexpected<Error>(ms.error());
    t.timeout_ms = *ms;
  }
  auto outputs = read_items<TaskOutputSpec>(
      *obj, "outputs", kMaxTaskOutputs,
      [&](const Json& v, const std::string& p) { return read_output(v, p, ctx); });
  if (!outputs) return tl::unexpected<Error>(outputs.error());
  t.outputs = std::move(*outputs);
  for (std::size_t i = 0; i < t.outputs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (t.outputs[i].path == t.outputs[j].path)
        return fail(ApiErrorCode::kInvalidValue, index_path("outputs", i) + ".path",
                    "names the same file as outputs[" + std::to_string(j) + "]");
  if (const Json* vols = obj->get("volumes"); vols != nullptr) {
    auto v = read_volumes(*vols, "volumes", ctx);
    if (!v) return tl::unexpected<Error>(v.error());
    t.volumes_json = std::move(*v);
  }
  if (const Json* snap = obj->get("snapshot"); snap != nullptr) {
    auto mode = read_string(*snap, "snapshot", ctx);
    if (!mode) return tl::unexpected<Error>(mode.error());
    if (*mode != "on_failure" && *mode != "always" && *mode != "never")
      return fail(ApiErrorCode::kInvalidValue, "snapshot",
                  quote_for_message(*mode) + " is not one of on_failure, always, never");
    t.snapshot = std::move(*mode);
  }
  CORRAL_TRY(read_into(*obj, "keep_sandbox", t.keep_sandbox, any_bool()));
  CORRAL_TRY(read_into(*obj, "dry_run", t.dry_run, any_bool()));
  return t;
}

Json input_json(const TaskInput& in) {
  Json j = Json::object();
  j["path"] = in.path;
  switch (in.source) {
    case TaskInput::Source::kContent:
      // A request built in code (a client) may hold bytes without their hash.
      if (in.content_sha256.empty()) {
        j["content_sha256"] = sha256_hex(in.content);
        j["content_size"] = in.content.size();
      } else {
        j["content_sha256"] = in.content_sha256;
        j["content_size"] = in.content_size;
      }
      break;
    case TaskInput::Source::kObject:
      j["object"] = in.object_key;
      break;
    case TaskInput::Source::kVolume:
      j["volume"] = in.volume;
      j["volume_path"] = in.volume_path;
      break;
  }
  j["sha256"] = nullable(in.sha256);
  return j;
}

}  // namespace

bool valid_task_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxTaskIdBytes || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '-';
  });
}

std::vector<std::string> TaskRequest::argv() const {
  if (sh) return {"/bin/sh", "-c", *sh};
  return command;
}

Result<TaskRequest> parse_task_request(std::string_view body, std::uint64_t max_inline_bytes,
                                       const TaskContentParts* parts) {
  return guarded<TaskRequest>([&]() -> Result<TaskRequest> {
    auto doc = parse_json(body, kRequest);
    if (!doc) return tl::unexpected<Error>(doc.error());
    PartSource source{parts, {}};
    auto task = read_task(*doc, kRequest, max_inline_bytes, source);
    if (!task || parts == nullptr) return task;
    // Nothing a client sent is silently dropped.
    for (const auto& [name, bytes] : *parts)
      if (!source.taken_by.contains(name))
        return fail(ApiErrorCode::kInvalidValue, "",
                    "part " + quote_for_message(name) +
                        " is named by no input's \"content_part\" nor by \"stdin_part\"");
    return task;
  });
}

Result<TaskRequest> parse_stored_task_request(std::string_view canonical_json) {
  return guarded<TaskRequest>([&]() -> Result<TaskRequest> {
    auto doc = parse_json(canonical_json, kStored);
    if (!doc) return tl::unexpected<Error>(doc.error());
    // The canonical form's names for what requests write differently.
    if (doc->is_object() && doc->contains("timeout_ms")) {
      Json t = (*doc)["timeout_ms"];
      doc->erase("timeout_ms");
      if (!t.is_null()) (*doc)["timeout"] = std::to_string(t.get<std::int64_t>()) + "ms";
    }
    PartSource none;
    return read_task(*doc, kStored, std::numeric_limits<std::uint64_t>::max(), none);
  });
}

std::string to_canonical_json(const TaskRequest& t) {
  Json j = Json::object();
  j["id"] = t.id;
  auto sandbox = parse_json(t.sandbox_json, kStored);
  j["sandbox"] = sandbox ? std::move(*sandbox) : Json::object();
  Json inputs = Json::array();
  for (const auto& in : t.inputs) inputs.push_back(input_json(in));
  j["inputs"] = std::move(inputs);
  j["command"] = t.sh ? Json(nullptr) : strings_json(t.command);
  j["sh"] = nullable(t.sh);
  j["env"] = env_json(t.env);
  j["cwd"] = nullable(t.cwd);
  put_bytes(j, "stdin", t.stdin_data);
  j["timeout_ms"] = nullable(t.timeout_ms);
  Json outputs = Json::array();
  for (const auto& o : t.outputs)
    outputs.push_back({{"path", o.path}, {"required", o.required}, {"max_size", nullable(o.max_size)}});
  j["outputs"] = std::move(outputs);
  auto volumes = parse_json(t.volumes_json, kStored);
  j["volumes"] = volumes ? std::move(*volumes) : Json::array();
  j["snapshot"] = t.snapshot;
  j["keep_sandbox"] = t.keep_sandbox;
  if (t.dry_run) j["dry_run"] = true;  // only when set: older stored requests stay equal
  return dump(j);
}

// ---- the task as shown ---------------------------------------------------

std::string format_time_ms(std::int64_t unix_ms) {
  time_t secs = static_cast<time_t>(unix_ms / 1000);
  std::int64_t ms = unix_ms % 1000;
  if (ms < 0) {
    ms += 1000;
    --secs;
  }
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

Result<std::int64_t> parse_time_ms(std::string_view text) {
  auto bad = [&] {
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid_value: " + quote_for_message(text) +
                          " is not a time (RFC 3339 in UTC such as 2026-12-01T10:00:00Z, or unix "
                          "milliseconds)");
  };
  if (!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (text.size() > 15) return bad();
    return std::stoll(std::string(text));
  }
  int y, mo, d, h, mi, s;
  int consumed = 0;
  std::string t(text);
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &consumed) != 6)
    return bad();
  std::int64_t ms = 0;
  std::size_t pos = static_cast<std::size_t>(consumed);
  if (pos < t.size() && t[pos] == '.') {
    int digits = 0;
    ++pos;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') {
      if (digits < 3) ms = ms * 10 + (t[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad();
    for (int i = digits; i < 3; ++i) ms *= 10;
  }
  if (pos + 1 != t.size() || t[pos] != 'Z') return bad();
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return bad();
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000 + ms;
}

namespace {

Json task_json(const TaskInfo& t) {
  Json j = Json::object();
  j["id"] = t.id;
  j["ns"] = t.ns;
  j["status"] = t.status;
  j["stage"] = t.stage;
  j["reason"] = nullable(t.reason);
  j["detail"] = nullable(t.detail);
  j["exit_code"] = nullable(t.exit_code);
  j["signal"] = nullable(t.signal);
  j["sandbox_id"] = nullable(t.sandbox_id);
  j["node"] = nullable(t.node);
  j["attempt"] = t.attempt;
  j["replay_of"] = nullable(t.replay_of);
  Json outputs = Json::array();
  for (const auto& o : t.outputs)
    outputs.push_back({{"index", o.index},
                       {"path", o.path},
                       {"present", o.present},
                       {"size", o.size},
                       {"sha256", nullable(o.sha256)},
                       {"stored_at", nullable(o.stored_at)}});
  j["outputs"] = std::move(outputs);
  j["snapshot_id"] = nullable(t.snapshot_id);
  j["snapshot_error"] = nullable(t.snapshot_error);
  // Unix milliseconds, as every other time of the API (created_at_ms of a
  // sandbox, started_at_ms of a process).
  j["created_at_ms"] = t.created_at_ms;
  j["started_at_ms"] = nullable(t.started_at_ms);
  j["finished_at_ms"] = nullable(t.finished_at_ms);
  if (t.started_at_ms && t.finished_at_ms)
    j["duration_ms"] = *t.finished_at_ms - *t.started_at_ms;
  else
    j["duration_ms"] = nullptr;
  if (t.request_json) {
    auto req = parse_json(*t.request_json, kStored);
    if (req) j["request"] = std::move(*req);
  }
  if (t.resolved_json && !t.resolved_json->empty()) {
    auto resolved = parse_json(*t.resolved_json, kStored);
    if (resolved) j["resolved"] = std::move(*resolved);
  }
  if (t.dry_run_json) {
    auto report = parse_json(*t.dry_run_json, kStored);
    if (report) j["dry_run"] = std::move(*report);
  }
  return j;
}

Result<TaskInfo> read_task_info(const Json& doc, std::string_view path, const Ctx& ctx) {
  auto obj = open_object(doc, std::string(path), ctx, {});
  if (!obj) return tl::unexpected<Error>(obj.error());
  TaskInfo t;
  auto s = any_string(ctx);
  CORRAL_TRY(read_into(*obj, "id", t.id, s));
  CORRAL_TRY(read_into(*obj, "ns", t.ns, s));
  CORRAL_TRY(read_into(*obj, "status", t.status, s));
  CORRAL_TRY(read_into(*obj, "stage", t.stage, s));
  for (auto [key, field] : {std::pair{"reason", &t.reason}, std::pair{"detail", &t.detail},
                            std::pair{"sandbox_id", &t.sandbox_id},
                            std::pair{"replay_of", &t.replay_of},
                            std::pair{"snapshot_id", &t.snapshot_id},
                            std::pair{"snapshot_error", &t.snapshot_error}})
    CORRAL_TRY(read_optional_string(*obj, key, *field));
  CORRAL_TRY(read_optional_int(*obj, "exit_code", t.exit_code));
  CORRAL_TRY(read_optional_int(*obj, "signal", t.signal));
  CORRAL_TRY(read_into(*obj, "attempt", t.attempt, [](const Json& v, std::string_view p) {
    return read_int(v, p, 0, 1 << 30);
  }));
  CORRAL_TRY(read_into(*obj, "created_at_ms", t.created_at_ms, any_i64()));
  CORRAL_TRY(read_optional_int(*obj, "started_at_ms", t.started_at_ms));
  CORRAL_TRY(read_optional_int(*obj, "finished_at_ms", t.finished_at_ms));
  if (const Json* outs = obj->get("outputs"); outs != nullptr && outs->is_array()) {
    for (std::size_t i = 0; i < outs->size(); ++i) {
      auto o = open_object((*outs)[i], index_path(obj->at("outputs"), i), ctx, {});
      if (!o) return tl::unexpected<Error>(o.error());
      TaskOutputInfo info;
      info.index = i;
      CORRAL_TRY(read_into(*o, "path", info.path, s));
      CORRAL_TRY(read_into(*o, "present", info.present, any_bool()));
      CORRAL_TRY(read_into(*o, "size", info.size, any_u64()));
      CORRAL_TRY(read_optional_string(*o, "sha256", info.sha256));
      CORRAL_TRY(read_optional_string(*o, "stored_at", info.stored_at));
      t.outputs.push_back(std::move(info));
    }
  }
  if (const Json* req = obj->get("request"); req != nullptr && req->is_object())
    t.request_json = dump(*req);
  if (const Json* res = obj->get("resolved"); res != nullptr && res->is_object())
    t.resolved_json = dump(*res);
  if (const Json* dry = obj->get("dry_run"); dry != nullptr && dry->is_object())
    t.dry_run_json = dump(*dry);
  return t;
}

}  // namespace

std::string to_json(const TaskInfo& task) { return dump(task_json(task)); }

std::string to_json(const std::vector<TaskInfo>& tasks, const std::optional<std::string>& cursor) {
  Json j = list_json("tasks", tasks, task_json);
  j["next_cursor"] = nullable(cursor);
  return dump(j);
}

Result<TaskInfo> parse_task_info(std::string_view body) {
  return read_document<TaskInfo>(body, kResponse, read_task_info);
}

Result<TaskPage> parse_task_page(std::string_view body) {
  return guarded<TaskPage>([&]() -> Result<TaskPage> {
    auto doc = parse_json(body, kResponse);
    if (!doc) return tl::unexpected<Error>(doc.error());
    TaskPage page;
    auto tasks = read_list<TaskInfo>(*doc, "tasks", kResponse, read_task_info);
    if (!tasks) return tl::unexpected<Error>(tasks.error());
    page.tasks = std::move(*tasks);
    auto obj = open_object(*doc, "", kResponse, {});
    if (!obj) return tl::unexpected<Error>(obj.error());
    CORRAL_TRY(read_optional_string(*obj, "next_cursor", page.next_cursor));
    return page;
  });
}

std::string task_input_part(std::size_t index) { return "input-" + std::to_string(index); }

std::string to_request_json(const TaskRequest& request, bool content_parts) {
  auto doc = parse_json(to_canonical_json(request), kStored);
  if (!doc) return "{}";  // our own output: does not happen
  Json timeout = (*doc)["timeout_ms"];
  doc->erase("timeout_ms");
  (*doc)["timeout"] = timeout.is_null() ? Json(nullptr) : duration_json(timeout.get<std::int64_t>());
  // The canonical form names inline bytes by hash; a request sends them.
  Json& inputs = (*doc)["inputs"];
  for (std::size_t i = 0; i < request.inputs.size() && i < inputs.size(); ++i) {
    if (request.inputs[i].source != TaskInput::Source::kContent) continue;
    inputs[i].erase("content_sha256");
    inputs[i].erase("content_size");
    if (content_parts) inputs[i]["content_part"] = task_input_part(i);
    else put_bytes(inputs[i], "content", request.inputs[i].content);
  }
  if (content_parts && !request.stdin_data.empty()) {
    doc->erase("stdin");
    doc->erase("stdin_b64");
    (*doc)["stdin_part"] = "stdin";
  }
  return dump(*doc);
}

}  // namespace corral::api
