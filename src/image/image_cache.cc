// Images named by digest (issue 18, docs/images.md "Pulling by digest"):
// where a node keeps them, and the bound on the space its pulled images
// take.
#include <time.h>

#include <algorithm>

#include "image/image_store.h"

namespace corral {

std::string ImageStore::digest_image_name(std::string_view digest) {
  return "sha256-" + std::string(digest.substr(7, 56));
}

Result<std::optional<ImageInfo>> ImageStore::find_digest(std::string_view digest) const {
  if (!valid_digest(digest)) return std::optional<ImageInfo>();
  // The name a pull gives it first: one lookup, not a scan.
  auto named = get(digest_image_name(digest));
  if (named && named->digest == digest) return std::optional<ImageInfo>(std::move(*named));
  auto all = list();
  if (!all) return tl::unexpected(all.error());
  for (ImageInfo& info : *all)
    if (info.digest == digest) return std::optional<ImageInfo>(std::move(info));
  return std::optional<ImageInfo>();
}

Result<std::vector<std::string>> ImageStore::evict_pulled(std::uint64_t max_bytes,
                                                          std::string_view keep) {
  std::vector<std::string> removed;
  auto all = list();
  if (!all) return tl::unexpected(all.error());
  std::vector<ImageInfo> pulled;
  std::uint64_t total = 0;
  for (ImageInfo& info : *all) {
    if (info.source.rfind("registry:", 0) != 0) continue;
    total += info.size_bytes;
    if (info.name != keep) pulled.push_back(std::move(info));
  }
  std::sort(pulled.begin(), pulled.end(), [](const ImageInfo& a, const ImageInfo& b) {
    return a.last_used_unix != b.last_used_unix ? a.last_used_unix < b.last_used_unix
                                                : a.name < b.name;
  });
  const std::int64_t now = ::time(nullptr);
  for (const ImageInfo& info : pulled) {
    if (total <= max_bytes) break;
    // Taken in the last minute (a create may be about to start on it).
    if (info.last_used_unix > now - 60) continue;
    // One a sandbox uses stays (remove() refuses it): the bound is exceeded
    // until it is free.
    if (!remove(info.name)) continue;
    total -= std::min(total, info.size_bytes);
    removed.push_back(info.name);
  }
  return removed;
}

}  // namespace corral
