// The failure snapshot's archiver (REQUIREMENTS.md D4): a sandbox's
// writable layer as tar + zstd (libarchive, ADR 0012), with every secret
// filtered out on the way. User guide: docs/snapshots.md.
//
// The tree is hostile: the sandbox wrote it. So
//   - it is walked with openat(O_NOFOLLOW) from a directory fd: a symlink is
//     archived as a link (its target redacted), never followed; a mount
//     point inside the tree (the secrets tmpfs) is never entered;
//   - every regular file's content passes through the streaming redactor
//     (secrets/redactor.h) into a scratch file first, because a redacted
//     file may be shorter or longer than the original and a tar header
//     states the size up front;
//   - names and link targets pass through the redactor as well (a file may
//     be named after a secret);
//   - devices, fifos and sockets (and overlayfs whiteouts, which are 0/0
//     character devices) are not archived, only listed in the manifest;
//   - files, depth, path length and total bytes read are bounded: past a
//     bound the walk stops or skips, and the result says `partial` with the
//     reasons. A file that grows while it is read is cut at the byte budget.
// The last member, `corral-snapshot.json`, is the manifest: the caller's
// fields (task, reason, env secret NAMES), what was skipped and why.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "secrets/redactor.h"

namespace corral::snapshot {

struct ArchiveLimits {
  std::uint64_t max_files = 100000;      // entries of any kind
  std::uint32_t max_depth = 64;          // directory levels below a source
  std::uint64_t max_total_bytes = 1ull << 30;  // file content read, all files
  std::uint32_t max_path = 4096;         // bytes of an archived path
  int zstd_level = 3;
  int zstd_threads = 2;  // 1: compress on the walking thread
};

// One directory of the layer and where its content goes in the archive:
// the layer's upper/ as "rootfs/", its tmp/ as "rootfs/tmp/".
struct ArchiveSource {
  int dir_fd = -1;     // not closed here
  std::string prefix;  // "rootfs/" (ends with '/'), or "" for the top
  // Paths relative to this source never archived (not even their names):
  // "run/secrets".
  std::vector<std::string> exclude;
};

struct SkippedEntry {
  std::string path;  // redacted
  std::string why;   // "device", "fifo", "socket", "whiteout", "mount point", "path too long", ...
};

struct ArchiveReport {
  std::uint64_t files = 0, dirs = 0, symlinks = 0;
  std::uint64_t content_bytes = 0;  // read from the layer
  std::uint64_t redactions = 0;     // placeholders written
  std::vector<SkippedEntry> skipped;  // the first 1000
  std::uint64_t skipped_count = 0;
  bool partial = false;
  std::vector<std::string> partial_reasons;  // "max_files (100000) reached", ...
};

struct ArchiveRequest {
  std::vector<ArchiveSource> sources;
  // May be null (nothing to redact). Shared by threads; one stream per file.
  std::shared_ptr<const secrets::RedactionSet> redaction;
  ArchiveLimits limits;
  // Where the redacted content of one file waits for its tar header
  // (an O_TMPFILE there; nothing stays behind).
  std::string scratch_dir = "/tmp";
  // File systems never archived, not even by name (the secrets tmpfs, by
  // device, whatever path reaches it).
  std::vector<dev_t> sealed_devices;
  // JSON object members added to the manifest as they are ("task",
  // "reason", "env_secret_names", ...): the caller's, already valid JSON
  // text without the braces. Redacted too.
  std::string manifest_fields;
};

// Writes the archive to `out_fd` (from its current offset). An error is
// about the output or the scratch space (disk full, libarchive failure):
// `out_fd` then holds a part of an archive the caller must discard. Bounds
// and odd entries are not errors: the report says partial.
Result<ArchiveReport> archive_layer(const ArchiveRequest& request, int out_fd);

}  // namespace corral::snapshot
