// SandboxProvider: the one interface business code uses to run work in
// sandboxes (REQUIREMENTS.md P1), with two implementations chosen by
// configuration, not by code (P2):
//   - RemoteProvider (sdk/remote_provider.h): a `corral serve` daemon over
//     HTTP, on its unix socket or on TCP with an API key;
//   - LocalProvider (sdk/local_provider.h): the same engine in-process, no
//     daemon.
//
//   std::unique_ptr<SandboxProvider> p = ...;          // either one
//   auto id = p->create({});                            // default limits
//   p->put_file(*id, "/workspace/job.py", script);
//   api::ExecRequest run;
//   run.argv = {"python3", "/workspace/job.py"};
//   auto r = p->exec(*id, run);                         // r->exit_code, r->stdout_data
//   auto out = p->get_file(*id, "/workspace/out.json");
//   p->destroy(*id);
//
// Every call returns a Result: errors of the daemon's API (docs/api.md)
// keep their message and hint, and their stable code maps to an ErrorCode
// (see error_from_api). An exec whose command failed is not an error: the
// result says how it ended (exit_code, signal, timed_out).
//
// Both providers are thread-safe: calls from several threads run at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_model.h"
#include "base/result.h"

namespace corral::sdk {

// Fills buf with up to cap bytes; returns how many, 0 at the end.
using ByteSource = std::function<Result<std::size_t>(char* buf, std::size_t cap)>;
// Takes the next piece of a file being downloaded.
using ByteSink = std::function<Status(std::string_view data)>;
// Takes each chunk of a streamed exec's output as it arrives
// (stream is api::ExecEvent::kStdout or kStderr).
using OutputSink = std::function<void(api::ExecEvent::Kind stream, std::string_view data)>;

// An ApiError as an Error: message and hint kept (the field, when there is
// one and the message does not name it, is added to the message), and the
// code mapped: not_found -> kNotFound; bad_json, unknown_field, wrong_type,
// invalid_value, method_not_allowed, unsupported_media_type ->
// kInvalidArgument; path_escape, secret_file, unauthorized -> kPermissionDenied;
// idempotency_mismatch -> kAlreadyExists; conflict, unavailable, self_check_failed ->
// kUnavailable; over_capacity, insufficient_storage, body_too_large ->
// kResourceExhausted; request_timeout, sandbox_expired -> kTimeout;
// setup_failed -> kSystem; anything else -> kInternal.
Error error_from_api(const api::ApiError& error);

// The exit status a shell would show for a finished exec: 124 when its
// timeout fired, 128+N when signal N ended it, else its exit code (126/127
// when it could not be executed / was not found, 125 when corral could not
// start it).
int exit_status_of(const api::ExecResult& result);

class SandboxProvider {
 public:
  virtual ~SandboxProvider() = default;

  // ---- the five calls of P1 ----------------------------------------------

  // Creates and starts a sandbox; returns its id ("sb-..."). The request's
  // spec.argv is ignored (commands come with exec).
  Result<std::string> create(const api::CreateSandboxRequest& request);
  // Runs a command and waits for it. Outputs are kept up to
  // request.max_output_bytes per stream (then cut, *_truncated set).
  virtual Result<api::ExecResult> exec(std::string_view id, const api::ExecRequest& request) = 0;
  // Writes a file inside the sandbox (created or truncated; parent
  // directories must exist), owned by the sandbox's user.
  Result<api::UploadResult> put_file(std::string_view id, std::string_view path,
                                     std::string_view data, std::uint32_t mode = 0644);
  // Reads a whole file into memory; a file larger than max_bytes is an
  // error (kResourceExhausted: use get_file_to_fd for big files).
  Result<std::string> get_file(std::string_view id, std::string_view path,
                               std::uint64_t max_bytes = std::uint64_t{256} << 20);
  // Destroys a sandbox and its writable layer. OK for a sandbox already
  // destroyed; an error for an unknown id, and when the teardown left
  // something on the host (the message lists it).
  Status destroy(std::string_view id);

  // ---- the same with more control ----------------------------------------

  // Create with an idempotency key (a retry with the same key returns the
  // same sandbox); the full description of the sandbox.
  virtual Result<api::SandboxInfo> create_sandbox(const api::CreateSandboxRequest& request,
                                                  std::optional<std::string> idempotency_key) = 0;
  // Runs a command and hands each chunk of its output to `sink` while it
  // runs. The result carries no outputs.
  virtual Result<api::ExecResult> exec_stream(std::string_view id,
                                              const api::ExecRequest& request,
                                              const OutputSink& sink) = 0;
  // Uploads from a stream with bounded memory. `length`, when known, is
  // checked against what the source produces.
  virtual Result<api::UploadResult> put_file_from(std::string_view id, std::string_view path,
                                                  const ByteSource& source,
                                                  std::optional<std::uint64_t> length,
                                                  std::uint32_t mode) = 0;
  // Downloads with bounded memory; returns the byte count.
  virtual Result<std::uint64_t> get_file_to(std::string_view id, std::string_view path,
                                            const ByteSink& sink) = 0;
  // Downloads into an open file descriptor (written from its offset).
  Result<std::uint64_t> get_file_to_fd(std::string_view id, std::string_view path, int fd);
  // State, spec, live usage and timestamps of one sandbox.
  virtual Result<api::SandboxInfo> inspect(std::string_view id) = 0;
  // Sandboxes not yet cleaned (all of them with include_cleaned).
  virtual Result<std::vector<api::SandboxInfo>> list(bool include_cleaned) = 0;
  // Destroys and returns the final description: state "cleaned", or
  // "failed" with `residue` naming what the teardown left.
  virtual Result<api::SandboxInfo> destroy_sandbox(std::string_view id) = 0;
};

}  // namespace corral::sdk
