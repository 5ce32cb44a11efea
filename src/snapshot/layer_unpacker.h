// Reading a failure snapshot back (REQUIREMENTS.md T2; docs/tasks.md
// "Replay"): the tar + zstd archive layer_archiver.h wrote, entry by entry,
// for a replay that starts from the failed task's files. This reads; the
// caller writes, through the new sandbox's confined root (fs/), so that a
// name in the archive can never reach a host path.
//
// The archive is treated as hostile (the sandbox chose every name in it):
//   - only members under "rootfs/" are given out, as paths relative to the
//     sandbox's "/" ("workspace/out.txt"); the manifest and anything else
//     are skipped;
//   - a path that is absolute, empty, has an empty, "." or ".." component,
//     or is longer than 4096 bytes is skipped and counted, never given out;
//   - only directories, regular files and symlinks are given out (others
//     are counted as skipped); hard links are skipped;
//   - entries and content bytes are bounded (UnpackLimits): past a bound
//     the unpack stops with kResourceExhausted.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "base/result.h"

namespace corral::snapshot {

struct UnpackLimits {
  std::uint64_t max_entries = 100000;
  std::uint64_t max_total_bytes = 1ull << 30;  // file content, all files
};

struct UnpackedEntry {
  enum class Kind { kDirectory, kFile, kSymlink };
  Kind kind = Kind::kFile;
  std::string path;  // relative to the sandbox's "/", never empty
  std::uint32_t mode = 0;  // permission bits (0777)
  std::uint64_t size = 0;  // kFile: the content's size
  std::string link_target;  // kSymlink
};

// Reads the content of the current kFile entry in chunks, each handed to
// `sink`; an error from the sink stops the read and is returned.
using ChunkSink = std::function<Status(std::span<const char>)>;
using ContentReader = std::function<Status(const ChunkSink&)>;

// Called for each entry, in archive order (a directory before what it
// holds). An error stops the unpack and is returned.
using EntryVisitor = std::function<Status(const UnpackedEntry&, const ContentReader&)>;

struct UnpackReport {
  std::uint64_t entries = 0;   // given to the visitor
  std::uint64_t skipped = 0;   // not given out (see above)
  std::uint64_t content_bytes = 0;
};

// Reads the archive from `fd` (from its current offset).
Result<UnpackReport> unpack_layer(int fd, const UnpackLimits& limits, const EntryVisitor& visit);

// "rootfs/workspace/x" -> "workspace/x"; empty when the member is not
// under rootfs/ or its path is not safe to give out (see above).
std::string sandbox_path_of_member(std::string_view member);

}  // namespace corral::snapshot
