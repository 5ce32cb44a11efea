// Background processes (api_model.h): ProcessInfo, its lists, and the
// signal request of POST .../processes/{pid}/signal.
#include <csignal>

#include "api/api_model.h"
#include "base/strings.h"
#include "api/json_writer.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

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
  if (obj->get("id") == nullptr)
    return fail(ApiErrorCode::kInvalidValue, obj->at("id"), "is missing");
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
  CORRAL_TRY(read_optional_int(*obj, "ended_at_ms", p.ended_at_ms));
  CORRAL_TRY(read_into(*obj, "stdout_bytes", p.stdout_bytes, any_u64()));
  CORRAL_TRY(read_into(*obj, "stderr_bytes", p.stderr_bytes, any_u64()));
  return p;
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
    return fail(ApiErrorCode::kInvalidValue, "signal",
                "is missing (such as \"TERM\", \"SIGKILL\" or 15)");
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
    return fail(ApiErrorCode::kInvalidValue, "signal",
                quote_for_message(*text) + " is not a signal name (known: " + known +
                    "; or give the number)");
  }
  auto n = read_uint(*v, "signal", 1, kMaxSignal, "a signal name (\"TERM\") or number (15)");
  if (!n) return tl::unexpected<Error>(n.error());
  return static_cast<int>(*n);
}

}  // namespace

std::string to_json(const ProcessInfo& info) { return dump(process_info_json(info)); }

Result<ProcessInfo> parse_process_info(std::string_view body) {
  return read_document<ProcessInfo>(body, kResponse, read_process_info);
}

std::string to_json(const std::vector<ProcessInfo>& list) {
  return dump(list_json("processes", list, process_info_json));
}

Result<std::vector<ProcessInfo>> parse_process_list(std::string_view body) {
  return read_list_document<ProcessInfo>(body, "processes", read_process_info);
}

Result<int> parse_signal_request(std::string_view body) {
  return guarded<int>([&] { return parse_signal(body); });
}

}  // namespace corral::api
