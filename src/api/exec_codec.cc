// Commands (api_model.h): the exec request, its result, and the events of
// a streamed exec, whose output lines are the API's hot path
// (exec_output_json).
#include <limits>

#include "api/api_model.h"
#include "base/strings.h"
#include "api/base64.h"
#include "api/codec_internal.h"
#include "api/json_writer.h"
#include "base/json_string.h"
#include "base/utf8.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

// stdin is data rather than a name or a value: bounded like one output
// stream (the body size limit of the HTTP layer bounds it first).
constexpr std::size_t kMaxStdinBytes = 64 * kMiB;
constexpr std::uint64_t kMaxOutputBytes = 64 * kMiB;

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
    return fail(ApiErrorCode::kInvalidValue, "argv",
                "give either \"argv\" (a list of arguments) or \"cmd\" (a shell command line), "
                "not both");
  }
  if (argv == nullptr && cmd == nullptr) {
    return fail(ApiErrorCode::kInvalidValue, "argv",
                "no command: give \"argv\" (a list of arguments, such as [\"python3\", "
                "\"x.py\"]) or \"cmd\" (a shell command line, run by /bin/sh -c)");
  }
  if (argv != nullptr) {
    auto list = read_string_list(*argv, "argv", ctx, kMaxArgv, true);
    if (!list) return tl::unexpected<Error>(list.error());
    if (list->empty()) {
      return fail(ApiErrorCode::kInvalidValue, "argv",
                  "is empty: it needs at least the program to run");
    }
    if (list->front().empty()) {
      return fail(ApiErrorCode::kInvalidValue, "argv[0]", "is empty: it is the program to run");
    }
    request.argv = std::move(*list);
  } else {
    auto line = read_c_string(*cmd, "cmd", ctx);
    if (!line) return tl::unexpected<Error>(line.error());
    if (line->empty()) return fail(ApiErrorCode::kInvalidValue, "cmd", "is empty");
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
        return fail(ApiErrorCode::kInvalidValue, "max_output_bytes",
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
      return fail(ApiErrorCode::kInvalidValue, "stream",
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

}  // namespace

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
      return fail(ApiErrorCode::kInvalidValue, "type",
                  "is missing (stdout, stderr, exit or error)");
    }
    auto kind = read_string(*type, "type", ctx, "a string (stdout, stderr, exit or error)");
    if (!kind) return tl::unexpected<Error>(kind.error());
    ExecEvent event;
    if (*kind == "stdout" || *kind == "stderr") {
      event.kind = *kind == "stdout" ? ExecEvent::kStdout : ExecEvent::kStderr;
      auto data = read_bytes(*obj, "data", std::numeric_limits<std::size_t>::max());
      if (!data) return tl::unexpected<Error>(data.error());
      if (!*data) return fail(ApiErrorCode::kInvalidValue, "data", "is missing (or \"data_b64\")");
      event.data = std::move(**data);
    } else if (*kind == "exit") {
      event.kind = ExecEvent::kExit;
      CORRAL_TRY(read_result_fields(*obj, event.result, false));
    } else if (*kind == "error") {
      event.kind = ExecEvent::kError;
      const Json* error = obj->get("error");
      if (error == nullptr) return fail(ApiErrorCode::kInvalidValue, "error", "is missing");
      auto e = read_error_body(*error, "error", ctx);
      if (!e) return tl::unexpected<Error>(e.error());
      event.error = std::move(*e);
    } else {
      return fail(ApiErrorCode::kInvalidValue, "type",
                  quote_for_message(*kind) + " is not an event type (stdout, stderr, exit, error)");
    }
    return event;
  });
}

}  // namespace corral::api
