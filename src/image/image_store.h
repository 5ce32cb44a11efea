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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "spec/image_ref.h"

namespace corral {

struct ImageInfo {
  std::string name;
  std::string rootfs;            // absolute path of the root file system
  std::string source;            // "mmdebstrap bookworm +pkg,..." or "oci:<file>:<tag>"
  std::string created;           // RFC 3339 UTC
  std::uint64_t size_bytes = 0;  // allocated blocks of the rootfs (hard links once)
  std::vector<std::string> env;  // from the OCI config ("K=V"), may be empty
  std::string workdir;           // from the OCI config, may be empty
  // "sha256:<hex>" of the image's OCI manifest (imported or pulled images;
  // "" for built ones): the name a fleet's nodes know it by.
  std::string digest;
  // When a sandbox last took the image (its .lock's mtime): a pulled
  // image's place in the cache's eviction order.
  std::int64_t last_used_unix = 0;
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
  // The image `reference` pins, from its registry, with skopeo: the
  // manifest the registry answers must hash to the reference's digest (so
  // must the one skopeo stores), and umoci checks every layer and the
  // config against the manifest before anything is unpacked. `insecure`:
  // plain HTTP or unverified TLS (a registry on loopback). Same
  // interruption rules as build.
  Status pull(std::string_view name, const DigestReference& reference, bool insecure,
              const ProgressFn& progress);
  // Image `name` as a new single-layer OCI image (its rootfs, env and
  // workdir) pushed to `target` with skopeo; answers the reference that
  // pins it by its manifest digest, which other nodes pull. Each push makes
  // a new digest (the layer and config carry the time of the push).
  // `insecure` as for pull. The image stays usable, and cannot be removed,
  // while it is pushed.
  Result<DigestReference> push(std::string_view name, const PushTarget& target, bool insecure,
                               const ProgressFn& progress);
  // The image a node keeps for a digest: "sha256-" and its first 56 hex
  // digits (an image name has at most 63 characters; get() of it checks
  // the whole digest).
  static std::string digest_image_name(std::string_view digest);
  // The image whose manifest has `digest`, if this store has one.
  Result<std::optional<ImageInfo>> find_digest(std::string_view digest) const;
  // Removes pulled images (source "registry:...") not in use nor taken in
  // the last minute, least recently used first, until the pulled images
  // take at most `max_bytes`; `keep` is never removed. Returns the names
  // removed.
  Result<std::vector<std::string>> evict_pulled(std::uint64_t max_bytes, std::string_view keep);

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
  Result<UniqueFd> open_for_new_image(const std::string& name) const;
  std::string dir_;
};

}  // namespace corral
