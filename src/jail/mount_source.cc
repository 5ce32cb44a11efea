#include "jail/mount_source.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>

#include "sys/syscalls.h"

namespace corral {

namespace {

// Lexically normalizes an absolute path: collapses "//" and "/./".
// Returns false if the path has a ".." component.
bool normalize(const std::string& in, std::string& out) {
  out.clear();
  size_t i = 0;
  while (i < in.size()) {
    while (i < in.size() && in[i] == '/') ++i;
    size_t j = in.find('/', i);
    if (j == std::string::npos) j = in.size();
    std::string part = in.substr(i, j - i);
    i = j;
    if (part.empty() || part == ".") continue;
    if (part == "..") return false;
    out += "/" + part;
  }
  if (out.empty()) out = "/";
  return true;
}

std::string absolute(const std::string& path, const std::string& cwd) {
  return path.empty() || path[0] == '/' ? path : cwd + "/" + path;
}

}  // namespace

Result<OpenedMount> open_mount_source(const MountSpec& mount,
                                      const std::vector<std::string>& allowed_roots,
                                      const std::string& cwd) {
  std::string src;
  if (!normalize(absolute(mount.source, cwd), src)) {
    return make_error(ErrorCode::kPermissionDenied,
                      "mount source \"" + mount.source + "\" contains \"..\"",
                      "give the path without \"..\" components");
  }
  for (const std::string& root_in : allowed_roots) {
    std::string root;
    if (!normalize(absolute(root_in, cwd), root)) continue;
    std::string rel;
    if (src == root) {
      rel = ".";
    } else if (root == "/") {
      rel = src.substr(1);
    } else if (src.size() > root.size() && src.compare(0, root.size(), root) == 0 &&
               src[root.size()] == '/') {
      rel = src.substr(root.size() + 1);
    } else {
      continue;
    }
    UniqueFd root_fd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd) return errno_error("open(mount root " + root + ")");
    UniqueFd fd(sys::openat2(root_fd.get(), rel.c_str(), O_PATH | O_CLOEXEC, 0,
                             RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS));
    if (!fd) {
      if (errno == EXDEV) {
        return make_error(ErrorCode::kPermissionDenied,
                          "mount source \"" + mount.source + "\" leads outside the mount root " +
                              root + " through a symlink",
                          "mount the real directory, below an allowed --mount-root");
      }
      return errno_error("open(mount source " + src + ")", errno,
                         "the --mount source must exist on the host");
    }
    struct stat st;
    if (fstat(fd.get(), &st) != 0) return errno_error("fstat(" + src + ")");
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
      return make_error(ErrorCode::kPermissionDenied,
                        "mount source \"" + mount.source + "\" is neither a directory nor a file");
    }
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
      return make_error(ErrorCode::kPermissionDenied,
                        "mount source \"" + mount.source + "\" is a hard-linked file",
                        "a hard link may lead outside the mount root; copy the file instead");
    }
    OpenedMount opened;
    opened.fd = std::move(fd);
    opened.is_dir = S_ISDIR(st.st_mode);
    opened.source = src;
    opened.target = mount.target;
    opened.writable = mount.writable;
    return opened;
  }
  std::string roots;
  for (const auto& r : allowed_roots) roots += (roots.empty() ? "" : ", ") + r;
  return make_error(ErrorCode::kPermissionDenied,
                    "mount source \"" + src + "\" is outside the allowed mount roots (" + roots +
                        ")",
                    "run corral from a directory that contains it, or add --mount-root DIR");
}

}  // namespace corral
