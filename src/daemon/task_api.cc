// Handlers of /v1/tasks (docs/tasks.md, docs/api.md "Tasks"): submit,
// list, get (with ?wait= long-poll), cancel, output download, command log.
#include <algorithm>
#include <cctype>

#include "api/base64.h"
#include "api/task_model.h"
#include "base/sha256.h"
#include "base/strings.h"
#include "daemon/api_context.h"
#include "daemon/task_service.h"
#include "http/multipart.h"
#include "spec/units.h"

namespace corral::daemon {

namespace {

constexpr std::chrono::milliseconds kMaxWait{60'000};
// A replay's body is a few options (a network object at most).
constexpr std::size_t kMaxReplayBody = 1 << 20;

// The namespace a request acts in. Until API keys carry namespaces (issue
// 15's volumes work adds ApiRequest::ns), every caller is in "default":
// this is the one place that changes then.
std::string request_ns(const ApiRequest& r) { return r.ns; }

TaskService* tasks_or_fail(ApiContext& ctx, ApiRequest& r) {
  if (ctx.tasks == nullptr)
    send_error(r.out, api::make_api_error(api::ApiErrorCode::kUnavailable,
                                          "this daemon runs no task service"));
  return ctx.tasks;
}

std::string task_json(const TaskRecord& t, bool with_request) {
  return api::to_json(TaskService::info_of(t, with_request));
}

// "?wait=30s" (or seconds), at most 60 s.
std::optional<std::chrono::milliseconds> wait_param(ApiRequest& r) {
  auto v = r.query_value("wait");
  if (!v) return std::chrono::milliseconds(0);
  if (*v == "0") return std::chrono::milliseconds(0);
  auto d = parse_duration(*v);
  if (!d) {
    send_error(r.out,
               api::make_api_error(api::ApiErrorCode::kInvalidValue, "wait: " + d.error().message,
                                   "wait", "a duration such as 30s, at most 60s"));
    return std::nullopt;
  }
  return std::min(*d, kMaxWait);
}

std::optional<std::uint64_t> parse_count(std::string_view s) {
  if (s.empty() || s.size() > 9 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit((unsigned char)c); }))
    return std::nullopt;
  return std::stoull(std::string(s));
}

constexpr std::string_view kFormHint =
    "send multipart/form-data whose first part is \"task\" (the JSON request) and whose other "
    "parts are the bytes that inputs name with \"content_part\"";

// The answer to a submit: 202 for a new task (or a new attempt), 200 with
// Corral-Task-Replayed for a repeat. With ?wait= the answer waits (as GET's
// long-poll) until the task has finished or the wait has passed: a new task
// that has finished by then is 200 with its Location, so a client submits
// and learns the result in one request.
void send_submitted(TaskService& tasks, ApiRequest& r,
                    const ApiResult<TaskService::Submitted>& submitted,
                    std::chrono::milliseconds wait) {
  if (!submitted) return send_error(r.out, submitted.error());
  TaskRecord task = submitted->task;
  if (wait.count() > 0 && !is_finished(task.status)) {
    // The task is stored and queued whatever happens here: a failed wait
    // answers with the task as submitted.
    if (auto waited = tasks.wait(request_ns(r), task.id, wait)) task = std::move(*waited);
  }
  const std::string json = task_json(task, true);
  if (submitted->created || submitted->retried) {
    (void)r.out.send(
        is_finished(task.status) ? 200 : 202,
        {{"content-type", "application/json"}, {"location", "/v1/tasks/" + submitted->task.id}},
        json);
    return;
  }
  (void)r.out.send(200, {{"content-type", "application/json"}, {"corral-task-replayed", "true"}},
                   json);
}

api::ApiError bad_form(std::string message, std::string hint = {}) {
  return api::make_api_error(api::ApiErrorCode::kInvalidValue, "multipart body: " + message, "",
                             hint.empty() ? std::string(kFormHint) : hint);
}

// POST /v1/tasks as multipart/form-data (docs/api.md "Raw bytes: a
// multipart submit"): the first part, "task", is the JSON request; every
// other part is the raw bytes of an input ("content_part") or of the stdin
// ("stdin_part"). No base64 and no JSON string of the bytes.
void submit_form(TaskService& tasks, ApiRequest& r, std::string_view content_type,
                 std::chrono::milliseconds wait) {
  auto boundary = http::form_data_boundary(content_type);
  if (!boundary)
    return send_error(r.out, bad_form(boundary.error().message, boundary.error().hint));
  auto body = read_body(r, tasks.config().max_body);
  if (!body) return send_error(r.out, body.error());
  http::FormLimits limits;
  limits.max_parts = api::kMaxTaskInputs + 2;  // the task, each input, the stdin
  auto parts = http::parse_form_data(*body, *boundary, limits);
  if (!parts) return send_error(r.out, bad_form(parts.error().message, parts.error().hint));
  const http::FormPart& task = parts->front();
  if (task.name != "task")
    return send_error(r.out, bad_form("the first part is " + quote_for_message(task.name) +
                                      ", not \"task\" (the JSON request)"));
  if (!task.content_type.empty() &&
      task.content_type.substr(0, task.content_type.find(';')) != "application/json")
    return send_error(r.out,
                      bad_form("the \"task\" part is " + quote_for_message(task.content_type) +
                               ", not application/json"));
  api::TaskContentParts bytes;
  for (std::size_t i = 1; i < parts->size(); ++i) {
    const http::FormPart& p = (*parts)[i];
    if (!bytes.emplace(p.name, p.body).second || p.name == "task")
      return send_error(r.out, bad_form("two parts are named " + quote_for_message(p.name)));
  }
  send_submitted(tasks, r, tasks.submit(request_ns(r), task.body, &bytes), wait);
}

}  // namespace

void handle_submit_task(ApiContext& ctx, ApiRequest& r) {
  TaskService* tasks = tasks_or_fail(ctx, r);
  if (tasks == nullptr) return;
  auto wait = wait_param(r);  // refused before the body is read
  if (!wait) return;
  if (auto ct = r.head.header("content-type"); ct && http::is_form_data(*ct))
    return submit_form(*tasks, r, *ct, *wait);
  auto body = read_json_body(r, tasks->config().max_body);
  if (!body) return send_error(r.out, body.error());
  send_submitted(*tasks, r, tasks->submit(request_ns(r), *body), *wait);
}

// POST /v1/tasks/{id}/replay (T2; docs/tasks.md "Replay"): 202 with the
// new task, 200 for a repeat of the same explicit id and body.
void handle_replay_task(ApiContext& ctx, ApiRequest& r) {
  TaskService* tasks = tasks_or_fail(ctx, r);
  if (tasks == nullptr) return;
  auto body = read_json_body(r, kMaxReplayBody);
  if (!body) return send_error(r.out, body.error());
  auto replayed = tasks->replay(request_ns(r), r.params[0], *body);
  if (!replayed) return send_error(r.out, replayed.error());
  const std::string json = task_json(replayed->task, true);
  if (replayed->created || replayed->retried) {
    (void)r.out.send(
        202, {{"content-type", "application/json"}, {"location", "/v1/tasks/" + replayed->task.id}},
        json);
    return;
  }
  (void)r.out.send(200, {{"content-type", "application/json"}, {"corral-task-replayed", "true"}},
                   json);
}

void handle_list_tasks(ApiContext& ctx, ApiRequest& r) {
  TaskService* tasks = tasks_or_fail(ctx, r);
  if (tasks == nullptr) return;
  TaskFilter filter;
  filter.ns = request_ns(r);
  auto bad = [&](std::string field, std::string message) {
    send_error(r.out, api::make_api_error(api::ApiErrorCode::kInvalidValue, field + ": " + message,
                                          field));
  };
  for (const auto& [key, value] : r.query) {
    if (key == "status") {
      std::size_t start = 0;
      while (start <= value.size()) {
        std::size_t comma = value.find(',', start);
        std::string name =
            value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        auto st = parse_task_status(name);
        if (!st)
          return bad("status", "\"" + name +
                                   "\" is not a status (queued, running, succeeded, failed, "
                                   "timed_out, cancelled)");
        filter.statuses.push_back(*st);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (key == "created_after" || key == "created_before") {
      auto ms = api::parse_time_ms(value);
      if (!ms) return bad(key, "is not a time (RFC 3339 UTC, or unix milliseconds)");
      (key == "created_after" ? filter.created_after_ms : filter.created_before_ms) = *ms;
    } else if (key == "limit") {
      auto n = parse_count(value);
      if (!n || *n < 1 || *n > 1000) return bad("limit", "is a count from 1 to 1000");
      filter.limit = *n;
    } else if (key == "cursor") {
      filter.cursor = value;
    } else {
      return bad(key,
                 "is not a filter of GET /v1/tasks (status, created_after, created_before, "
                 "limit, cursor)");
    }
  }
  auto page = tasks->list(filter);
  if (!page) return send_error(r.out, page.error());
  std::vector<api::TaskInfo> shown;
  for (const auto& t : page->tasks) shown.push_back(TaskService::info_of(t, false));
  send_json(r.out, 200, api::to_json(shown, page->next_cursor));
}

void handle_get_task(ApiContext& ctx, ApiRequest& r) {
  TaskService* tasks = tasks_or_fail(ctx, r);
  if (tasks == nullptr) return;
  auto wait = wait_param(r);
  if (!wait) return;
  auto t = wait->count() > 0 ? tasks->wait(request_ns(r), r.params[0], *wait)
                             : tasks->get(request_ns(r), r.params[0]);
  if (!t) return send_error(r.out, t.error());
  send_json(r.out, 200, task_json(*t, true));
}

void handle_cancel_task(ApiContext& ctx, ApiRequest& r) {
  TaskService* tasks = tasks_or_fail(ctx, r);
  if (tasks == nullptr) return;
  auto t = tasks->cancel(request_ns(r), r.params[0]);
  if (!t) return send_error(r.out, t.error());
  send_json(r.out, 202, task_json(*t, false));
}

void handle_task_output(ApiContext& ctx, ApiRequest& r) {
  TaskService* tasks = tasks_or_fail(ctx, r);
  if (tasks == nullptr) return;
  auto t = tasks->get(request_ns(r), r.params[0]);
  if (!t) return send_error(r.out, t.error());
  auto n = parse_count(r.params[1]);
  if (!n || *n >= t->outputs.size() || !t->outputs[*n].present || t->outputs[*n].object_key.empty())
    return send_error(
        r.out, api::make_api_error(api::ApiErrorCode::kNotFound,
                                   "task " + t->id + " has no stored output " + r.params[1], "",
                                   "GET /v1/tasks/{id} lists its outputs and which are present"));
  const TaskOutputRecord& o = t->outputs[*n];
  if (tasks->objects() == nullptr)
    return send_error(r.out, api::make_api_error(api::ApiErrorCode::kUnavailable,
                                                 "this daemon has no object store"));
  auto head = tasks->objects()->head(o.object_key);
  if (!head) return send_error(r.out, api::to_api_error(head.error()));
  if (head->sha256 != o.sha256)
    return send_error(r.out, api::make_api_error(api::ApiErrorCode::kInternal,
                                                 "output " + r.params[1] + " of task " + t->id +
                                                     " changed in the object store since it was "
                                                     "collected"));
  Sha256::Digest digest{};
  for (std::size_t i = 0; i < digest.size(); ++i)
    digest[i] = static_cast<std::uint8_t>(std::stoi(o.sha256.substr(2 * i, 2), nullptr, 16));
  const std::string b64 = api::base64_encode(
      std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
  (void)r.out.start(200,
                    {{"content-type", "application/octet-stream"},
                     {"digest", "sha-256=" + b64},
                     {"x-corral-sha256", o.sha256}},
                    head->size);
  if (r.head.method == "HEAD") return;
  auto sent = tasks->objects()->get(o.object_key, [&](std::span<const char> chunk) -> Status {
    if (!r.out.write(std::string_view(chunk.data(), chunk.size())))
      return make_error(ErrorCode::kSystem, "the client went away");
    return ok();
  });
  if (sent) (void)r.out.finish();
  // Otherwise the connection ends short of Content-Length: the client
  // sees a truncated transfer, never a wrong body.
}

void handle_task_log(ApiContext& ctx, ApiRequest& r) {
  TaskService* tasks = tasks_or_fail(ctx, r);
  if (tasks == nullptr) return;
  auto t = tasks->get(request_ns(r), r.params[0]);
  if (!t) return send_error(r.out, t.error());
  const bool follow = query_flag(r, "follow");
  (void)r.out.start(200, {{"content-type", "application/x-ndjson"}, {"cache-control", "no-store"}},
                    std::nullopt);
  if (r.head.method == "HEAD") return;
  auto emit = [&](std::string_view stream, std::string_view data) -> bool {
    return r.out
        .write(api::exec_output_json(
                   stream == "stdout" ? api::ExecEvent::kStdout : api::ExecEvent::kStderr, data) +
               "\n")
        .has_value();
  };
  auto end = tasks->stream_log(request_ns(r), r.params[0], follow, emit,
                               [&] { return r.out.peer_gone(); });
  if (end) {
    api::TaskInfo info = TaskService::info_of(*end, false);
    std::string line = "{\"type\":\"" + std::string(is_finished(end->status) ? "exit" : "status") +
                       "\",\"task\":" + api::to_json(info) + "}\n";
    (void)r.out.write(line);
  }
  (void)r.out.finish();
}

}  // namespace corral::daemon
