// corral cp: one file into or out of a sandbox of the daemon (docs/cli.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "cli/daemon_client.h"

namespace corral::cli {

namespace {

constexpr const char* kCpUsage =
    "usage: corral cp SRC DST\n"
    "\n"
    "Copies one regular file into or out of a sandbox. Exactly one side is\n"
    "ID:PATH (a path inside sandbox ID); the other is a local path, or - for\n"
    "stdin (upload) or stdout (download). Data streams in both directions with\n"
    "bounded memory.\n"
    "\n"
    "  corral cp ./job.py sb-0123456789ab:/workspace/      upload (into a directory)\n"
    "  corral cp - sb-0123456789ab:/workspace/in.csv < in.csv\n"
    "  corral cp sb-0123456789ab:/workspace/out.json .      download\n"
    "  corral cp sb-0123456789ab:/workspace/log.txt -       to stdout\n"
    "\n"
    "A PATH ending in / (or naming a directory) gets the other side's file name.\n"
    "An upload keeps the local file's permission bits (0644 from stdin); a\n"
    "download replaces DST only once every byte arrived. Write a local path\n"
    "that contains ':' as ./NAME.\n"
    "\n"
    "options:\n";

// ID:PATH, where ID has no '/' (so ./a:b and /x:y stay local).
struct RemotePath {
  std::string id;
  std::string path;
};
std::optional<RemotePath> remote_path(std::string_view arg) {
  std::size_t colon = arg.find(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string_view id = arg.substr(0, colon);
  if (id.find('/') != std::string_view::npos) return std::nullopt;
  return RemotePath{std::string(id), std::string(arg.substr(colon + 1))};
}

std::string base_name(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

int upload(sdk::RemoteProvider& provider, const std::string& src, RemotePath dst,
           const ClientFlags& flags) {
  if (dst.path.empty()) return flags.usage_error("the path inside " + dst.id + " is empty");
  UniqueFd file;
  int fd = STDIN_FILENO;
  std::optional<std::uint64_t> length;
  std::uint32_t mode = 0644;
  if (src != "-") {
    file = UniqueFd(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file) return command_failure(errno_error("open " + src).value());
    struct stat st;
    if (fstat(file.get(), &st) != 0) return command_failure(errno_error("stat " + src).value());
    if (!S_ISREG(st.st_mode))
      return command_failure(Error{ErrorCode::kInvalidArgument, src + " is not a regular file",
                                   "corral cp copies one file; for a directory, pipe a tar: "
                                   "tar c DIR | corral exec -i ID --sh 'tar x'",
                                   0});
    fd = file.get();
    length = static_cast<std::uint64_t>(st.st_size);
    mode = st.st_mode & 0777;
  }
  // Into a directory: keep the file's name.
  bool into_dir = dst.path.back() == '/';
  if (!into_dir) {
    auto stat = provider.call(
        "GET", sdk::sandbox_path(dst.id) + "/files/stat?path=" + http::percent_encode(dst.path));
    if (stat) {
      auto entry = api::parse_file_entry(*stat);
      into_dir = entry && entry->type == "directory";
    }
  }
  if (into_dir) {
    if (src == "-")
      return flags.usage_error("name the file to write from stdin: ID:" + dst.path + "NAME");
    if (dst.path.back() != '/') dst.path += '/';
    dst.path += base_name(src);
  }
  sdk::ByteSource source = [fd](char* buf, std::size_t cap) -> Result<std::size_t> {
    for (;;) {
      ssize_t n = ::read(fd, buf, cap);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_error("read");
      return static_cast<std::size_t>(n);
    }
  };
  auto put = provider.put_file_from(dst.id, dst.path, source, length, mode);
  if (!put) return command_failure(put.error());
  return 0;
}

int download(sdk::RemoteProvider& provider, const RemotePath& src, std::string dst,
             const ClientFlags& flags) {
  if (src.path.empty()) return flags.usage_error("the path inside " + src.id + " is empty");
  if (dst == "-") {
    auto got = provider.get_file_to_fd(src.id, src.path, STDOUT_FILENO);
    if (!got) return command_failure(got.error());
    return 0;
  }
  struct stat st;
  if (dst.back() == '/' || (::stat(dst.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
    if (dst.back() != '/') dst += '/';
    dst += base_name(src.path);
  }
  // Into a temporary file next to DST, renamed over it once complete.
  std::string tmp = dst + ".corral-XXXXXX";
  UniqueFd out(mkostemp(tmp.data(), O_CLOEXEC));
  if (!out) return command_failure(errno_error("create a temporary file next to " + dst).value());
  const mode_t mask = umask(0);
  umask(mask);
  auto got = provider.get_file_to_fd(src.id, src.path, out.get());
  Status done = ok();
  if (!got) {
    done = tl::unexpected(got.error());
  } else if (fchmod(out.get(), 0666 & ~mask) != 0 || fsync(out.get()) != 0) {
    done = errno_error("finish " + tmp);
  } else if (::rename(tmp.c_str(), dst.c_str()) != 0) {
    done = errno_error("rename " + tmp + " to " + dst);
  }
  if (!done) {
    ::unlink(tmp.c_str());
    return command_failure(done.error());
  }
  return 0;
}

}  // namespace

int cp_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kCpUsage);
  std::vector<std::string> paths;
  flags.positional(
      [&](std::string_view a) -> Refusal {
        paths.emplace_back(a);
        return std::nullopt;
      },
      /*lone_dash_is_positional=*/true);
  if (auto status = flags.parse(args)) return *status;
  if (paths.size() != 2) return flags.usage_error("give a SRC and a DST");
  auto src_remote = remote_path(paths[0]);
  auto dst_remote = remote_path(paths[1]);
  if (src_remote && dst_remote)
    return flags.usage_error("both sides are in sandboxes: copy through a local file");
  if (!src_remote && !dst_remote)
    return flags.usage_error("one side must be ID:PATH (a path inside a sandbox)");
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  if (dst_remote) return upload(**provider, paths[0], *dst_remote, flags);
  return download(**provider, *src_remote, paths[1], flags);
}

}  // namespace corral::cli
