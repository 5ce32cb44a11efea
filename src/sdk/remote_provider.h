// RemoteProvider: SandboxProvider over the HTTP API of a `corral serve`
// daemon (docs/api.md), on its unix socket (root only, no key) or on TCP
// with an API key (Authorization: Bearer). The CLI client verbs (`corral
// create|ls|inspect|exec|cp|rm`) use it too.
//
// Connections are kept alive and pooled: calls from several threads run at
// once, each on a connection of its own. File transfers stream with bounded
// memory in both directions; exec_stream reads the daemon's NDJSON event
// stream and hands each chunk to the sink as it arrives.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "api/task_model.h"
#include "http/http_client.h"
#include "sdk/sandbox_provider.h"

namespace corral::sdk {

// A filter of list_tasks (GET /v1/tasks): every field optional.
struct TaskQuery {
  std::vector<std::string> statuses;  // queued, running, succeeded, failed, timed_out, cancelled
  std::optional<std::int64_t> created_after_ms;  // unix milliseconds
  std::optional<std::int64_t> created_before_ms;
  std::optional<std::size_t> limit;   // 1..1000 a page; the daemon's default is 100
  std::optional<std::string> cursor;  // the next_cursor of the page before
};

struct RemoteOptions {
  // "unix:/run/corral/corral.sock" or "http://127.0.0.1:7070" (see
  // http::Endpoint::parse).
  std::string url = "unix:/run/corral/corral.sock";
  // Sent as a bearer token when set (needed on TCP, ignored on the socket).
  std::string api_key;
  // Connect timeout, and the longest wait for any one read or write of a
  // request that does not run a command. Execs wait as long as their
  // command runs (its own timeout bounds it on the daemon's side).
  std::chrono::milliseconds timeout{30000};
};

class RemoteProvider : public SandboxProvider {
 public:
  // Checks the URL; connects on the first call.
  static Result<std::unique_ptr<RemoteProvider>> open(RemoteOptions options);
  // The options from the environment: CORRAL_URL (default the unix socket
  // under run_dir()) and CORRAL_API_KEY.
  static RemoteOptions options_from_environment();

  Result<api::SandboxInfo> create_sandbox(const api::CreateSandboxRequest& request,
                                          std::optional<std::string> idempotency_key) override;
  Result<api::ExecResult> exec(std::string_view id, const api::ExecRequest& request) override;
  Result<api::ExecResult> exec_stream(std::string_view id, const api::ExecRequest& request,
                                      const OutputSink& sink) override;
  Result<api::UploadResult> put_file_from(std::string_view id, std::string_view path,
                                          const ByteSource& source,
                                          std::optional<std::uint64_t> length,
                                          std::uint32_t mode) override;
  Result<std::uint64_t> get_file_to(std::string_view id, std::string_view path,
                                    const ByteSink& sink) override;
  Result<api::SandboxInfo> inspect(std::string_view id) override;
  Result<std::vector<api::SandboxInfo>> list(bool include_cleaned) override;
  Result<api::SandboxInfo> destroy_sandbox(std::string_view id) override;

  // ---- tasks (docs/tasks.md; the Python SDK's Client has the same calls) --
  // A task runs a command once in a fresh sandbox under an id the client
  // chooses (D6): submitting the same request again returns the stored
  // task and never runs the command twice; another request under the same
  // id is refused (409 conflict, kAlreadyExists) naming the first field
  // that differs.

  // POST /v1/tasks: the task as accepted (queued or further), or the
  // stored one for a repeat. With `wait` > 0 the daemon answers once the
  // task has finished or the wait (at most 60 s) has passed.
  Result<api::TaskInfo> submit_task(const api::TaskRequest& request,
                                    std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // GET /v1/tasks/{id}; with `wait` > 0 the daemon answers once the task
  // has finished or the wait (at most 60 s) has passed. kNotFound for an
  // unknown id.
  Result<api::TaskInfo> get_task(std::string_view id,
                                 std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // Long-polls until the task has finished, for `timeout` at most (none:
  // as long as it takes); returns the task as it is then, finished or not.
  Result<api::TaskInfo> wait_task(std::string_view id,
                                  std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // submit_task (waiting up to 30 s in the submit itself, so a short task
  // takes one request), then wait_task: the finished task (see
  // TaskInfo::ok; a failed task is a result, not an error: its reason and
  // detail say why).
  Result<api::TaskInfo> run_task(
      const api::TaskRequest& request,
      std::optional<std::chrono::milliseconds> wait_timeout = std::nullopt);
  // GET /v1/tasks: one page, newest first, without the requests. Pass the
  // page's next_cursor as query.cursor for the next one (none: the end).
  Result<api::TaskPage> list_tasks(const TaskQuery& query = {});
  // POST /v1/tasks/{id}/cancel: ends a queued or running task; a finished
  // one is kUnavailable (409) naming its status.
  Result<api::TaskInfo> cancel_task(std::string_view id);
  // GET /v1/tasks/{id}/outputs/{n} into `sink`; returns the byte count.
  // The bytes are hashed as they pass and checked against the sha256 the
  // daemon sends (X-Corral-Sha256): a different or missing one is an error
  // (kSystem) found after the last byte reached the sink, so a sink that
  // writes a file must discard it when the call fails.
  Result<std::uint64_t> download_task_output(std::string_view id, std::size_t n,
                                             const ByteSink& sink);
  // The same into memory; an output over max_bytes is kResourceExhausted.
  Result<std::string> task_output(std::string_view id, std::size_t n,
                                  std::uint64_t max_bytes = std::uint64_t{256} << 20);

  // One request with a JSON body (or none): the body of a 2xx answer, or
  // the API error as an Error (error_from_api). For routes the typed calls
  // do not cover (files/stat, processes, ...) and for raw JSON output.
  Result<std::string> call(std::string_view method, std::string_view target,
                           std::string_view json_body = {}, const http::Headers& headers = {});

  // GET of a byte resource (a snapshot archive, ...) into `sink`; the
  // answer's headers in `response_headers` if given. An answer shorter than
  // its Content-Length is an error.
  Result<std::uint64_t> download(std::string_view target, const ByteSink& sink,
                                 http::Headers* response_headers = nullptr);

  const http::Endpoint& endpoint() const { return endpoint_; }

 private:
  RemoteProvider(http::Endpoint endpoint, RemoteOptions options)
      : endpoint_(std::move(endpoint)), options_(std::move(options)) {}
  // A pooled connection, returned to the pool by the guard.
  class Lease;
  Result<Lease> lease();
  // call() with another io timeout (a long-poll waits longer); the API
  // error as the daemon sent it in `refusal` too, if given, for a call
  // whose codes mean more than error_from_api's table says (submit_task).
  Result<std::string> call_waiting(std::chrono::milliseconds io_timeout, std::string_view method,
                                   std::string_view target, std::string_view json_body = {},
                                   const http::Headers& headers = {},
                                   api::ApiError* refusal = nullptr);
  http::Headers with_auth(http::Headers headers) const;
  // Reads an error response's body into an Error (and into `refusal`).
  Error read_error(http::Client& client, const http::ResponseHead& head,
                   api::ApiError* refusal = nullptr);

  http::Endpoint endpoint_;
  RemoteOptions options_;
  std::mutex mu_;
  std::vector<http::Client> idle_;
};

// "/v1/sandboxes/<id>" with the id percent-encoded.
std::string sandbox_path(std::string_view id);
// "/v1/tasks/<id>" with the id percent-encoded.
std::string task_path(std::string_view id);
// Checks a downloaded task output's sha256 (lowercase hex, as computed)
// against the X-Corral-Sha256 header the daemon sent with it.
Status check_output_sha256(std::string_view computed, const http::Headers& response_headers,
                           std::string_view what);

}  // namespace corral::sdk
