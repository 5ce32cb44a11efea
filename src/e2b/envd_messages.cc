#include "e2b/envd_messages.h"

#include <sys/stat.h>

#include <cctype>
#include <csignal>
#include <ctime>
#include <nlohmann/json.hpp>

#include "api/base64.h"
#include "api/task_model.h"

namespace corral::e2b {

namespace {

using Json = nlohmann::json;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Result<Json> parse_object(std::string_view text) {
  auto j = Json::parse(text, nullptr, false);
  if (j.is_discarded())
    return make_error(ErrorCode::kInvalidArgument, "the message is not valid JSON");
  if (!j.is_object())
    return make_error(ErrorCode::kInvalidArgument, "the message is not a JSON object");
  return j;
}

tl::unexpected<Error> bad(std::string_view field, std::string_view what) {
  return make_error(ErrorCode::kInvalidArgument, std::string(field) + ": " + std::string(what));
}

// A member under its JSON name or its proto name; null counts as absent
// (proto3 JSON: null is the default value).
const Json* member(const Json& obj, std::string_view json_name, std::string_view proto_name = {}) {
  auto it = obj.find(json_name);
  if (it == obj.end() && !proto_name.empty()) it = obj.find(proto_name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::string> get_string(const Json& obj, std::string_view name,
                               std::string_view proto = {}) {
  const Json* v = member(obj, name, proto);
  if (v == nullptr) return std::string();
  if (!v->is_string()) return bad(name, "must be a string");
  return v->get<std::string>();
}

// A string member that must be there and not empty.
Result<std::string> get_required_string(const Json& obj, std::string_view name) {
  auto v = get_string(obj, name);
  if (!v) return tl::unexpected(v.error());
  if (v->empty()) return bad(name, "is missing or empty");
  return v;
}

Result<std::optional<std::string>> get_optional_string(const Json& obj, std::string_view name) {
  const Json* v = member(obj, name);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return bad(name, "must be a string");
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::optional<bool>> get_bool(const Json& obj, std::string_view name,
                                     std::string_view proto = {}) {
  const Json* v = member(obj, name, proto);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return bad(name, "must be true or false");
  return std::optional<bool>(v->get<bool>());
}

// uint32: a number or a decimal string (proto3 JSON takes both).
Result<std::optional<std::uint32_t>> get_u32(const Json& obj, std::string_view name) {
  const Json* v = member(obj, name);
  if (v == nullptr) return std::optional<std::uint32_t>();
  if (v->is_number_unsigned()) {
    auto n = v->get<std::uint64_t>();
    if (n <= 0xffffffffu) return std::optional<std::uint32_t>(static_cast<std::uint32_t>(n));
  } else if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (!s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos) {
      auto n = std::stoull(s);
      if (n <= 0xffffffffu) return std::optional<std::uint32_t>(static_cast<std::uint32_t>(n));
    }
  } else if (v->is_number_integer() && v->get<std::int64_t>() >= 0) {
    auto n = v->get<std::int64_t>();
    if (n <= 0xffffffff) return std::optional<std::uint32_t>(static_cast<std::uint32_t>(n));
  }
  return bad(name, "must be an unsigned 32-bit integer");
}

Result<std::string> get_bytes(const Json& v, std::string_view name) {
  if (!v.is_string()) return bad(name, "must be base64 text");
  // proto3 JSON writers may use the URL-safe alphabet or leave padding
  // out; turn both into the standard form for the strict decoder.
  std::string s = v.get<std::string>();
  for (char& c : s) {
    if (c == '-')
      c = '+';
    else if (c == '_')
      c = '/';
  }
  while (s.size() % 4 != 0) s.push_back('=');
  auto decoded = api::base64_decode(s);
  if (!decoded) return bad(name, decoded.error().message);
  return std::move(*decoded);
}

Result<ProcessSelector> read_selector(const Json& obj) {
  const Json* p = member(obj, "process");
  if (p == nullptr)
    return bad("process", "is missing (a selector: {\"pid\": N} or {\"tag\": \"...\"})");
  if (!p->is_object()) return bad("process", "must be an object");
  ProcessSelector s;
  auto pid = get_u32(*p, "pid");
  if (!pid) return tl::unexpected(pid.error());
  auto tag = get_optional_string(*p, "tag");
  if (!tag) return tl::unexpected(tag.error());
  s.pid = *pid;
  s.tag = *tag;
  if (s.pid.has_value() == s.tag.has_value())
    return bad("process", "must name exactly one of pid and tag");
  return s;
}

Json end_json(const ProcessEnd& e) {
  Json j{{"exitCode", e.exit_code}, {"exited", e.exited}, {"status", e.status}};
  if (e.error) j["error"] = *e.error;
  return j;
}

const char* file_type_name(FileType t) {
  switch (t) {
    case FileType::kFile:
      return "FILE_TYPE_FILE";
    case FileType::kDirectory:
      return "FILE_TYPE_DIRECTORY";
    case FileType::kSymlink:
      return "FILE_TYPE_SYMLINK";
    default:
      return "FILE_TYPE_UNSPECIFIED";
  }
}

Json entry_object(const EntryInfo& e) {
  Json j{{"name", e.name},
         {"type", file_type_name(e.type)},
         {"path", e.path},
         {"size", std::to_string(e.size)},
         {"mode", static_cast<unsigned>(e.mode & 07777)},
         {"permissions", go_file_mode_string(e.mode)},
         {"owner", e.owner},
         {"group", e.group},
         {"modifiedTime", rfc3339_ms(e.modified_ms)}};
  if (e.symlink_target) j["symlinkTarget"] = *e.symlink_target;
  return j;
}

}  // namespace

namespace {

// {"size": {"cols": N, "rows": N}}: a terminal's size.
Result<PtySize> read_pty(const Json& pty) {
  if (!pty.is_object()) return bad("pty", "must be an object");
  const Json* size = member(pty, "size");
  if (size == nullptr || !size->is_object())
    return bad("pty.size", "is missing ({\"cols\": N, \"rows\": N})");
  PtySize out;
  for (auto [name, field] : {std::pair{"cols", &out.cols}, std::pair{"rows", &out.rows}}) {
    auto v = get_u32(*size, name);
    if (!v) return tl::unexpected(v.error());
    if (!*v || **v == 0 || **v > 65535)
      return bad(std::string("pty.size.") + name, "must be from 1 to 65535");
    *field = static_cast<std::uint16_t>(**v);
  }
  return out;
}

}  // namespace

Result<StartRequest> parse_start_request(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  StartRequest r;
  const Json* p = member(*j, "process");
  if (p == nullptr || !p->is_object()) return bad("process", "is missing (the command to start)");
  auto cmd = get_string(*p, "cmd");
  if (!cmd) return tl::unexpected(cmd.error());
  if (cmd->empty()) return bad("process.cmd", "is empty (the program to run)");
  r.process.cmd = std::move(*cmd);
  if (const Json* args = member(*p, "args")) {
    if (!args->is_array()) return bad("process.args", "must be an array of strings");
    for (const Json& a : *args) {
      if (!a.is_string()) return bad("process.args", "must be an array of strings");
      r.process.args.push_back(a.get<std::string>());
    }
  }
  if (const Json* envs = member(*p, "envs")) {
    if (!envs->is_object()) return bad("process.envs", "must be an object of strings");
    for (auto it = envs->begin(); it != envs->end(); ++it) {
      if (!it->is_string()) return bad("process.envs." + it.key(), "must be a string");
      r.process.envs.emplace_back(it.key(), it->get<std::string>());
    }
  }
  auto cwd = get_optional_string(*p, "cwd");
  if (!cwd) return tl::unexpected(cwd.error());
  r.process.cwd = *cwd;
  if (const Json* pty = member(*j, "pty")) {
    auto size = read_pty(*pty);
    if (!size) return tl::unexpected(size.error());
    r.pty = *size;
  }
  auto tag = get_optional_string(*j, "tag");
  if (!tag) return tl::unexpected(tag.error());
  r.tag = *tag;
  auto in = get_bool(*j, "stdin");
  if (!in) return tl::unexpected(in.error());
  r.stdin = *in;
  return r;
}

Result<ProcessSelector> parse_selector_request(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  return read_selector(*j);
}

namespace {

// {"input": {"stdin": b64} | {"pty": b64}} of `holder` (SendInput, and
// StreamInput's data); `where` prefixes the field named in errors.
Status read_input(const Json& holder, const std::string& where, std::string* data, bool* pty) {
  const Json* input = member(holder, "input");
  if (input == nullptr || !input->is_object())
    return bad(where + "input", "is missing ({\"stdin\": \"<base64>\"})");
  if (const Json* s = member(*input, "stdin")) {
    auto b = get_bytes(*s, where + "input.stdin");
    if (!b) return tl::unexpected(b.error());
    *data = std::move(*b);
  } else if (const Json* t = member(*input, "pty")) {
    auto b = get_bytes(*t, where + "input.pty");
    if (!b) return tl::unexpected(b.error());
    *data = std::move(*b);
    *pty = true;
  }
  return ok();
}

}  // namespace

Result<SendInputRequest> parse_send_input(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  SendInputRequest r;
  auto sel = read_selector(*j);
  if (!sel) return tl::unexpected(sel.error());
  r.process = std::move(*sel);
  CORRAL_TRY(read_input(*j, "", &r.data, &r.pty));
  return r;
}

Result<UpdateRequest> parse_update(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  UpdateRequest r;
  auto sel = read_selector(*j);
  if (!sel) return tl::unexpected(sel.error());
  r.process = std::move(*sel);
  if (const Json* pty = member(*j, "pty")) {
    auto size = read_pty(*pty);
    if (!size) return tl::unexpected(size.error());
    r.pty = *size;
  }
  return r;
}

Result<StreamInputEvent> parse_stream_input_event(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  const Json* start = member(*j, "start");
  const Json* data = member(*j, "data");
  const Json* keepalive = member(*j, "keepalive");
  if ((start != nullptr) + (data != nullptr) + (keepalive != nullptr) != 1)
    return bad("event", "must be exactly one of start, data and keepalive");
  StreamInputEvent e;
  if (start != nullptr) {
    if (!start->is_object()) return bad("start", "must be an object");
    auto sel = read_selector(*start);
    if (!sel) return tl::unexpected(sel.error());
    e.kind = StreamInputEvent::Kind::kStart;
    e.process = std::move(*sel);
  } else if (data != nullptr) {
    if (!data->is_object()) return bad("data", "must be an object");
    e.kind = StreamInputEvent::Kind::kData;
    CORRAL_TRY(read_input(*data, "data.", &e.data, &e.pty));
  } else if (!keepalive->is_object()) {
    return bad("keepalive", "must be an object");
  }
  return e;
}

Result<SendSignalRequest> parse_send_signal(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  SendSignalRequest r;
  auto sel = read_selector(*j);
  if (!sel) return tl::unexpected(sel.error());
  r.process = std::move(*sel);
  const Json* s = member(*j, "signal");
  if (s == nullptr) return bad("signal", "is missing (SIGNAL_SIGKILL or SIGNAL_SIGTERM)");
  if (s->is_string()) {
    const std::string name = s->get<std::string>();
    if (name == "SIGNAL_SIGKILL")
      r.signal = SIGKILL;
    else if (name == "SIGNAL_SIGTERM")
      r.signal = SIGTERM;
  } else if (s->is_number_integer()) {
    const auto n = s->get<std::int64_t>();
    if (n == SIGKILL || n == SIGTERM) r.signal = static_cast<int>(n);
  }
  if (r.signal == 0) return bad("signal", "must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
  return r;
}

ProcessEnd process_end(std::optional<int> exit_code, std::optional<int> signal) {
  ProcessEnd e;
  if (signal) {
    e.exited = false;
    e.exit_code = -1;
    const char* name = sigdescr_np(*signal);
    std::string text = name != nullptr ? name : ("signal " + std::to_string(*signal));
    // Go prints the description in lower case ("signal: killed").
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    e.status = "signal: " + text;
    e.error = e.status;
    return e;
  }
  e.exit_code = exit_code.value_or(-1);
  e.status = "exit status " + std::to_string(e.exit_code);
  if (e.exit_code != 0) e.error = e.status;
  return e;
}

std::string start_event_json(std::uint32_t pid) {
  return dump(Json{{"event", {{"start", {{"pid", pid}}}}}});
}

std::string data_event_json(bool is_stderr, std::string_view bytes) {
  return dump(
      Json{{"event", {{"data", {{is_stderr ? "stderr" : "stdout", api::base64_encode(bytes)}}}}}});
}

std::string pty_data_event_json(std::string_view bytes) {
  return dump(Json{{"event", {{"data", {{"pty", api::base64_encode(bytes)}}}}}});
}

std::string end_event_json(const ProcessEnd& end) {
  return dump(Json{{"event", {{"end", end_json(end)}}}});
}

std::string keepalive_event_json() { return R"({"event":{"keepalive":{}}})"; }

std::string process_list_json(const std::vector<ListedProcess>& list) {
  Json arr = Json::array();
  for (const ListedProcess& p : list) {
    Json config{{"cmd", p.config.cmd}, {"args", p.config.args}};
    if (!p.config.envs.empty()) {
      Json envs = Json::object();
      for (const auto& [k, v] : p.config.envs) envs[k] = v;
      config["envs"] = std::move(envs);
    }
    if (p.config.cwd) config["cwd"] = *p.config.cwd;
    Json item{{"config", std::move(config)}, {"pid", p.pid}};
    if (p.tag) item["tag"] = *p.tag;
    arr.push_back(std::move(item));
  }
  return dump(Json{{"processes", std::move(arr)}});
}

std::string start_request_json(const StartRequest& request) {
  Json process{{"cmd", request.process.cmd}, {"args", request.process.args}};
  if (!request.process.envs.empty()) {
    Json envs = Json::object();
    for (const auto& [k, v] : request.process.envs) envs[k] = v;
    process["envs"] = std::move(envs);
  }
  if (request.process.cwd) process["cwd"] = *request.process.cwd;
  Json j{{"process", std::move(process)}};
  if (request.stdin) j["stdin"] = *request.stdin;
  if (request.tag) j["tag"] = *request.tag;
  return dump(j);
}

std::string selector_json(std::uint32_t pid) { return dump(Json{{"process", {{"pid", pid}}}}); }

std::string send_input_json(std::uint32_t pid, std::string_view data) {
  return dump(Json{{"process", {{"pid", pid}}}, {"input", {{"stdin", api::base64_encode(data)}}}});
}

Result<ProcessEvent> parse_process_event(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  const Json* ev = member(*j, "event");
  if (ev == nullptr || !ev->is_object()) return bad("event", "is missing");
  ProcessEvent out;
  if (const Json* st = member(*ev, "start")) {
    out.kind = ProcessEvent::Kind::kStart;
    if (!st->is_object()) return bad("event.start", "must be an object");
    auto pid = get_u32(*st, "pid");
    if (!pid) return tl::unexpected(pid.error());
    out.pid = pid->value_or(0);
  } else if (const Json* data = member(*ev, "data")) {
    out.kind = ProcessEvent::Kind::kData;
    if (!data->is_object()) return bad("event.data", "must be an object");
    const Json* b = member(*data, "stdout");
    if (b == nullptr) {
      b = member(*data, "stderr");
      out.is_stderr = true;
    }
    if (b == nullptr) b = member(*data, "pty");
    if (b != nullptr) {
      auto bytes = get_bytes(*b, "event.data");
      if (!bytes) return tl::unexpected(bytes.error());
      out.data = std::move(*bytes);
    }
  } else if (const Json* end = member(*ev, "end")) {
    out.kind = ProcessEvent::Kind::kEnd;
    if (!end->is_object()) return bad("event.end", "must be an object");
    if (const Json* c = member(*end, "exitCode"); c != nullptr && c->is_number_integer())
      out.end.exit_code = static_cast<int>(c->get<std::int64_t>());
    else
      out.end.exit_code = 0;
    auto exited = get_bool(*end, "exited");
    if (!exited) return tl::unexpected(exited.error());
    out.end.exited = exited->value_or(false);
    auto status = get_string(*end, "status");
    if (!status) return tl::unexpected(status.error());
    out.end.status = std::move(*status);
    auto err = get_optional_string(*end, "error");
    if (!err) return tl::unexpected(err.error());
    out.end.error = *err;
  } else if (member(*ev, "keepalive") != nullptr) {
    out.kind = ProcessEvent::Kind::kKeepalive;
  }
  return out;
}

std::string entry_json(const EntryInfo& entry) { return dump(entry_object(entry)); }

std::string entry_answer_json(const EntryInfo& entry) {
  return dump(Json{{"entry", entry_object(entry)}});
}

std::string entries_answer_json(const std::vector<EntryInfo>& entries) {
  Json arr = Json::array();
  for (const EntryInfo& e : entries) arr.push_back(entry_object(e));
  return dump(Json{{"entries", std::move(arr)}});
}

std::string go_file_mode_string(mode_t mode) {
  std::string out;
  // Go's order of type letters: d a l T L D p S u g c t ?
  if (S_ISDIR(mode)) out += 'd';
  if (S_ISLNK(mode)) out += 'L';
  if (S_ISBLK(mode) || S_ISCHR(mode)) out += 'D';
  if (S_ISFIFO(mode)) out += 'p';
  if (S_ISSOCK(mode)) out += 'S';
  if (mode & S_ISUID) out += 'u';
  if (mode & S_ISGID) out += 'g';
  if (S_ISCHR(mode)) out += 'c';
  if (mode & S_ISVTX) out += 't';
  if (out.empty()) out += '-';
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) out += (mode & (1u << (8 - i))) ? rwx[i] : '-';
  return out;
}

Result<std::string> parse_path_request(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  return get_required_string(*j, "path");
}

Result<ListDirRequest> parse_list_dir(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  ListDirRequest r;
  auto path = get_required_string(*j, "path");
  if (!path) return tl::unexpected(path.error());
  r.path = std::move(*path);
  auto depth = get_u32(*j, "depth");
  if (!depth) return tl::unexpected(depth.error());
  if (*depth && **depth > 0) r.depth = **depth;
  return r;
}

Result<MoveRequest> parse_move(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  MoveRequest r;
  auto src = get_string(*j, "source");
  if (!src) return tl::unexpected(src.error());
  auto dst = get_string(*j, "destination");
  if (!dst) return tl::unexpected(dst.error());
  if (src->empty()) return bad("source", "is missing or empty");
  if (dst->empty()) return bad("destination", "is missing or empty");
  r.source = std::move(*src);
  r.destination = std::move(*dst);
  return r;
}

Result<WatchDirRequest> parse_watch_dir(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  WatchDirRequest r;
  auto path = get_required_string(*j, "path");
  if (!path) return tl::unexpected(path.error());
  r.path = std::move(*path);
  auto rec = get_bool(*j, "recursive");
  if (!rec) return tl::unexpected(rec.error());
  r.recursive = rec->value_or(false);
  return r;
}

std::string watch_start_json() { return R"({"start":{}})"; }

namespace {

Json fs_event(std::string_view name, FsEventType type) {
  const char* names[] = {"EVENT_TYPE_UNSPECIFIED", "EVENT_TYPE_CREATE", "EVENT_TYPE_WRITE",
                         "EVENT_TYPE_REMOVE",      "EVENT_TYPE_RENAME", "EVENT_TYPE_CHMOD"};
  return Json{{"name", std::string(name)}, {"type", names[static_cast<int>(type)]}};
}

}  // namespace

std::string watch_event_json(std::string_view name, FsEventType type) {
  return dump(Json{{"filesystem", fs_event(name, type)}});
}

Result<std::string> parse_watcher_id(std::string_view json) {
  auto j = parse_object(json);
  if (!j) return tl::unexpected(j.error());
  return get_required_string(*j, "watcherId");
}

std::string watcher_created_json(std::string_view watcher_id) {
  return dump(Json{{"watcherId", std::string(watcher_id)}});
}

std::string watcher_events_json(const std::vector<FsEvent>& events) {
  Json list = Json::array();
  for (const FsEvent& e : events) list.push_back(fs_event(e.name, e.type));
  return dump(Json{{"events", std::move(list)}});
}

std::string watch_keepalive_json() { return R"({"keepalive":{}})"; }

std::string rfc3339_ms(std::int64_t unix_ms) { return api::format_time_ms(unix_ms); }

}  // namespace corral::e2b
