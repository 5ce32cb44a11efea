// Reading a failure snapshot back: see layer_unpacker.h.
#include "snapshot/layer_unpacker.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <memory>
#include <string_view>
#include <vector>

namespace corral::snapshot {

namespace {

struct ReaderCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ReaderPtr = std::unique_ptr<archive, ReaderCloser>;

constexpr std::size_t kMaxPathBytes = 4096;
constexpr std::size_t kMaxNameBytes = 255;
constexpr std::string_view kRootPrefix = "rootfs/";

Error archive_error(archive* a, std::string_view step) {
  const char* why = archive_error_string(a);
  return Error{ErrorCode::kInvalidArgument,
               "reading the snapshot archive: " + std::string(step) + ": " +
                   (why != nullptr ? why : "unknown error"),
               ""};
}

}  // namespace

std::string sandbox_path_of_member(std::string_view member) {
  if (!member.starts_with(kRootPrefix)) return {};
  std::string_view rest = member.substr(kRootPrefix.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty() || rest.size() > kMaxPathBytes || rest.front() == '/') return {};
  if (rest.find('\0') != std::string_view::npos) return {};
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = rest.find('/', start);
    const std::string_view part =
        rest.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty() || part == "." || part == ".." || part.size() > kMaxNameBytes) return {};
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return std::string(rest);
}

Result<UnpackReport> unpack_layer(int fd, const UnpackLimits& limits, const EntryVisitor& visit) {
  ReaderPtr a(archive_read_new());
  if (!a) return make_error(ErrorCode::kResourceExhausted, "archive_read_new failed");
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_zstd(a.get());
  if (archive_read_open_fd(a.get(), fd, 256 * 1024) != ARCHIVE_OK)
    return tl::unexpected(archive_error(a.get(), "open"));
  UnpackReport report;
  std::uint64_t seen = 0;
  for (;;) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) return tl::unexpected(archive_error(a.get(), "header"));
    if (++seen > limits.max_entries)
      return make_error(ErrorCode::kResourceExhausted,
                        "the snapshot has more than " + std::to_string(limits.max_entries) +
                            " entries");
    const char* name = archive_entry_pathname(e);
    UnpackedEntry entry;
    entry.path = sandbox_path_of_member(name != nullptr ? name : "");
    const mode_t type = archive_entry_filetype(e);
    const bool hardlink = archive_entry_hardlink(e) != nullptr;
    if (entry.path.empty() || hardlink ||
        (type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK)) {
      if (name == nullptr || std::string_view(name) != "corral-snapshot.json") ++report.skipped;
      continue;
    }
    entry.mode = static_cast<std::uint32_t>(archive_entry_perm(e)) & 0777;
    if (type == AE_IFDIR) {
      entry.kind = UnpackedEntry::Kind::kDirectory;
    } else if (type == AE_IFLNK) {
      entry.kind = UnpackedEntry::Kind::kSymlink;
      const char* target = archive_entry_symlink(e);
      entry.link_target = target != nullptr ? target : "";
    } else {
      entry.kind = UnpackedEntry::Kind::kFile;
      const la_int64_t size = archive_entry_size(e);
      entry.size = size > 0 ? static_cast<std::uint64_t>(size) : 0;
    }
    ContentReader reader = [&](const ChunkSink& sink) -> Status {
      if (entry.kind != UnpackedEntry::Kind::kFile) return ok();
      std::vector<char> buf(256 * 1024);
      for (;;) {
        const la_ssize_t n = archive_read_data(a.get(), buf.data(), buf.size());
        if (n == 0) return ok();
        if (n < 0) return tl::unexpected(archive_error(a.get(), "content of " + entry.path));
        report.content_bytes += static_cast<std::uint64_t>(n);
        if (report.content_bytes > limits.max_total_bytes)
          return make_error(ErrorCode::kResourceExhausted,
                            "the snapshot holds more than " +
                                std::to_string(limits.max_total_bytes) + " bytes of files");
        CORRAL_TRY(sink(std::span<const char>(buf.data(), static_cast<std::size_t>(n))));
      }
    };
    CORRAL_TRY(visit(entry, reader));
    // What the visitor did not read, archive_read_next_header skips.
    ++report.entries;
  }
  return report;
}

}  // namespace corral::snapshot
