// Base layers on disk (F4): each image is a read-only root file system
// under <data>/images/<name>/rootfs plus image.json (where it came from,
// when, how big, and the OCI config's env/workdir if imported) and an empty
// .lock file that running sandboxes hold shared.
//
// Building and importing write into <images>/.partial-<name>-<pid>/ first
// and rename it into place only when complete, so an interrupted build
// leaves nothing; a partial tree whose process is gone is removed by the
// next build, import or list. Removal renames the image to
// .removing-<name>-<pid> under an exclusive lock, then deletes it without
// following symlinks or crossing mount points. User docs: docs/images.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

struct ImageInfo {
  std::string name;
  std::string rootfs;            // absolute path of the root file system
  std::string source;            // "mmdebstrap bookworm +pkg,..." or "oci:<file>:<tag>"
  std::string created;           // RFC 3339 UTC
  std::uint64_t size_bytes = 0;  // allocated blocks of the rootfs (hard links once)
  std::vector<std::string> env;  // from the OCI config ("K=V"), may be empty
  std::string workdir;           // from the OCI config, may be empty
};

using ProgressFn = std::function<void(std::string_view line)>;

class ImageStore {
 public:
  // `images_dir` is created (with its parents) on the first build/import.
  explicit ImageStore(std::string images_dir);
  // <data_dir()>/images (CORRAL_DATA_DIR or /var/lib/corral).
  static std::string default_dir();

  // Image names: [a-z0-9][a-z0-9._-]{0,62}; anything else is refused.
  static Status validate_name(std::string_view name);
  // Debian package names for --packages: [a-z0-9][a-z0-9+.-]*, at most 100
  // characters. Checked before anything reaches mmdebstrap's command line.
  static Status validate_package(std::string_view package);

  Result<ImageInfo> get(std::string_view name) const;
  // Sorted by name. Removes stale partial trees first.
  Result<std::vector<ImageInfo>> list() const;
  // Refused with kUnavailable while a sandbox holds lock_shared(name).
  Status remove(std::string_view name);
  // mmdebstrap --variant=minbase --mode=root bookworm, plus `packages`.
  // Output lines are passed to `progress` while it runs. SIGINT/SIGTERM
  // during the build are forwarded to mmdebstrap, then the partial tree is
  // removed and the build fails. build and import install process-wide
  // handlers for SIGINT/SIGTERM/SIGHUP while they run (restored after):
  // one build or import at a time per process.
  Status build(std::string_view name, const std::vector<std::string>& packages,
               const ProgressFn& progress);
  // An OCI image layout tarball (index.json + oci-layout + blobs/; a
  // docker-archive is refused with a hint) unpacked with umoci; the tag
  // "latest" or the only one present is used. Same interruption rules.
  Status import_oci(std::string_view name, const std::string& tarball, const ProgressFn& progress);

  // Held (flock LOCK_SH on <images>/<name>/.lock) by a running sandbox
  // for as long as it uses the image; remove() fails while any is held.
  // kNotFound if there is no such image, kUnavailable while it is being
  // removed.
  Result<UniqueFd> lock_shared(std::string_view name) const;

  // Deletes .partial-* and .removing-* trees whose process is gone.
  // Called by build, import and list; public for tests and `corral doctor`.
  Status remove_stale() const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace corral
