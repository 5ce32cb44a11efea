// Tasks on the wire (docs/tasks.md, REQUIREMENTS.md D6, C2, N7, F6): the
// POST /v1/tasks body, its canonical form (what an idempotent repeat is
// compared against) and the task as the API shows it. The same strictness
// as api_model.h: unknown fields are refused by name, every count and size
// is bounded, paths are absolute and normalized.
//
// Canonical form (to_canonical_json): every task-level field present, the
// code's defaults filled in (required true, snapshot "on_failure",
// keep_sandbox false, empty lists and maps), sizes in bytes and durations
// in milliseconds, byte strings as text when UTF-8 (else *_b64), an inline
// input's bytes as their "content_sha256" and "content_size". So `{}`
// and the explicit defaults compare equal, and "10m" equals 600000 ms.
// Defaults that come from the daemon's configuration (timeout, max_size)
// stay null when the request leaves them out: a repeat is compared with
// the first request, not with a configuration that may have changed in
// between. "sandbox" is kept as sent (keys sorted by the store): its
// defaults are the daemon's `sandbox:` config, applied when it runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "spec/sandbox_spec.h"

namespace corral::api {

inline constexpr std::size_t kMaxTaskIdBytes = 128;
inline constexpr std::size_t kMaxTaskInputs = 256;
inline constexpr std::size_t kMaxTaskOutputs = 64;
inline constexpr std::size_t kMaxTaskVolumes = 16;

// 1..128 of [A-Za-z0-9._:-] (and not "." or "..": ids name object keys).
bool valid_task_id(std::string_view id);

struct TaskInput {
  enum class Source { kContent, kObject, kVolume };
  std::string path;  // absolute, normalized, inside the sandbox
  Source source = Source::kContent;
  // kContent: the bytes ("content" or "content_b64") when held here: a
  // request as received holds them; a stored request (canonical form) has
  // only their hash and size, and the state store keeps the bytes beside
  // the task (StateStore::task_input_content), so a task's row and every
  // answer stay small however large its inputs are.
  std::string content;
  bool content_held = false;
  std::string content_sha256;  // kContent: lowercase hex of the bytes
  std::uint64_t content_size = 0;
  std::string object_key;  // kObject: an object-store key
  std::string volume;      // kVolume
  std::string volume_path;
  std::optional<std::string> sha256;  // lowercase hex; verified before the command runs
};

struct TaskOutputSpec {
  std::string path;  // absolute, normalized, inside the sandbox
  bool required = true;
  std::optional<std::uint64_t> max_size;  // empty: serve.tasks.max_output_size
};

struct TaskRequest {
  std::string id;
  // The POST /v1/sandboxes body for the task's sandbox, as JSON text
  // ("{}" when absent); checked by the daemon against its defaults.
  std::string sandbox_json = "{}";
  std::vector<TaskInput> inputs;
  std::vector<std::string> command;  // argv; empty when `sh` is given
  std::optional<std::string> sh;     // run by /bin/sh -c
  std::vector<std::pair<std::string, std::string>> env;
  std::optional<std::string> cwd;
  std::string stdin_data;
  std::optional<std::int64_t> timeout_ms;  // empty: serve.tasks.default_timeout
  std::vector<TaskOutputSpec> outputs;
  // {volume, subpath, target, writable} objects as JSON text ("[]"), handed
  // to the sandbox create as its "volumes".
  std::string volumes_json = "[]";
  std::string snapshot = "on_failure";  // on_failure | always | never
  bool keep_sandbox = false;
  // Dry-run (X2, docs/dry-run.md): the sandbox is a dry run (as its
  // "sandbox" object's "dry_run" would make it); the result has the report.
  bool dry_run = false;

  // The argv to run: `command`, or {"/bin/sh", "-c", sh}.
  std::vector<std::string> argv() const;
};

// The byte parts of a multipart/form-data submit, by part name (docs/api.md
// "Raw bytes: a multipart submit"): an input names one as "content_part",
// the stdin as "stdin_part". The views point into the request's body.
using TaskContentParts = std::map<std::string, std::string_view, std::less<>>;

// POST /v1/tasks. `max_inline_bytes` bounds the inline inputs' bytes in all.
// With `parts` (a multipart submit; `body` is its "task" part), every part
// must be named by exactly one content_part or stdin_part; without, those
// fields are refused. The bytes are the same request either way: a JSON
// submit and a multipart one of the same bytes are one task (D6).
Result<TaskRequest> parse_task_request(std::string_view body, std::uint64_t max_inline_bytes,
                                       const TaskContentParts* parts = nullptr);
// A request as stored (its canonical JSON): the same reader, without the
// per-string bound of requests.
Result<TaskRequest> parse_stored_task_request(std::string_view canonical_json);
std::string to_canonical_json(const TaskRequest& request);

// ---- replay (T2) ----------------------------------------------------------

// POST /v1/tasks/{id}/replay (docs/tasks.md "Replay"); every field optional,
// an empty body is {}:
//   {"id": "<new id>",                       // default: {id}-replay-N, the next free N
//    "network": "none" | "as_original" | {...a create's network object...},
//    "from_snapshot": false,                  // the failure snapshot's files first
//    "timeout": "10m" | 600}                  // default: the original's timeout
struct TaskReplayRequest {
  enum class Network { kNone, kAsOriginal, kExplicit };
  std::optional<std::string> id;
  Network network = Network::kNone;
  NetworkSpec network_spec;  // kExplicit only
  bool from_snapshot = false;
  std::optional<std::int64_t> timeout_ms;
};
Result<TaskReplayRequest> parse_task_replay(std::string_view body);
// Canonical: every field present ("id" null when not given, "network" a
// word or the object, "timeout_ms" in milliseconds or null); what a repeat
// with the same explicit id is compared against.
std::string to_canonical_json(const TaskReplayRequest& request);

// ---- the task as shown ---------------------------------------------------

struct TaskOutputInfo {
  std::size_t index = 0;
  std::string path;
  bool present = false;
  std::uint64_t size = 0;
  std::optional<std::string> sha256;
  std::optional<std::string> stored_at;  // object-store key
};

struct TaskInfo {
  std::string id;
  std::string ns;
  std::string status;  // queued, running, succeeded, failed, timed_out, cancelled
  std::string stage;   // none, create, initialize, execute, collect, snapshot, destroy, cleanup, done
  std::optional<std::string> reason;
  std::optional<std::string> detail;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<std::string> sandbox_id;
  // The node that holds the task (runs it, or will); null: queued for any
  // node to claim (issue 18, docs/fleet.md).
  std::optional<std::string> node;
  int attempt = 1;
  std::optional<std::string> replay_of;
  std::vector<TaskOutputInfo> outputs;
  std::optional<std::string> snapshot_id;
  std::optional<std::string> snapshot_error;
  std::int64_t created_at_ms = 0;
  std::optional<std::int64_t> started_at_ms;
  std::optional<std::int64_t> finished_at_ms;
  std::optional<std::string> request_json;  // canonical; GET of one task only
  // What replay keeps (resolved spec, image, input copies, secret names;
  // never a secret's value); GET of one task only.
  std::optional<std::string> resolved_json;
  // A dry run's report (X2, docs/dry-run.md), JSON, once collected.
  std::optional<std::string> dry_run_json;

  // succeeded, failed, timed_out or cancelled: nothing about it changes any more.
  bool finished() const {
    return status == "succeeded" || status == "failed" || status == "timed_out" ||
           status == "cancelled";
  }
  bool ok() const { return status == "succeeded"; }
};
std::string to_json(const TaskInfo& task);
// {"tasks": [...], "next_cursor": "..." | null}
std::string to_json(const std::vector<TaskInfo>& tasks, const std::optional<std::string>& cursor);
Result<TaskInfo> parse_task_info(std::string_view body);

// One page of GET /v1/tasks: newest first; next_cursor fetches the next.
struct TaskPage {
  std::vector<TaskInfo> tasks;
  std::optional<std::string> next_cursor;
};
Result<TaskPage> parse_task_page(std::string_view body);
// A POST /v1/tasks body (what a client sends): the canonical form with the
// timeout under its request name and inline inputs' bytes (which `request`
// must hold) as "content". Its canonical form is `request`'s.
// With `content_parts`, the same request as the "task" part of a multipart
// submit: input i's bytes are named "content_part": task_input_part(i), a
// non-empty stdin "stdin_part": "stdin"; the caller sends those bytes as
// the parts of those names (docs/tasks.md "Raw bytes: a multipart submit").
std::string to_request_json(const TaskRequest& request, bool content_parts = false);
std::string task_input_part(std::size_t index);

// "2026-12-01T10:00:00.123Z" (UTC) of unix milliseconds, and back (also
// accepts a plain integer of unix milliseconds).
std::string format_time_ms(std::int64_t unix_ms);
Result<std::int64_t> parse_time_ms(std::string_view text);

}  // namespace corral::api
