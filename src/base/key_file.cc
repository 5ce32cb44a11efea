#include "base/key_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/fs.h"
#include "base/random.h"
#include "base/strings.h"
#include "base/unique_fd.h"

namespace corral {

Result<std::string> load_or_make_hex_file(const std::string& path, std::size_t bytes,
                                          std::string_view if_removed) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd && errno == ENOENT) {
    std::string raw(bytes, '\0');
    fill_random(raw.data(), raw.size());
    const std::string hex = to_hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
    const std::string tmp = path + ".tmp";
    (void)unlink(tmp.c_str());
    UniqueFd out(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!out) return errno_error("creating " + tmp);
    if (auto st = write_all(out.get(), hex + "\n", tmp); !st) return tl::unexpected(st.error());
    if (fsync(out.get()) != 0) return errno_error("fsync(" + tmp + ")");
    out.reset();
    if (rename(tmp.c_str(), path.c_str()) != 0) return errno_error("rename to " + path);
    fd = UniqueFd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  }
  if (!fd) return errno_error("opening " + path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return errno_error("fstat(" + path + ")");
  if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 || (st.st_uid != 0 && st.st_uid != geteuid()))
    return make_error(ErrorCode::kPermissionDenied,
                      path + " must be a regular file of root's (or the daemon's), mode 0600",
                      "chmod 600 " + path + ", or remove it to make a new one");
  auto text = read_up_to(fd.get(), 4 * bytes + 64, path);
  if (!text) return tl::unexpected(text.error());
  // The first line, without the white space an editor may have added.
  std::string hex = text->substr(0, text->find('\n'));
  while (!hex.empty() && (hex.back() == ' ' || hex.back() == '\t' || hex.back() == '\r'))
    hex.pop_back();
  hex.erase(0, hex.find_first_not_of(" \t"));
  if (hex.size() != 2 * bytes || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    return make_error(
        ErrorCode::kInvalidArgument,
        path + " does not hold " + std::to_string(2 * bytes) + " lower-case hex digits",
        "remove it: the daemon makes a new one (" + std::string(if_removed) + ")");
  return hex;
}

}  // namespace corral
