#include "image/image_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <functional>
#include <unordered_set>
#include <utility>

#include "base/sha256.h"
#include "base/strings.h"
#include "base/fs.h"
#include "base/paths.h"
#include "base/subprocess.h"
#include "image/image_tool.h"
#include "image/oci_layout.h"
#include "image/staging_dir.h"

namespace corral {

using namespace image_detail;

namespace {

constexpr const char* kSuite = "bookworm";
constexpr int kMaxDepth = 4096;

std::string rfc3339_now() {
  time_t now = time(nullptr);
  struct tm tm_utc {};
  gmtime_r(&now, &tm_utc);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  return buf;
}

// ---------------------------------------------------------------------------
// Walking a tree relative to directory fds, never following symlinks and
// never crossing into another mount.

// Visits every entry under `dirfd` (not the directory itself) without
// following symlinks or entering other mounts.
using VisitFn = std::function<Status(const std::string& rel, const FileStat& st)>;

Status walk_at(int dirfd, const FileStat& dir_st, const std::string& rel, const std::string& shown,
               const VisitFn& visit, int depth) {
  if (depth > kMaxDepth) {
    return make_error(ErrorCode::kResourceExhausted,
                      "tree deeper than " + std::to_string(kMaxDepth) + ": " + shown);
  }
  auto names = read_dir_names(dirfd, shown);
  if (!names) return tl::unexpected(names.error());
  for (const auto& name : *names) {
    std::string child_rel = rel.empty() ? name : rel + "/" + name;
    std::string child_shown = join_path(shown, name);
    FileStat st;
    if (stat_at(dirfd, name.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return errno_error("statx(" + child_shown + ")");
    }
    CORRAL_TRY(visit(child_rel, st));
    if (!st.is_dir() || crosses_mount(dir_st, st)) continue;
    auto sub = open_dir_at(dirfd, name, child_shown);
    if (!sub) return tl::unexpected(sub.error());
    CORRAL_TRY(walk_at(sub->get(), st, child_rel, child_shown, visit, depth + 1));
  }
  return ok();
}

Status walk(const std::string& path, const VisitFn& visit) {
  auto dir = open_dir(path);
  if (!dir) return tl::unexpected(dir.error());
  FileStat st;
  if (stat_at(dir->get(), "", &st) != 0) return errno_error("statx(" + path + ")");
  return walk_at(dir->get(), st, "", path, visit, 0);
}

// Allocated size of a tree: st_blocks * 512, hard-linked files once.
Result<std::uint64_t> tree_size(const std::string& path) {
  std::uint64_t total = 0;
  auto root = open_dir(path);
  if (!root) return tl::unexpected(root.error());
  FileStat root_st;
  if (stat_at(root->get(), "", &root_st) != 0) return errno_error("statx(" + path + ")");
  total += root_st.stx.stx_blocks * 512;
  std::unordered_set<std::uint64_t> seen_inodes;
  Status r = walk(path, [&](const std::string&, const FileStat& st) -> Status {
    if (!st.is_dir() && st.stx.stx_nlink > 1 && !seen_inodes.insert(st.stx.stx_ino).second) {
      return ok();
    }
    total += st.stx.stx_blocks * 512;
    return ok();
  });
  if (!r) return tl::unexpected(r.error());
  return total;
}

}  // namespace

// ---------------------------------------------------------------------------

ImageStore::ImageStore(std::string images_dir) : dir_(std::move(images_dir)) {
  if (!dir_.empty() && dir_[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) != nullptr) dir_ = join_path(cwd, dir_);
  }
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

std::string ImageStore::default_dir() { return join_path(data_dir(), "images"); }

namespace {

// A word that starts with a-z or 0-9, continues with those or one of
// `extra`, and has at most `max_size` characters; `what` and `hint` make
// the message ("invalid image name \"X\": empty").
Status validate_word(std::string_view what, std::string_view word, std::size_t max_size,
                     std::string_view extra, const char* hint) {
  auto bad = [&](std::string why) {
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid " + std::string(what) + " " + quote_for_message(word) + ": " + why, hint);
  };
  if (word.empty()) return bad("empty");
  if (word.size() > max_size) return bad("longer than " + std::to_string(max_size) + " characters");
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(word[0])) return bad("must start with a-z or 0-9");
  for (char c : word) {
    if (!lower_alnum(c) && extra.find(c) == std::string_view::npos) {
      return bad("character " + quote_for_message(std::string(1, c)) + " is not allowed");
    }
  }
  return ok();
}

}  // namespace

Status ImageStore::validate_name(std::string_view name) {
  return validate_word("image name", name, 63, "._-",
                       "use 1-63 characters from a-z 0-9 . _ - starting with a letter or digit");
}

Status ImageStore::validate_package(std::string_view pkg) {
  return validate_word("package name", pkg, 100, "+.-",
                       "Debian package names use a-z 0-9 + . - and start with a letter or digit");
}

Result<ImageInfo> ImageStore::get(std::string_view name) const {
  CORRAL_TRY(validate_name(name));
  std::string n(name);
  std::string image_dir = join_path(dir_, n);
  auto not_found = [&] {
    return make_error(ErrorCode::kNotFound, "no image named " + n + " in " + dir_,
                      "corral image ls lists images; corral image build " + n + " makes one");
  };
  auto dfd = open_dir(dir_);
  if (!dfd) {
    if (dfd.error().sys_errno == ENOENT) return not_found();
    return tl::unexpected(dfd.error());
  }
  auto ifd = open_dir_at(dfd->get(), n, image_dir);
  if (!ifd) {
    if (ifd.error().sys_errno == ENOENT) return not_found();
    return tl::unexpected(ifd.error());
  }
  ImageInfo info;
  info.name = n;
  info.rootfs = join_path(image_dir, "rootfs");
  auto j = read_json_file(ifd->get(), "image.json", join_path(image_dir, "image.json"));
  if (!j) return tl::unexpected(j.error().wrap("reading image " + n));
  info.source = string_member(*j, "source");
  info.created = string_member(*j, "created");
  info.env = string_list_member(*j, "env");
  info.workdir = string_member(*j, "workdir");
  info.digest = string_member(*j, "digest");
  struct stat lock_st {};
  if (fstatat(ifd->get(), ".lock", &lock_st, AT_SYMLINK_NOFOLLOW) == 0)
    info.last_used_unix = lock_st.st_mtim.tv_sec;
  const json* size = member(*j, "size_bytes");
  if (size != nullptr && size->is_number_unsigned()) info.size_bytes = size->get<std::uint64_t>();
  FileStat st;
  if (stat_at(ifd->get(), "rootfs", &st) != 0 || !st.is_dir()) {
    return make_error(ErrorCode::kNotFound, "image " + n + " has no rootfs directory",
                      "remove it with corral image rm " + n + " and build it again");
  }
  return info;
}

Result<std::vector<ImageInfo>> ImageStore::list() const {
  std::vector<ImageInfo> images;
  auto dfd = open_dir(dir_);
  if (!dfd) {
    if (dfd.error().sys_errno == ENOENT) return images;
    return tl::unexpected(dfd.error());
  }
  (void)remove_stale();  // best effort: a failure here must not hide the list
  auto names = read_dir_names(dfd->get(), dir_);
  if (!names) return tl::unexpected(names.error());
  std::sort(names->begin(), names->end());
  for (const auto& n : *names) {
    if (!validate_name(n)) continue;  // dot entries and foreign files
    auto info = get(n);
    struct stat st {};
    if (info) {
      images.push_back(std::move(*info));
    } else if (fstatat(dfd->get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      // Listed anyway (it did not vanish meanwhile) so that the user can
      // see it and remove it.
      ImageInfo broken;
      broken.name = n;
      broken.rootfs = join_path(join_path(dir_, n), "rootfs");
      broken.source = "(broken: " + info.error().message + ")";
      images.push_back(std::move(broken));
    }
  }
  return images;
}

Status ImageStore::remove_stale() const {
  auto dfd = open_dir(dir_);
  if (!dfd) {
    if (dfd.error().sys_errno == ENOENT) return ok();
    return tl::unexpected(dfd.error());
  }
  auto names = read_dir_names(dfd->get(), dir_);
  if (!names) return tl::unexpected(names.error());
  Status first_error = ok();
  for (const auto& entry : *names) {
    pid_t pid = owner_pid(entry);
    if (pid <= 0 || process_alive(pid)) continue;
    std::string path = join_path(dir_, entry);
    // Held while we remove it, so that two cleaners do not race.
    UniqueFd building(openat(dfd->get(), (entry + "/" + kBuildingFile).c_str(),
                             O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (building.valid() && flock(building.get(), LOCK_EX | LOCK_NB) != 0) {
      continue;  // a tool of that build is still running
    }
    detach_mounts_under(path);
    Status r = remove_tree_at(dfd->get(), entry, path);
    if (!r && first_error) first_error = tl::unexpected(r.error().wrap("removing stale " + path));
  }
  return first_error;
}

Result<UniqueFd> ImageStore::lock_shared(std::string_view name) const {
  CORRAL_TRY(validate_name(name));
  std::string n(name);
  auto not_found = [&] {
    return make_error(ErrorCode::kNotFound, "no image named " + n + " in " + dir_,
                      "corral image ls lists images; corral image build " + n + " makes one");
  };
  auto dfd = open_dir(dir_);
  if (!dfd) return dfd.error().sys_errno == ENOENT ? not_found() : tl::unexpected(dfd.error());
  std::string rel = n + "/.lock";
  std::string shown = join_path(dir_, rel);
  // O_NOFOLLOW covers the last component; the image directory itself is
  // checked below (fstatat of the same path must give the same inode).
  int fd = openat(dfd->get(), rel.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? not_found() : errno_error("open(" + shown + ")");
  UniqueFd lock(fd);
  while (flock(lock.get(), LOCK_SH | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) {
      return make_error(ErrorCode::kUnavailable, "image " + n + " is being removed",
                        "build or import it again, or choose another image");
    }
    return errno_error("flock(" + shown + ", LOCK_SH)");
  }
  // remove() renames the image away while holding LOCK_EX: if that
  // happened between our open and our flock, the path no longer leads here.
  struct stat held {
  }, now{};
  if (fstat(lock.get(), &held) != 0) return errno_error("fstat(" + shown + ")");
  FileStat image_dir_st;
  if (fstatat(dfd->get(), rel.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 ||
      held.st_dev != now.st_dev || held.st_ino != now.st_ino ||
      stat_at(dfd->get(), n.c_str(), &image_dir_st) != 0 || !image_dir_st.is_dir()) {
    return not_found();
  }
  // The .lock's mtime is when the image was last taken: the order in which
  // a node's cache of pulled images is evicted (evict_pulled).
  (void)futimens(lock.get(), nullptr);
  return lock;
}

Status ImageStore::remove(std::string_view name) {
  CORRAL_TRY(validate_name(name));
  std::string n(name);
  std::string image_dir = join_path(dir_, n);
  auto not_found = [&] {
    return make_error(ErrorCode::kNotFound, "no image named " + n + " in " + dir_,
                      "corral image ls lists images");
  };
  auto dfd = open_dir(dir_);
  if (!dfd) return dfd.error().sys_errno == ENOENT ? not_found() : tl::unexpected(dfd.error());
  auto ifd = open_dir_at(dfd->get(), n, image_dir);
  if (!ifd) return ifd.error().sys_errno == ENOENT ? not_found() : tl::unexpected(ifd.error());
  int fd = openat(ifd->get(), ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("open(" + join_path(image_dir, ".lock") + ")");
  UniqueFd lock(fd);
  while (flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) {
      return make_error(
          ErrorCode::kUnavailable, "image " + n + " is in use by a running sandbox",
          "wait until the sandboxes using it have ended, then run corral image rm " + n + " again");
    }
    return errno_error("flock(" + join_path(image_dir, ".lock") + ", LOCK_EX)");
  }
  // Out of sight first: from here on nobody can start using it.
  std::string removing = std::string(kRemovingPrefix) + n + "-" + std::to_string(getpid());
  std::string removing_path = join_path(dir_, removing);
  if (renameat2(dfd->get(), n.c_str(), dfd->get(), removing.c_str(), RENAME_NOREPLACE) != 0) {
    return errno_error("rename(" + image_dir + " -> " + removing_path + ")");
  }
  ifd->reset();
  Status r = remove_tree_at(dfd->get(), removing, removing_path);
  if (!r) return tl::unexpected(r.error().wrap("removing image " + n));
  return ok();
}

namespace {

Status refuse_existing(int images_fd, const std::string& name) {
  struct stat st {};
  if (fstatat(images_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return make_error(ErrorCode::kAlreadyExists, "image " + name + " already exists",
                      "corral image rm " + name + " first");
  }
  if (errno != ENOENT) return errno_error("stat(" + name + ")");
  return ok();
}

}  // namespace

// The store's directory, made if need be, once stale partial trees are
// gone and no image `name` exists: where a build, import or pull starts.
Result<UniqueFd> ImageStore::open_for_new_image(const std::string& name) const {
  CORRAL_TRY_CTX(mkdir_p(dir_, 0755), "creating the image store");
  auto dfd = open_dir(dir_);
  if (!dfd) return tl::unexpected(dfd.error());
  (void)remove_stale();
  CORRAL_TRY(refuse_existing(dfd->get(), name));
  return std::move(*dfd);
}

// The last step of a build, import or pull: `info` (name, size, creation
// time added) stored with the tree, renamed into place.
static Status commit_image(PartialDir& partial, ImageInfo& info, const std::string& name,
                           const ForwardedSignals& signals, const std::string& what) {
  info.name = name;
  info.created = rfc3339_now();
  auto size = tree_size(partial.path("rootfs"));
  if (!size) return tl::unexpected(size.error().wrap("measuring image " + name));
  info.size_bytes = *size;
  CORRAL_TRY(check_interrupted(signals, what));
  CORRAL_TRY_CTX(partial.commit(info), what);
  return ok();
}

Status ImageStore::build(std::string_view name, const std::vector<std::string>& packages,
                         const ProgressFn& progress) {
  CORRAL_TRY(validate_name(name));
  for (const auto& p : packages) CORRAL_TRY(validate_package(p));
  std::string n(name);
  auto dfd = open_for_new_image(n);
  if (!dfd) return tl::unexpected(dfd.error());

  ForwardedSignals signals;
  PartialDir partial(dir_, dfd->get(), n);
  CORRAL_TRY_CTX(partial.create(), "building image " + n);

  std::string include;
  for (const auto& p : packages) include += (include.empty() ? "" : ",") + p;
  std::vector<std::string> argv = {"mmdebstrap", "--variant=minbase", "--mode=root",
                                   "--format=directory"};
  if (!include.empty()) argv.push_back("--include=" + include);
  argv.push_back(kSuite);
  argv.push_back(partial.path("rootfs"));

  RunOptions opts;
  opts.signals = &signals;
  opts.inherit_fd = partial.lock_fd();
  auto r = run_tool(argv, progress, opts);
  CORRAL_TRY(check_interrupted(signals, "build of image " + n));
  if (!r) return tl::unexpected(r.error().wrap("building image " + n));
  if (!r->ok()) {
    std::string hint =
        "check the package names and that deb.debian.org is reachable; the lines above are "
        "mmdebstrap's own output";
    return tool_failed(argv, *r, hint);
  }

  ImageInfo info;
  info.source = std::string("mmdebstrap ") + kSuite + (include.empty() ? "" : " +" + include);
  return commit_image(partial, info, n, signals, "build of image " + n);
}

// Steps shared by import and pull: <partial>/layout, an OCI image layout
// (`shown` names where it came from), becomes <partial>/rootfs with
// umoci, which checks every blob against its digest; `info` gets the env,
// workdir, tag and manifest digest.
static Status unpack_layout(PartialDir& partial, const std::string& shown, const RunOptions& opts,
                            ForwardedSignals& signals, const ProgressFn& progress, ImageInfo& info,
                            std::string& tag_out, bool& tagged_here) {
  const std::string& file = shown;
  const std::string what = "unpacking " + shown;
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  // 3. The layout holds only directories and regular files: a symlink or
  // device in it would make umoci read something outside the archive.
  Status shape =
      walk(partial.path("layout"), [&](const std::string& rel, const FileStat& st) -> Status {
        if (st.is_dir() || st.is_reg()) return ok();
        return make_error(ErrorCode::kInvalidArgument,
                          "refusing " + file + ": " + quote_for_message(rel) +
                              " is neither a file nor a directory (an OCI layout has only those)",
                          convert_hint());
      });
  if (!shape) return shape;

  // 4. Which tag to unpack.
  auto layout_fd = open_dir_at(partial.fd(), "layout", partial.path("layout"));
  if (!layout_fd) return tl::unexpected(layout_fd.error());
  auto index = read_json_file(layout_fd->get(), "index.json", "index.json in " + file);
  if (!index) return tl::unexpected(index.error());
  auto chosen = choose_tag(*index, layout_fd->get(), partial.path("layout/index.json"), file,
                           &tagged_here);
  if (!chosen) return tl::unexpected(chosen.error());
  const std::string tag = *chosen;
  tag_out = tag;
  info.digest = manifest_digest(*index, tag);

  // 5. Unpack (umoci checks every blob's digest). Relative paths, run from
  // inside the partial tree, so that no ':' in the store path can confuse
  // umoci's LAYOUT:TAG syntax.
  RunOptions umoci_opts = opts;
  umoci_opts.cwd = partial.path();
  std::vector<std::string> u_argv = {"umoci", "unpack", "--image", "layout:" + tag, "bundle"};
  say("unpacking tag " + tag + " with umoci");
  auto unpacked = run_tool(u_argv, progress, umoci_opts);
  CORRAL_TRY(check_interrupted(signals, what));
  if (!unpacked) return tl::unexpected(unpacked.error().wrap("unpacking " + file));
  if (!unpacked->ok()) return tool_failed(u_argv, *unpacked, convert_hint());

  // 6. env and workdir: from the image's own config blob (umoci checked
  // its digest), else from the runtime config umoci generated, which adds
  // defaults of its own (cwd "/", TERM) that are dropped here.
  auto bundle_fd = open_dir_at(partial.fd(), "bundle", partial.path("bundle"));
  if (!bundle_fd) return tl::unexpected(bundle_fd.error());
  auto image_config = oci_image_config(layout_fd->get(), *index, tag);
  if (image_config) {
    info.env = string_list_member(*image_config, "Env");
    info.workdir = string_member(*image_config, "WorkingDir");
  } else {
    auto config =
        read_json_file(bundle_fd->get(), "config.json", partial.path("bundle/config.json"));
    if (!config) return tl::unexpected(config.error().wrap(what));
    if (const json* process = member(*config, "process")) {
      for (auto& e : string_list_member(*process, "env")) {
        if (e != "TERM=xterm") info.env.push_back(std::move(e));
      }
      info.workdir = string_member(*process, "cwd");
      if (info.workdir == "/") info.workdir.clear();
    }
  }

  // 7. Keep the rootfs, drop the rest.
  if (renameat(bundle_fd->get(), "rootfs", partial.fd(), "rootfs") != 0) {
    return errno_error("rename(" + partial.path("bundle/rootfs") + " -> " + partial.path("rootfs") +
                       ")");
  }
  bundle_fd->reset();
  layout_fd->reset();
  CORRAL_TRY(remove_tree_at(partial.fd(), "bundle", partial.path("bundle")));
  CORRAL_TRY(remove_tree_at(partial.fd(), "layout", partial.path("layout")));

  return ok();
}

Status ImageStore::import_oci(std::string_view name, const std::string& tarball,
                              const ProgressFn& progress) {
  CORRAL_TRY(validate_name(name));
  std::string n(name);
  struct stat tst {};
  if (stat(tarball.c_str(), &tst) != 0) {
    return errno_error("stat(" + tarball + ")", errno, "give the path of an OCI image tarball");
  }
  if (!S_ISREG(tst.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument, tarball + " is not a regular file",
                      convert_hint());
  }
  char real[PATH_MAX];
  if (realpath(tarball.c_str(), real) == nullptr) return errno_error("realpath(" + tarball + ")");
  std::string file = real;

  auto dfd = open_for_new_image(n);
  if (!dfd) return tl::unexpected(dfd.error());

  ForwardedSignals signals;
  std::string what = "import of image " + n;
  RunOptions opts;
  opts.signals = &signals;

  // 1. What is in the tarball, before anything is written.
  RunOptions list_opts = opts;
  list_opts.capture_stdout = true;
  std::vector<std::string> list_argv = {"tar", "-t", "-f", file};
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  say("checking " + file);
  auto listing = run_tool(list_argv, nullptr, list_opts);
  CORRAL_TRY(check_interrupted(signals, what));
  if (!listing) return tl::unexpected(listing.error().wrap("listing " + file));
  if (!listing->ok()) {
    return make_error(ErrorCode::kInvalidArgument,
                      file + " is not a readable tar archive (" + listing->error_line() + ")",
                      convert_hint());
  }
  CORRAL_TRY(check_layout_listing(listing->out, file, n));

  PartialDir partial(dir_, dfd->get(), n);
  CORRAL_TRY_CTX(partial.create(), what);
  opts.inherit_fd = partial.lock_fd();

  // 2. Extract into the private partial tree. GNU tar also refuses '..' and
  // strips leading '/' on its own; the listing check above makes it an error.
  if (mkdirat(partial.fd(), "layout", 0700) != 0) {
    return errno_error("mkdir(" + partial.path("layout") + ")");
  }
  std::vector<std::string> x_argv = {"tar",
                                     "-x",
                                     "-f",
                                     file,
                                     "-C",
                                     partial.path("layout"),
                                     "--no-same-owner",
                                     "--no-overwrite-dir"};
  say("extracting the OCI layout");
  auto extracted = run_tool(x_argv, progress, opts);
  CORRAL_TRY(check_interrupted(signals, what));
  if (!extracted) return tl::unexpected(extracted.error().wrap("extracting " + file));
  if (!extracted->ok()) return tool_failed(x_argv, *extracted, convert_hint());

  bool tagged_here = false;
  ImageInfo info;
  std::string tag;
  CORRAL_TRY(unpack_layout(partial, file, opts, signals, progress, info, tag, tagged_here));
  info.source = "oci:" + file + ":" + tag + (tagged_here ? " (untagged)" : "");
  return commit_image(partial, info, n, signals, what);
}

Status ImageStore::pull(std::string_view name, const DigestReference& ref, bool insecure,
                        const ProgressFn& progress) {
  CORRAL_TRY(validate_name(name));
  std::string n(name);
  const std::string shown = ref.text();
  auto dfd = open_for_new_image(n);
  if (!dfd) return tl::unexpected(dfd.error());

  ForwardedSignals signals;
  const std::string what = "pull of " + shown;
  RunOptions opts;
  opts.signals = &signals;
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const std::string tls = std::string("--src-tls-verify=") + (insecure ? "false" : "true");
  const std::string source = "docker://" + shown;

  // 1. The manifest as the registry answers it, hashed here: the one the
  // digest names, or nothing is written.
  say("checking the manifest of " + shown);
  RunOptions inspect_opts = opts;
  inspect_opts.capture_stdout = true;
  inspect_opts.stdout_limit = 4u << 20;
  std::vector<std::string> i_argv = {"skopeo",
                                     "inspect",
                                     "--raw",
                                     std::string("--tls-verify=") + (insecure ? "false" : "true"),
                                     source};
  auto inspected = run_tool(i_argv, nullptr, inspect_opts);
  CORRAL_TRY(check_interrupted(signals, what));
  if (!inspected) return tl::unexpected(inspected.error().wrap(what));
  if (!inspected->ok())
    return tool_failed(i_argv, *inspected,
                       "check that " + ref.registry + " serves " + ref.repository +
                           " and holds this digest (skopeo inspect " + source + ")");
  const std::string got = "sha256:" + sha256_hex(inspected->out);
  if (got != ref.digest)
    return make_error(ErrorCode::kInvalidArgument,
                      "refusing " + shown + ": the registry's manifest hashes to " + got +
                          ", not to the digest asked for",
                      "the registry is broken or not to be trusted; nothing was stored");

  PartialDir partial(dir_, dfd->get(), n);
  CORRAL_TRY_CTX(partial.create(), what);
  opts.inherit_fd = partial.lock_fd();

  // 2. The blobs into an OCI layout in the private partial tree (a relative
  // path: no ':' of the store's path can confuse skopeo's oci:PATH:TAG).
  RunOptions copy_opts = opts;
  copy_opts.cwd = partial.path();
  std::vector<std::string> c_argv = {"skopeo", "copy", "--quiet", tls, source, "oci:layout:pulled"};
  say("copying " + shown);
  auto copied = run_tool(c_argv, progress, copy_opts);
  CORRAL_TRY(check_interrupted(signals, what));
  if (!copied) return tl::unexpected(copied.error().wrap(what));
  if (!copied->ok()) return tool_failed(c_argv, *copied, "check the registry and the reference");

  // 3. Unpacked by umoci, which checks the config and every layer against
  // the manifest; the manifest skopeo stored must be the one asked for.
  bool tagged_here = false;
  ImageInfo info;
  std::string tag;
  CORRAL_TRY(unpack_layout(partial, shown, opts, signals, progress, info, tag, tagged_here));
  if (info.digest != ref.digest)
    return make_error(ErrorCode::kInvalidArgument,
                      "refusing " + shown + ": the manifest stored is " +
                          (info.digest.empty() ? std::string("missing") : info.digest) +
                          ", not the digest asked for",
                      "skopeo converted the image (a Docker v2 schema 1 manifest?); push it as an "
                      "OCI or Docker schema 2 image");
  info.source = "registry:" + shown;
  return commit_image(partial, info, n, signals, what);
}

}  // namespace corral
