// The daemon's REST API as typed values (docs/api.md, docs/openapi.yaml):
// what a client sends and what the server answers, with one JSON codec used
// by both sides (the server, the CLI, the C++ RemoteProvider), so the two
// can never disagree. Parsing is strict: unknown fields are refused by name,
// wrong types say what was expected, every size and count is bounded.
// Parsers of responses (parse_sandbox_info, parse_exec_result, ...) check
// the type of every field they know but ignore fields they do not, so that
// a client keeps working against a newer daemon. Byte strings that need not
// be UTF-8 (outputs, stdin, file names and paths) travel as "<name>" when
// they are valid UTF-8 and as "<name>_b64" (base64) otherwise; parsers
// accept either, never both. Parsers never throw.
// nlohmann::json stays inside src/api's .cc files and its internal headers
// (json_reader.h: a heavy header). The errors are in api_error.h; the
// codecs are one file per resource (create_codec.cc, exec_codec.cc, ...).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "base/result.h"
#include "spec/sandbox_spec.h"

namespace corral::api {

// ---- sandboxes ------------------------------------------------------------

// POST /v1/sandboxes body. Every field optional; defaults are SandboxSpec's.
// {
//   "image": "debian-12",                       // omitted: the host base
//   "limits": {"memory": "512Mi" | 536870912,   // size: string with unit or bytes
//              "cpus": 1.5 | "500m", "pids": 128,
//              "disk": "1Gi" | bytes, "inodes": 100000,
//              "timeout": "30s" | 30},           // default per-command timeout;
//                                                // duration: string or seconds
//   "max_lifetime": "10m" | 600,                 // default 600 s
//   "env": {"NAME": "value", "OTHER": null},     // names [A-Za-z_][A-Za-z0-9_]*;
//                                                // merged into the defaults' env
//                                                // (same name: replaced), null
//                                                // removes a default variable
//   "mounts": [{"source": "/srv/data", "target": "/data", "writable": false}],
//   "workdir": "/workspace", "hostname": "sandbox", "root": false,
//   "network": {"mode": "none"}
// }
struct CreateSandboxRequest {
  SandboxSpec spec;  // argv stays empty
  // Names the body gave as null: removed from the defaults' env (already
  // done in spec.env), sent as null by to_json. A name that spec.env sets
  // is not sent as null.
  std::vector<std::string> env_unset;
  // The warm pool the body named ("pool", read by the API handler, not by
  // parse_create_sandbox: C4, ADR 0015); its spec is the body's base.
  std::optional<std::string> pool;
  // The placement row the stored sandbox fills (issue 18, store/placement.h):
  // set by the daemon that placed the create, never read from a body.
  std::optional<std::string> placement_id;
};
Result<CreateSandboxRequest> parse_create_sandbox(std::string_view body);
// The same on top of `defaults` (the daemon's `sandbox:` configuration):
// fields the body leaves out keep the defaults' values, and `limits` and
// `env` are merged field by field and name by name; `mounts` replaces the
// defaults' list.
Result<CreateSandboxRequest> parse_create_sandbox_over(std::string_view body,
                                                       const SandboxSpec& defaults);
std::string to_json(const CreateSandboxRequest& request);

// The spec as stored and shown (canonical, every field present, sizes in
// bytes, durations in milliseconds with "_ms" names).
std::string spec_to_json(const SandboxSpec& spec);
Result<SandboxSpec> spec_from_json(std::string_view json);

struct SandboxUsage {
  std::uint64_t memory_bytes = 0;
  std::uint64_t memory_peak_bytes = 0;
  std::uint64_t cpu_ms = 0;
  std::uint64_t pids = 0;
  std::uint64_t disk_bytes = 0;
  std::uint64_t disk_inodes = 0;
  std::uint64_t oom_kills = 0;
  std::uint64_t pids_max_hits = 0;
};

// GET /v1/sandboxes/{id} and the items of GET /v1/sandboxes.
// The network policy a live sandbox runs under, as the daemon resolved it
// (template applied, rules normalised).
struct NetworkStatus {
  std::string address;       // the sandbox's end ("10.211.0.2"); empty: loopback only
  std::string host_address;  // the host end: its proxy and DNS
  std::string mode;          // "none", "allowlist" or "open"
  std::string template_name;
  std::vector<std::string> allow;  // normalised rules
  std::vector<std::string> deny;
  std::vector<std::string> gateway;
};

// The last self-check of a live sandbox (daemon/self_check.h, T3): which
// checks ran and passed, and how long they took; never a value.
struct SelfCheckStatus {
  bool ok = true;
  std::string failed;                                // the check that failed, if one did
  std::vector<std::pair<std::string, bool>> checks;  // name, passed; in the order run
  std::int64_t took_us = 0;
};

struct SandboxInfo {
  std::string id;
  std::string state;  // sandbox_state_name(), or "lost" (its node was marked lost)
  std::string node;   // the node that runs it (issue 18)
  SandboxSpec spec;
  std::optional<SandboxUsage> usage;  // live sandboxes only
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
  std::optional<std::int64_t> expires_at_ms;
  std::optional<std::string> error;  // why it failed
  std::vector<std::string> residue;  // after destroy: what was left (must be empty)
  std::uint64_t residue_bytes = 0;
  std::optional<NetworkStatus> network;       // live sandboxes only
  std::optional<SelfCheckStatus> self_check;  // live sandboxes that were checked
};
std::string to_json(const SandboxInfo& info);
Result<SandboxInfo> parse_sandbox_info(std::string_view body);
std::string to_json(const std::vector<SandboxInfo>& list);  // {"sandboxes": [...]}
Result<std::vector<SandboxInfo>> parse_sandbox_list(std::string_view body);

// POST /v1/sandboxes/{id}/timeout: {"max_lifetime": "20m" | 1200} (from now)
// or {"extend_by": "5m" | 300}; exactly one of them.
// PUT /v1/sandboxes/{id}/network: the whole new network object (the
// create request's "network"), not a patch.
Result<NetworkSpec> parse_network_update(std::string_view body);
// A network object as the daemon stored it (to_json of a NetworkSpec).
Result<NetworkSpec> network_from_json(std::string_view json);
std::string to_json(const NetworkSpec& network);

struct ExtendRequest {
  std::optional<std::int64_t> max_lifetime_ms;
  std::optional<std::int64_t> extend_by_ms;
};
Result<ExtendRequest> parse_extend(std::string_view body);
std::string to_json(const ExtendRequest& request);

// ---- exec and processes ---------------------------------------------------

// POST /v1/sandboxes/{id}/exec and POST /v1/sandboxes/{id}/processes.
// {"argv": ["python3", "x.py"]} or {"cmd": "echo hi | wc -c"} (run by
// /bin/sh -c), exactly one; "env": {...} (added to the sandbox's env),
// "cwd": "/workspace", "stdin": "text" or "stdin_b64": "..." (exec only; at
// most 64 MiB), "timeout": "30s" | 30
// (default: the sandbox's limits.timeout), "max_output_bytes": 1048576
// (exec only: per stream; beyond it the output is cut and *_truncated set;
// at most 64 MiB), "stream": "ndjson" | "sse" (exec only; also chosen by
// the Accept header).
// A terminal's size in character cells.
struct TerminalSize {
  std::uint16_t cols = 80;
  std::uint16_t rows = 24;
};

struct ExecRequest {
  std::vector<std::string> argv;   // cmd is turned into {"/bin/sh", "-c", cmd}
  std::optional<std::string> cmd;  // as given, for display
  std::vector<std::pair<std::string, std::string>> env;
  std::optional<std::string> cwd;
  std::string stdin_data;
  std::optional<std::int64_t> timeout_ms;
  std::uint64_t max_output_bytes = 1024 * 1024;
  std::string stream;  // "", "ndjson", "sse"
  // Background processes only (the E2B facade's pty.create): the process
  // runs on a terminal of this size, its output is the terminal's.
  std::optional<TerminalSize> terminal;
};
Result<ExecRequest> parse_exec(std::string_view body);
std::string to_json(const ExecRequest& request);

// Exec result (wait mode) and the "exit" event of a stream.
struct ExecResult {
  std::optional<int> exit_code;  // set when the command exited
  std::optional<int> signal;     // set when a signal ended it
  bool timed_out = false;        // the command's own timeout fired (exit_code 124)
  std::string stdout_data;       // bytes; JSON carries valid UTF-8 as text,
  std::string stderr_data;       // anything else as "stdout_b64"/"stderr_b64"
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::int64_t duration_ms = 0;
  std::string process_id;
};
std::string to_json(const ExecResult& result);
Result<ExecResult> parse_exec_result(std::string_view body);

// One streamed event: {"type": "stdout"|"stderr", "data": "..."} (or
// "data_b64" when not UTF-8), then exactly one {"type": "exit", ...result
// fields without the outputs} or {"type": "error", "error": {...}}.
struct ExecEvent {
  enum Kind { kStdout, kStderr, kExit, kError } kind = kStdout;
  std::string data;   // kStdout/kStderr
  ExecResult result;  // kExit
  ApiError error;     // kError
};
std::string to_json(const ExecEvent& event);  // one line, no trailing newline
// The same line for a kStdout/kStderr event, without copying `data` into
// an ExecEvent first (the streamed exec's hot path).
std::string exec_output_json(ExecEvent::Kind kind, std::string_view data);
Result<ExecEvent> parse_exec_event(std::string_view line);

// Background processes.
struct ProcessInfo {
  std::string id;  // "p-" + hex
  std::string sandbox_id;
  std::vector<std::string> argv;
  std::string state;  // process_state_name()
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool timed_out = false;
  std::int64_t started_at_ms = 0;
  std::optional<std::int64_t> ended_at_ms;
  std::uint64_t stdout_bytes = 0;  // written so far (the follow offsets)
  std::uint64_t stderr_bytes = 0;
};
std::string to_json(const ProcessInfo& info);
Result<ProcessInfo> parse_process_info(std::string_view body);
std::string to_json(const std::vector<ProcessInfo>& list);  // {"processes": [...]}
Result<std::vector<ProcessInfo>> parse_process_list(std::string_view body);

// POST .../processes/{pid}/signal: {"signal": "TERM" | "SIGTERM" | 15}.
Result<int> parse_signal_request(std::string_view body);

// ---- files ----------------------------------------------------------------

// GET .../files/stat?path= and the entries of GET .../files/list?path=.
struct FileEntry {
  std::string name;
  std::string type;  // "file", "directory", "symlink", "other"
  std::uint64_t size = 0;
  std::uint32_t mode = 0;
  std::int64_t mtime_ms = 0;
  std::string link_target;
};
std::string to_json(const FileEntry& entry);
Result<FileEntry> parse_file_entry(std::string_view body);
std::string to_json(const std::vector<FileEntry>& entries,
                    bool truncated);  // {"entries": [...], "truncated": b}
Result<std::vector<FileEntry>> parse_file_list(std::string_view body, bool* truncated);

// POST .../files/mkdir: {"path": "/workspace/a/b", "parents": true, "mode": "0755" | 493}
// ("path_b64" for a path that is not UTF-8; the same for rename's "from"
// and "to", and for FileEntry's "name" and "link_target"). File API paths
// may be relative to the sandbox root (docs/file-api.md); here they only
// have to be non-empty, without NUL, at most 4096 bytes.
struct MkdirRequest {
  std::string path;
  bool parents = false;
  std::uint32_t mode = 0755;
};
Result<MkdirRequest> parse_mkdir(std::string_view body);
std::string to_json(const MkdirRequest& request);

// POST .../files/rename: {"from": "...", "to": "...", "overwrite": false}
struct RenameRequest {
  std::string from;
  std::string to;
  bool overwrite = false;
};
Result<RenameRequest> parse_rename(std::string_view body);
std::string to_json(const RenameRequest& request);

// Result of an upload (PUT .../files?path=): {"path", "bytes", "sha256"}.
struct UploadResult {
  std::string path;
  std::uint64_t bytes = 0;
  std::string sha256;
};
std::string to_json(const UploadResult& result);
Result<UploadResult> parse_upload_result(std::string_view body);

}  // namespace corral::api
