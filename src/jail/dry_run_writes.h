// Dry-run (X2, docs/dry-run.md, ADR 0016): what a sandbox wrote, read
// back from overlay upper dirs after the command. Every writable place of
// a dry-run sandbox is an overlay whose upper dir lives in the writable
// layer: the root file system, /tmp, /dev/shm, and each writable mount or
// volume. Comparing an upper dir with its lower says what was created,
// modified and deleted (an overlay whiteout is a deletion); the host copy
// (the lower) never changed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corral {

// A file in an upper dir before the sandbox started (what the planner
// wrote: /etc/passwd, /etc/hosts, ...), so it is not reported.
struct BaselineEntry {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  ino_t ino = 0;
};
using WriteBaseline = std::map<std::string, BaselineEntry>;

struct WriteChange {
  enum class Kind { kCreated, kModified, kDeleted };
  Kind kind = Kind::kCreated;
  std::string path;  // absolute, inside the sandbox
  std::string type;  // "file", "dir", "symlink", "other"
  std::uint64_t size = 0;  // bytes: the new size; for a deletion the old one
  std::optional<std::string> diff;  // small text files only
  bool redacted = false;  // a side held a secret value: no diff
};

// One overlay: `target` is where the sandbox saw it ("/" for the root).
struct WriteArea {
  std::string target;
  std::string kind;  // "layer" (root, /tmp, /dev/shm) or "mount" (a writable mount or volume)
};

struct DryRunWrites {
  std::vector<WriteChange> changes;
  bool truncated = false;  // more changes than kMaxReportedChanges
  std::uint64_t created = 0, modified = 0, deleted = 0;  // counted even past the bound
  std::uint64_t bytes_written = 0;                        // created + modified sizes
  std::vector<WriteArea> areas;
};

inline constexpr std::size_t kMaxReportedChanges = 1000;
inline constexpr std::uint64_t kMaxDiffFileBytes = 64 * 1024;
inline constexpr std::size_t kMaxDiffBytes = 8 * 1024;

// Returns true when `text` holds a secret value (the daemon's redactor).
using SecretCheck = std::function<bool(std::string_view text)>;

// Every file under `upper_fd` (recursive), for the baseline.
WriteBaseline snapshot_upper(int upper_fd);

// Adds to `out` what the upper dir `upper_fd` holds over the lower dir
// `lower_fd` (-1: none, everything is created), reported under `target`.
// Never follows a symlink of either tree; bounded in depth and entries.
void collect_writes(int upper_fd, int lower_fd, const std::string& target,
                    const WriteBaseline* baseline, const SecretCheck& has_secret,
                    DryRunWrites& out);

// A writable mount made an overlay: where the sandbox sees it, its host
// source (an O_PATH fd, only ever read) and its upper dir in the layer.
struct DryMountArea {
  std::string target;
  int source_fd = -1;
  std::string upper;  // relative to the layer root ("dry/N/upper")
};

// Everything a dry-run sandbox wrote: the layer's upper dir over the root
// lower (`root_lower_fd`, minus `root_baseline`), its tmp and shm dirs, and
// each writable mount's upper over its source. `layer_root_fd`: the
// writable layer's root. Used after a `corral run` command and on request
// for a daemon's live sandbox.
DryRunWrites collect_layer_writes(int layer_root_fd, int root_lower_fd,
                                  const std::vector<DryMountArea>& mounts,
                                  const WriteBaseline* root_baseline,
                                  const SecretCheck& has_secret);

const char* change_kind_name(WriteChange::Kind kind);

// "would write 3 files (12 KiB) under /workspace, would delete /data/x".
std::string summarize_writes(const DryRunWrites& writes);

}  // namespace corral
