// envd's messages (packages `process` and `filesystem` of E2B's envd) in
// the proto3 JSON mapping the e2b SDKs send and read: lowerCamelCase names
// (the proto names are accepted too), bytes as base64, int64 as strings,
// enums by name, oneofs as the member that is set. Unknown fields are
// ignored, as protobuf's JSON readers in the SDKs do; a known field of the
// wrong type is an error naming it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace corral::e2b {

// ---- process ----------------------------------------------------------------

struct ProcessConfig {
  std::string cmd;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> envs;
  std::optional<std::string> cwd;
};

// A terminal's size (envd's PTY.Size); both at least 1, at most 65535.
struct PtySize {
  std::uint16_t cols = 80;
  std::uint16_t rows = 24;
};

struct StartRequest {
  ProcessConfig process;
  std::optional<PtySize> pty;  // a terminal was asked for, of this size
  std::optional<std::string> tag;
  std::optional<bool> stdin;  // unset: envd's default (open) for old SDKs
};
Result<StartRequest> parse_start_request(std::string_view json);

// A process by pid or by tag (exactly one).
struct ProcessSelector {
  std::optional<std::uint32_t> pid;
  std::optional<std::string> tag;
};
// {"process": {...}}: Connect, CloseStdin.
Result<ProcessSelector> parse_selector_request(std::string_view json);

struct SendInputRequest {
  ProcessSelector process;
  std::string data;
  bool pty = false;  // the input was for a terminal
};
Result<SendInputRequest> parse_send_input(std::string_view json);

// One message of StreamInput's request stream (a client stream): the
// process to write to (first), input bytes, or a keepalive.
struct StreamInputEvent {
  enum class Kind { kStart, kData, kKeepalive };
  Kind kind = Kind::kKeepalive;
  ProcessSelector process;  // kStart
  std::string data;         // kData
  bool pty = false;         // kData: the input was for a terminal
};
Result<StreamInputEvent> parse_stream_input_event(std::string_view json);

// Update: a terminal's new size.
struct UpdateRequest {
  ProcessSelector process;
  std::optional<PtySize> pty;
};
Result<UpdateRequest> parse_update(std::string_view json);

struct SendSignalRequest {
  ProcessSelector process;
  int signal = 0;  // SIGKILL or SIGTERM
};
Result<SendSignalRequest> parse_send_signal(std::string_view json);

// How a process ended, as envd says it (Go's os.ProcessState).
struct ProcessEnd {
  int exit_code = 0;  // -1 when a signal ended it
  bool exited = true;
  std::string status;                // "exit status 3", "signal: killed"
  std::optional<std::string> error;  // absent on success
};
ProcessEnd process_end(std::optional<int> exit_code, std::optional<int> signal);

// The events of Start and Connect, each a whole message.
std::string start_event_json(std::uint32_t pid);
std::string data_event_json(bool is_stderr, std::string_view bytes);
// What a terminal's process wrote ({"data": {"pty": b64}}).
std::string pty_data_event_json(std::string_view bytes);
std::string end_event_json(const ProcessEnd& end);
std::string keepalive_event_json();

struct ListedProcess {
  std::uint32_t pid = 0;
  ProcessConfig config;
  std::optional<std::string> tag;
};
std::string process_list_json(const std::vector<ListedProcess>& list);

// ---- the client's side (a provider talking to an envd) ---------------------

std::string start_request_json(const StartRequest& request);
// {"process":{"pid":N}}, with "input" for SendInput.
std::string selector_json(std::uint32_t pid);
std::string send_input_json(std::uint32_t pid, std::string_view data);

struct ProcessEvent {
  enum class Kind { kStart, kData, kEnd, kKeepalive, kUnknown } kind = Kind::kUnknown;
  std::uint32_t pid = 0;   // kStart
  bool is_stderr = false;  // kData
  std::string data;        // kData: the bytes
  ProcessEnd end;          // kEnd
};
// One message of a Start or Connect stream ({"event": {...}}).
Result<ProcessEvent> parse_process_event(std::string_view json);

// ---- filesystem ---------------------------------------------------------------

enum class FileType { kUnspecified, kFile, kDirectory, kSymlink };

struct EntryInfo {
  std::string name;
  FileType type = FileType::kUnspecified;
  std::string path;
  std::uint64_t size = 0;
  mode_t mode = 0;  // the whole st_mode (the JSON gets the permission bits)
  std::string owner;
  std::string group;
  std::int64_t modified_ms = 0;
  std::optional<std::string> symlink_target;
};
// {"name":...,"type":"FILE_TYPE_FILE",...} (a JSON object, as text).
std::string entry_json(const EntryInfo& entry);
// {"entry": {...}}
std::string entry_answer_json(const EntryInfo& entry);
std::string entries_answer_json(const std::vector<EntryInfo>& entries);

// Go's FileMode.String() of a stat mode: "-rw-r--r--", "drwxr-xr-x",
// "Lrwxrwxrwx".
std::string go_file_mode_string(mode_t mode);

// {"path": "..."}: Stat, MakeDir, Remove.
Result<std::string> parse_path_request(std::string_view json);
struct ListDirRequest {
  std::string path;
  std::uint32_t depth = 1;  // 0 is taken as 1, as envd does
};
Result<ListDirRequest> parse_list_dir(std::string_view json);
struct MoveRequest {
  std::string source;
  std::string destination;
};
Result<MoveRequest> parse_move(std::string_view json);
struct WatchDirRequest {
  std::string path;
  bool recursive = false;
};
Result<WatchDirRequest> parse_watch_dir(std::string_view json);

// WatchDir's stream: {"start":{}} first, then {"filesystem":{"name",
// "type"}} per change (name relative to the watched directory), and
// {"keepalive":{}} while nothing happens.
enum class FsEventType { kCreate = 1, kWrite = 2, kRemove = 3, kRename = 4, kChmod = 5 };
std::string watch_start_json();
std::string watch_event_json(std::string_view name, FsEventType type);
std::string watch_keepalive_json();

// The polling watchers: CreateWatcher takes what WatchDir takes and
// answers {"watcherId"}; GetWatcherEvents and RemoveWatcher take
// {"watcherId"}; GetWatcherEvents answers {"events": [{"name","type"}...]},
// the changes since the last call.
Result<std::string> parse_watcher_id(std::string_view json);
std::string watcher_created_json(std::string_view watcher_id);
struct FsEvent {
  std::string name;
  FsEventType type;
};
std::string watcher_events_json(const std::vector<FsEvent>& events);

// RFC 3339 in UTC with milliseconds: "2026-12-01T13:40:19.945Z".
std::string rfc3339_ms(std::int64_t unix_ms);

}  // namespace corral::e2b
