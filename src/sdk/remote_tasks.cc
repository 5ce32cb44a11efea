// RemoteProvider's task calls (remote_provider.h; docs/tasks.md,
// REQUIREMENTS.md D6): submit, get (long-poll), wait, run, list, cancel and
// verified output downloads. The wire types and their one codec are
// api/task_model.h's: this file only builds targets and reads answers.
#include <algorithm>

#include "base/sha256.h"
#include "http/multipart.h"
#include "sdk/remote_provider.h"

namespace corral::sdk {

namespace {

// The longest single long-poll the daemon grants (docs/tasks.md).
constexpr std::chrono::milliseconds kLongPoll{30'000};
constexpr std::chrono::milliseconds kMaxDaemonWait{60'000};

std::string join(const std::vector<std::string>& items, char sep) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

template <typename T>
Result<T> parsed(Result<std::string> body, Result<T> (*parse)(std::string_view)) {
  if (!body) return tl::unexpected(std::move(body).error());
  auto value = parse(*body);
  if (!value) return tl::unexpected(std::move(value).error().wrap("reading the daemon's answer"));
  return value;
}

}  // namespace

std::string task_path(std::string_view id) { return "/v1/tasks/" + http::percent_encode(id); }

Status check_output_sha256(std::string_view computed, const http::Headers& response_headers,
                           std::string_view what) {
  auto sent = http::find_header(response_headers, "x-corral-sha256");
  if (!sent || sent->empty())
    return make_error(ErrorCode::kSystem,
                      std::string(what) +
                          " came without an X-Corral-Sha256 header: it cannot be "
                          "checked",
                      "is the URL a corral daemon (or a proxy that drops headers)?");
  std::string want(*sent);
  std::transform(want.begin(), want.end(), want.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (want != computed)
    return make_error(ErrorCode::kSystem,
                      std::string(what) + " arrived with sha256 " + std::string(computed) +
                          ", not the stored " + want,
                      "the bytes changed on the way; download it again");
  return ok();
}

// Inline bytes (and the stdin) go as raw parts of a multipart body, not as
// base64 in the JSON (docs/tasks.md "Raw bytes: a multipart submit").
Result<api::TaskInfo> RemoteProvider::submit_task(const api::TaskRequest& request,
                                                  std::chrono::milliseconds wait) {
  std::vector<http::FormPart> parts{{"task", std::nullopt, "application/json", {}}};
  for (std::size_t i = 0; i < request.inputs.size(); ++i)
    if (request.inputs[i].source == api::TaskInput::Source::kContent)
      parts.push_back({api::task_input_part(i), std::nullopt, "application/octet-stream",
                       request.inputs[i].content});
  if (!request.stdin_data.empty())
    parts.push_back({"stdin", std::nullopt, "application/octet-stream", request.stdin_data});
  std::string body_text, json;
  http::Headers headers;
  if (parts.size() == 1) {
    body_text = api::to_request_json(request);
  } else {
    json = api::to_request_json(request, true);
    parts.front().body = json;
    std::vector<std::string_view> bodies;
    for (const auto& p : parts) bodies.push_back(p.body);
    const std::string boundary = http::new_form_boundary(bodies);
    body_text = http::write_form_data(parts, boundary);
    headers.push_back({"content-type", "multipart/form-data; boundary=" + boundary});
  }
  api::ApiError refusal;
  wait = std::clamp(wait, std::chrono::milliseconds(0), kMaxDaemonWait);
  // The daemon may hold the answer back for up to `wait`.
  std::string path = "/v1/tasks";
  if (wait.count() > 0) path += "?wait=" + std::to_string(wait.count()) + "ms";
  auto body = call_waiting(options_.timeout + wait, "POST", path, body_text, headers, &refusal);
  // A submit's 409 conflict always means that the id is taken: by a task
  // with another request, or by another namespace's. That is kAlreadyExists
  // (a named thing exists and would be overwritten), not error_from_api's
  // kUnavailable, which stands for the other 409s: a target whose state
  // refuses the request (a destroyed sandbox, an ended process, a finished
  // task's cancel).
  if (!body && refusal.is(api::ApiErrorCode::kConflict))
    body.error().code = ErrorCode::kAlreadyExists;
  return parsed(std::move(body), api::parse_task_info);
}

Result<api::TaskInfo> RemoteProvider::get_task(std::string_view id,
                                               std::chrono::milliseconds wait) {
  if (wait.count() <= 0) return parsed(call("GET", task_path(id)), api::parse_task_info);
  wait = std::min(wait, kMaxDaemonWait);
  // The daemon holds the answer back for up to `wait`: the read waits that
  // much longer than any other.
  return parsed(call_waiting(options_.timeout + wait, "GET",
                             task_path(id) + "?wait=" + std::to_string(wait.count()) + "ms"),
                api::parse_task_info);
}

Result<api::TaskInfo> RemoteProvider::wait_task(std::string_view id,
                                                std::optional<std::chrono::milliseconds> timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = timeout ? std::optional(Clock::now() + *timeout) : std::nullopt;
  for (;;) {
    auto slice = kLongPoll;
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      slice = std::clamp(left, std::chrono::milliseconds(0), kLongPoll);
    }
    auto task = get_task(id, slice);
    if (!task) return task;
    if (task->finished() || (deadline && Clock::now() >= *deadline)) return task;
  }
}

Result<api::TaskInfo> RemoteProvider::run_task(
    const api::TaskRequest& request, std::optional<std::chrono::milliseconds> wait_timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto first = kLongPoll;
  if (wait_timeout) first = std::clamp(*wait_timeout, std::chrono::milliseconds(0), kLongPoll);
  auto submitted = submit_task(request, first);
  if (!submitted) return submitted;
  if (submitted->finished()) return submitted;  // done in the wait, or a finished repeat
  if (!wait_timeout) return wait_task(request.id);
  auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return wait_task(request.id, std::max(*wait_timeout - spent, std::chrono::milliseconds(0)));
}

Result<api::TaskPage> RemoteProvider::list_tasks(const TaskQuery& query) {
  std::vector<std::string> params;
  if (!query.statuses.empty())
    params.push_back("status=" + http::percent_encode(join(query.statuses, ',')));
  if (query.created_after_ms)
    params.push_back("created_after=" + std::to_string(*query.created_after_ms));
  if (query.created_before_ms)
    params.push_back("created_before=" + std::to_string(*query.created_before_ms));
  if (query.limit) params.push_back("limit=" + std::to_string(*query.limit));
  if (query.cursor) params.push_back("cursor=" + http::percent_encode(*query.cursor));
  std::string target = "/v1/tasks";
  if (!params.empty()) target += "?" + join(params, '&');
  return parsed(call("GET", target), api::parse_task_page);
}

Result<api::TaskInfo> RemoteProvider::cancel_task(std::string_view id) {
  return parsed(call("POST", task_path(id) + "/cancel"), api::parse_task_info);
}

Result<std::uint64_t> RemoteProvider::download_task_output(std::string_view id, std::size_t n,
                                                           const ByteSink& sink) {
  const std::string what = "output " + std::to_string(n) + " of task " + std::string(id);
  Sha256 digest;
  http::Headers headers;
  auto total = download(
      task_path(id) + "/outputs/" + std::to_string(n),
      [&](std::string_view data) -> Status {
        digest.update(data);
        return sink(data);
      },
      &headers);
  if (!total) return tl::unexpected(std::move(total).error().wrap("downloading " + what));
  CORRAL_TRY(check_output_sha256(Sha256::hex(digest.final()), headers, what));
  return total;
}

Result<std::string> RemoteProvider::task_output(std::string_view id, std::size_t n,
                                                std::uint64_t max_bytes) {
  std::string out;
  auto total = download_task_output(id, n, [&](std::string_view data) -> Status {
    if (out.size() + data.size() > max_bytes)
      return make_error(ErrorCode::kResourceExhausted,
                        "output " + std::to_string(n) + " of task " + std::string(id) +
                            " is larger than " + std::to_string(max_bytes) + " bytes",
                        "use download_task_output with a sink that writes a file");
    out.append(data);
    return ok();
  });
  if (!total) return tl::unexpected(std::move(total).error());
  return out;
}

}  // namespace corral::sdk
