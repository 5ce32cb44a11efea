// Reads a tar (+ any filter libarchive knows, zstd here) back for tests of
// failure snapshots (D4): each member's type, name, link target, mode and
// content, in archive order. An independent reader of what the archiver
// wrote: libarchive's read side, never the writer's own state.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <string>
#include <string_view>
#include <vector>

namespace corral::test {

struct TarMember {
  std::string name;
  char type = '?';  // 'f' file, 'd' dir, 'l' symlink, 'h' hard link, '?' other
  std::string link;
  unsigned mode = 0;
  long long mtime = 0;
  std::string content;
};

// Empty with `error` set when the bytes are not a complete archive.
inline std::vector<TarMember> read_tar(std::string_view bytes, std::string* error = nullptr) {
  std::vector<TarMember> out;
  archive* a = archive_read_new();
  archive_read_support_filter_zstd(a);
  archive_read_support_format_tar(a);
  if (archive_read_open_memory(a, bytes.data(), bytes.size()) != ARCHIVE_OK) {
    if (error) *error = archive_error_string(a) ? archive_error_string(a) : "open failed";
    archive_read_free(a);
    return {};
  }
  archive_entry* e = nullptr;
  int r;
  while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
    TarMember m;
    m.name = archive_entry_pathname(e);
    auto t = archive_entry_filetype(e);
    m.type = t == AE_IFREG ? 'f' : t == AE_IFDIR ? 'd' : t == AE_IFLNK ? 'l' : '?';
    if (archive_entry_hardlink(e)) m.type = 'h';
    if (archive_entry_symlink(e)) m.link = archive_entry_symlink(e);
    m.mode = archive_entry_perm(e);
    m.mtime = archive_entry_mtime(e);
    char buf[65536];
    la_ssize_t n;
    while ((n = archive_read_data(a, buf, sizeof buf)) > 0) m.content.append(buf, n);
    if (n < 0) {
      if (error) *error = archive_error_string(a) ? archive_error_string(a) : "data";
      archive_read_free(a);
      return {};
    }
    out.push_back(std::move(m));
  }
  if (r != ARCHIVE_EOF) {
    if (error) *error = archive_error_string(a) ? archive_error_string(a) : "header";
    out.clear();
  }
  archive_read_free(a);
  return out;
}

// The whole decompressed stream (the tar bytes, headers and all), for a
// test that searches every byte, not only the members' contents.
inline std::string decompress(std::string_view bytes) {
  std::string out;
  archive* a = archive_read_new();
  archive_read_support_filter_zstd(a);
  archive_read_support_format_raw(a);
  archive_entry* e = nullptr;
  if (archive_read_open_memory(a, bytes.data(), bytes.size()) == ARCHIVE_OK &&
      archive_read_next_header(a, &e) == ARCHIVE_OK) {
    char buf[65536];
    la_ssize_t n;
    while ((n = archive_read_data(a, buf, sizeof buf)) > 0) out.append(buf, n);
  }
  archive_read_free(a);
  return out;
}

}  // namespace corral::test
