// archive_layer: see layer_archiver.h. One Walker per archive; it owns the
// libarchive writer, the scratch file and the budgets.
#include "snapshot/layer_archiver.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>

#include "base/fs.h"
#include "base/json_string.h"
#include "base/unique_fd.h"

namespace corral::snapshot {
namespace {

constexpr std::size_t kChunk = 256 * 1024;
constexpr std::size_t kMaxListedSkips = 1000;
constexpr std::size_t kMemoryHold = 4 << 20;

struct ArchiveCloser {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryFreer {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};
using EntryPtr = std::unique_ptr<archive_entry, EntryFreer>;

// stat_at with the times too (base's mask leaves them out), never
// following a symlink.
int stat_entry(int dirfd, const char* name, FileStat* st) {
  int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
  return statx(dirfd, name, flags, STATX_BASIC_STATS | STATX_MNT_ID, &st->stx);
}

class Walker {
 public:
  Walker(const ArchiveRequest& request, ArchiveReport& report)
      : request_(request), report_(report), buf_(kChunk, '\0') {}

  Status start(int out_fd) {
    writer_.reset(archive_write_new());
    if (!writer_) return make_error(ErrorCode::kSystem, "archive_write_new: out of memory");
    // pax: long names, large sizes and sub-second mtimes without limits.
    if (archive_write_set_format_pax_restricted(writer_.get()) != ARCHIVE_OK ||
        archive_write_add_filter_zstd(writer_.get()) != ARCHIVE_OK)
      return archive_failure("setting up tar + zstd");
    std::string level = std::to_string(request_.limits.zstd_level);
    if (archive_write_set_filter_option(writer_.get(), "zstd", "compression-level",
                                        level.c_str()) != ARCHIVE_OK)
      return archive_failure("zstd compression-level");
    // zstd's own worker threads: compression overlaps the walk.
    if (request_.limits.zstd_threads > 1) {
      std::string threads = std::to_string(request_.limits.zstd_threads);
      (void)archive_write_set_filter_option(writer_.get(), "zstd", "threads", threads.c_str());
    }
    // Whole blocks are written as they fill; no padding of the last one
    // beyond what tar needs.
    archive_write_set_bytes_in_last_block(writer_.get(), 1);
    if (archive_write_open_fd(writer_.get(), out_fd) != ARCHIVE_OK)
      return archive_failure("opening the output");
    return ok();
  }

  Status walk(const ArchiveSource& source) {
    FileStat top{};
    if (stat_entry(source.dir_fd, "", &top) != 0) return errno_error("statx(snapshot source)");
    return walk_dir(source, source.dir_fd, top, "", 0);
  }

  Status finish(std::string_view manifest) {
    CORRAL_TRY(write_bytes_member("corral-snapshot.json", manifest, 0644));
    if (archive_write_close(writer_.get()) != ARCHIVE_OK) return archive_failure("closing");
    return ok();
  }

 private:
  Status archive_failure(std::string_view step) {
    const char* why = writer_ ? archive_error_string(writer_.get()) : nullptr;
    int err = writer_ ? archive_errno(writer_.get()) : 0;
    Error e{err == ENOSPC || err == EDQUOT ? ErrorCode::kResourceExhausted : ErrorCode::kSystem,
            "libarchive: " + std::string(step) + ": " + (why ? why : "unknown error"), {}, err};
    return tl::unexpected<Error>(std::move(e));
  }

  std::string redacted(std::string_view text) {
    if (request_.redaction == nullptr || request_.redaction->empty()) return std::string(text);
    return secrets::redact(*request_.redaction, text);
  }

  void skip(const std::string& path, std::string why) {
    report_.skipped_count++;
    if (report_.skipped.size() < kMaxListedSkips)
      report_.skipped.push_back({redacted(path), std::move(why)});
  }

  void partial(std::string reason) {
    report_.partial = true;
    for (const auto& r : report_.partial_reasons)
      if (r == reason) return;
    report_.partial_reasons.push_back(std::move(reason));
  }

  bool excluded(const ArchiveSource& source, const std::string& rel) const {
    for (const auto& e : source.exclude)
      if (rel == e) return true;
    return false;
  }

  // Counts one entry; false once max_files is reached (the walk stops).
  bool take_slot() {
    if (stopped_) return false;
    if (report_.files + report_.dirs + report_.symlinks >= request_.limits.max_files) {
      partial("max_files (" + std::to_string(request_.limits.max_files) + ") reached");
      stopped_ = true;
      return false;
    }
    return true;
  }

  EntryPtr entry_for(const std::string& name, const FileStat& st) {
    EntryPtr e(archive_entry_new());
    archive_entry_copy_pathname(e.get(), name.c_str());
    archive_entry_set_mode(e.get(), st.stx.stx_mode);
    archive_entry_set_uid(e.get(), st.stx.stx_uid);
    archive_entry_set_gid(e.get(), st.stx.stx_gid);
    archive_entry_set_mtime(e.get(), st.stx.stx_mtime.tv_sec, st.stx.stx_mtime.tv_nsec);
    return e;
  }

  Status write_header(archive_entry* e) {
    if (archive_write_header(writer_.get(), e) != ARCHIVE_OK) return archive_failure("header");
    return ok();
  }

  Status write_data(const char* p, std::size_t n) {
    while (n > 0) {
      la_ssize_t w = archive_write_data(writer_.get(), p, n);
      if (w <= 0) return archive_failure("data");
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return ok();
  }

  Status write_bytes_member(const std::string& name, std::string_view bytes, mode_t mode) {
    EntryPtr e(archive_entry_new());
    archive_entry_copy_pathname(e.get(), name.c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), mode);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(bytes.size()));
    CORRAL_TRY(write_header(e.get()));
    return write_data(bytes.data(), bytes.size());
  }

  Status walk_dir(const ArchiveSource& source, int dir_fd, const FileStat& dir_st,
                  const std::string& rel, std::uint32_t depth) {
    if (!rel.empty()) {
      if (!take_slot()) return ok();
      auto e = entry_for(redacted(source.prefix + rel) + "/", dir_st);
      CORRAL_TRY(write_header(e.get()));
      report_.dirs++;
    }
    if (depth >= request_.limits.max_depth) {
      partial("max_depth (" + std::to_string(request_.limits.max_depth) + ") reached");
      skip(source.prefix + rel, "too deep");
      return ok();
    }
    // A second fd for readdir: fdopendir takes ownership of it.
    int dup_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup_fd < 0) return errno_error("openat(" + redacted(source.prefix + rel) + ")");
    std::unique_ptr<DIR, int (*)(DIR*)> dir(fdopendir(dup_fd), closedir);
    if (!dir) {
      close(dup_fd);
      return errno_error("fdopendir");
    }
    while (!stopped_) {
      errno = 0;
      dirent* d = readdir(dir.get());
      if (d == nullptr) {
        if (errno != 0) return errno_error("readdir(" + redacted(source.prefix + rel) + ")");
        break;
      }
      std::string name = d->d_name;
      if (name == "." || name == "..") continue;
      std::string child = rel.empty() ? name : rel + "/" + name;
      if (excluded(source, child)) continue;
      CORRAL_TRY(visit(source, dir_fd, dir_st, name, child, depth));
    }
    return ok();
  }

  Status visit(const ArchiveSource& source, int dir_fd, const FileStat& dir_st,
               const std::string& name, const std::string& child, std::uint32_t depth) {
    std::string shown = source.prefix + child;
    if (shown.size() > request_.limits.max_path) {
      partial("a path longer than max_path (" + std::to_string(request_.limits.max_path) + ")");
      skip(shown.substr(0, 256), "path too long");
      return ok();
    }
    FileStat st{};
    if (stat_entry(dir_fd, name.c_str(), &st) != 0) {
      skip(shown, std::string("vanished (") + std::string(errno_name(errno)) + ")");
      return ok();
    }
    dev_t dev = makedev(st.stx.stx_dev_major, st.stx.stx_dev_minor);
    for (dev_t sealed : request_.sealed_devices)
      if (dev == sealed) return ok();  // the secrets tmpfs: not even its name
    mode_t type = st.stx.stx_mode & S_IFMT;
    if (type == S_IFDIR) {
      if (crosses_mount(dir_st, st)) {
        skip(shown, "mount point");
        return ok();
      }
      int fd = openat(dir_fd, name.c_str(),
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        skip(shown, std::string("unreadable dir (") + std::string(errno_name(errno)) + ")");
        return ok();
      }
      UniqueFd sub(fd);
      FileStat opened{};
      // Swapped for another dir or a mount between statx and openat.
      if (stat_entry(sub.get(), "", &opened) != 0 || opened.stx.stx_ino != st.stx.stx_ino ||
          crosses_mount(dir_st, opened)) {
        skip(shown, "changed while read");
        return ok();
      }
      return walk_dir(source, sub.get(), opened, child, depth + 1);
    }
    if (type == S_IFLNK) return add_symlink(dir_fd, name, shown, st);
    if (type == S_IFREG) return add_file(dir_fd, name, shown, st);
    if (type == S_IFCHR && st.stx.stx_rdev_major == 0 && st.stx.stx_rdev_minor == 0) {
      skip(shown, "whiteout");  // overlayfs: the file was deleted from the image
    } else if (type == S_IFCHR || type == S_IFBLK) {
      skip(shown, "device");
    } else if (type == S_IFIFO) {
      skip(shown, "fifo");
    } else if (type == S_IFSOCK) {
      skip(shown, "socket");
    } else {
      skip(shown, "unknown type");
    }
    return ok();
  }

  Status add_symlink(int dir_fd, const std::string& name, const std::string& shown,
                     const FileStat& st) {
    if (!take_slot()) return ok();
    std::string target(4096, '\0');
    ssize_t n = readlinkat(dir_fd, name.c_str(), target.data(), target.size());
    if (n < 0) {
      skip(shown, "unreadable symlink");
      return ok();
    }
    target.resize(static_cast<std::size_t>(n));
    auto e = entry_for(redacted(shown), st);
    archive_entry_copy_symlink(e.get(), redacted(target).c_str());
    archive_entry_set_size(e.get(), 0);
    CORRAL_TRY(write_header(e.get()));
    report_.symlinks++;
    return ok();
  }

  Status scratch_file() {
    if (scratch_) {
      if (ftruncate(scratch_.get(), 0) != 0) return errno_error("ftruncate(scratch)");
      if (lseek(scratch_.get(), 0, SEEK_SET) != 0) return errno_error("lseek(scratch)");
      return ok();
    }
    int fd = open(request_.scratch_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
      return errno_error("open(" + request_.scratch_dir + ", O_TMPFILE)", errno,
                         "the snapshot's scratch space must be a writable directory");
    scratch_.reset(fd);
    return ok();
  }

  // The redacted content stays in memory up to kMemoryHold bytes (most
  // files), and only a larger file goes through the scratch file.
  Status to_scratch(std::string_view bytes) {
    if (bytes.empty()) return ok();
    if (!spilled_ && held_.size() + bytes.size() <= kMemoryHold) {
      held_.append(bytes);
      return ok();
    }
    if (!spilled_) {
      CORRAL_TRY(scratch_file());
      spilled_ = true;
      if (!held_.empty()) CORRAL_TRY(write_all(scratch_.get(), held_, "snapshot scratch file"));
      held_.clear();
    }
    return write_all(scratch_.get(), bytes, "snapshot scratch file");
  }

  // The content, redacted, into the scratch file; then the header with the
  // redacted size, then the scratch file's bytes.
  Status add_file(int dir_fd, const std::string& name, const std::string& shown,
                  const FileStat& st) {
    if (!take_slot()) return ok();
    int fd = openat(dir_fd, name.c_str(),
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      skip(shown, std::string("unreadable (") + std::string(errno_name(errno)) + ")");
      return ok();
    }
    UniqueFd file(fd);
    FileStat opened{};
    if (stat_entry(file.get(), "", &opened) != 0 || !opened.is_reg() ||
        opened.stx.stx_ino != st.stx.stx_ino) {
      skip(shown, "changed while read");
      return ok();
    }
    held_.clear();
    spilled_ = false;
    std::optional<secrets::RedactStream> stream;
    if (request_.redaction != nullptr && !request_.redaction->empty())
      stream.emplace(request_.redaction);
    std::string out;
    bool cut = false;
    for (;;) {
      std::uint64_t left = request_.limits.max_total_bytes - report_.content_bytes;
      if (left == 0) {
        char probe;
        if (read(file.get(), &probe, 1) > 0) cut = true;
        break;
      }
      std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, left));
      ssize_t n = read(file.get(), buf_.data(), want);
      if (n < 0) {
        if (errno == EINTR) continue;
        skip(shown, std::string("read failed (") + std::string(errno_name(errno)) + ")");
        cut = true;
        break;
      }
      if (n == 0) break;
      report_.content_bytes += static_cast<std::uint64_t>(n);
      std::string_view chunk(buf_.data(), static_cast<std::size_t>(n));
      if (stream) {
        out.clear();
        stream->feed(chunk, out);
        CORRAL_TRY(to_scratch(out));
      } else {
        CORRAL_TRY(to_scratch(chunk));
      }
    }
    if (stream) {
      out.clear();
      stream->finish(out);
      CORRAL_TRY(to_scratch(out));
      report_.redactions += stream->redactions();
    }
    if (cut) {
      partial("max_total_bytes (" + std::to_string(request_.limits.max_total_bytes) +
              ") reached: files cut short");
      skip(shown, "cut at the byte budget");
    }
    off_t size = static_cast<off_t>(held_.size());
    if (spilled_) {
      size = lseek(scratch_.get(), 0, SEEK_CUR);
      if (size < 0 || lseek(scratch_.get(), 0, SEEK_SET) != 0) return errno_error("lseek(scratch)");
    }
    auto e = entry_for(redacted(shown), opened);
    archive_entry_set_size(e.get(), size);
    CORRAL_TRY(write_header(e.get()));
    if (!spilled_) {
      CORRAL_TRY(write_data(held_.data(), held_.size()));
    } else {
      for (off_t done = 0; done < size;) {
        ssize_t n = read(scratch_.get(), buf_.data(), buf_.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return errno_error("read(scratch)");
        CORRAL_TRY(write_data(buf_.data(), static_cast<std::size_t>(n)));
        done += n;
      }
    }
    report_.files++;
    return ok();
  }

  const ArchiveRequest& request_;
  ArchiveReport& report_;
  std::unique_ptr<archive, ArchiveCloser> writer_;
  UniqueFd scratch_;
  std::string held_;      // the current file's redacted content, if small
  bool spilled_ = false;  // ... else it is in scratch_
  std::string buf_;
  bool stopped_ = false;
};

std::string manifest_text(const ArchiveRequest& request, const ArchiveReport& report) {
  std::string m = "{";
  if (!request.manifest_fields.empty()) m += request.manifest_fields + ",";
  m += "\"format\":1,\"files\":" + std::to_string(report.files) +
       ",\"dirs\":" + std::to_string(report.dirs) +
       ",\"symlinks\":" + std::to_string(report.symlinks) +
       ",\"content_bytes\":" + std::to_string(report.content_bytes) +
       ",\"redactions\":" + std::to_string(report.redactions) +
       ",\"partial\":" + (report.partial ? "true" : "false") + ",\"partial_reasons\":[";
  for (std::size_t i = 0; i < report.partial_reasons.size(); ++i) {
    if (i) m += ",";
    append_json_string_lossy(m, report.partial_reasons[i]);
  }
  m += "],\"skipped_count\":" + std::to_string(report.skipped_count) + ",\"skipped\":[";
  for (std::size_t i = 0; i < report.skipped.size(); ++i) {
    if (i) m += ",";
    m += "{\"path\":";
    append_json_string_lossy(m, report.skipped[i].path);
    m += ",\"why\":";
    append_json_string_lossy(m, report.skipped[i].why);
    m += "}";
  }
  m += "]}\n";
  return m;
}

}  // namespace

Result<ArchiveReport> archive_layer(const ArchiveRequest& request, int out_fd) {
  ArchiveReport report;
  Walker walker(request, report);
  CORRAL_TRY_CTX(walker.start(out_fd), "writing the snapshot archive");
  for (const auto& source : request.sources)
    CORRAL_TRY_CTX(walker.walk(source), "archiving " + source.prefix);
  std::string manifest = manifest_text(request, report);
  if (request.redaction != nullptr && !request.redaction->empty())
    manifest = secrets::redact(*request.redaction, manifest);
  CORRAL_TRY_CTX(walker.finish(manifest), "writing the snapshot archive");
  return report;
}

}  // namespace corral::snapshot
