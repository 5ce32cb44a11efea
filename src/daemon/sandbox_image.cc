// The image a create names, on this node (issue 18, docs/images.md
// "Pulling by digest"): by name, by the digest of its manifest, or by a
// registry reference pinned by that digest. A reference the node does not
// have yet is pulled, from a registry serve.images allows only (a create
// must not make the daemon fetch from wherever it says), verified against
// the digest, and the node's pulled images are then trimmed to
// serve.images.cache_max.
#include <algorithm>
#include <chrono>

#include "daemon/sandbox_service.h"
#include "spec/image_ref.h"

namespace corral::daemon {

namespace {

bool listed(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

ApiResult<ImageInfo> SandboxService::image_for(const std::string& image) {
  ImageStore images(ImageStore::default_dir());
  if (valid_image_name(image)) {
    auto info = images.get(image);
    if (!info)
      return api_fail(api::ApiErrorCode::kInvalidValue, info.error().message, "image",
                      info.error().hint);
    return std::move(*info);
  }
  const bool digest_only = valid_digest(image);
  std::optional<DigestReference> ref;
  if (!digest_only) {
    auto parsed = parse_digest_reference(image);
    if (!parsed)
      return api_fail(api::ApiErrorCode::kInvalidValue, parsed.error().message, "image",
                      parsed.error().hint);
    ref = std::move(*parsed);
    if (!listed(limits_.images.registries, ref->registry))
      return api_fail(api::ApiErrorCode::kInvalidValue,
                      "registry " + ref->registry + " is not one this node pulls from", "image",
                      "list it in serve.images.registries of every node (docs/images.md)");
  }
  const std::string digest = digest_only ? image : ref->digest;
  auto have = [&]() -> ApiResult<std::optional<ImageInfo>> {
    auto found = images.find_digest(digest);
    if (!found) return api_fail(found.error());
    // Taken now: its place in the cache's order is renewed before an
    // eviction could pick it.
    if (*found) (void)images.lock_shared((*found)->name);
    return std::move(*found);
  };
  auto found = have();
  if (!found) return tl::unexpected(found.error());
  if (*found) return std::move(**found);
  if (digest_only)
    return api_fail(api::ApiErrorCode::kInvalidValue,
                    "this node has no image with manifest " + digest, "image",
                    "name it with its registry (REGISTRY/REPOSITORY@" + digest +
                        ") for the node to pull it, or pull it on every node with corral image "
                        "pull");

  // One pull at a time: a second create of the same image finds it pulled.
  std::lock_guard lock(pull_mu_);
  found = have();
  if (!found) return tl::unexpected(found.error());
  if (*found) return std::move(**found);
  const std::string name = ImageStore::digest_image_name(digest);
  const auto t0 = std::chrono::steady_clock::now();
  auto pulled =
      images.pull(name, *ref, listed(limits_.images.insecure_registries, ref->registry), nullptr);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  metrics_
      .counter("corral_image_pulls_total", "Images pulled by digest for a create",
               {{"result", pulled ? "ok" : "error"}})
      .inc();
  audit_async({{"type", "image.pulled"},
               {"reference", ref->text()},
               {"image", name},
               {"ok", pulled.has_value()},
               {"seconds", seconds},
               {"error", pulled ? std::string() : pulled.error().message}});
  if (!pulled) {
    // A digest that does not match is the registry's lie: 400 with why;
    // anything else (unreachable, unknown) the caller may retry.
    const bool refused = pulled.error().code == ErrorCode::kInvalidArgument;
    return api_fail(refused ? api::ApiErrorCode::kInvalidValue : api::ApiErrorCode::kUnavailable,
                    "pulling " + ref->text() + ": " + pulled.error().message, "image",
                    pulled.error().hint);
  }
  if (auto evicted = images.evict_pulled(limits_.images.cache_max_bytes, name);
      evicted && !evicted->empty())
    audit_async({{"type", "image.evicted"}, {"images", *evicted}});
  auto info = images.get(name);
  if (!info) return api_fail(info.error());
  return std::move(*info);
}

}  // namespace corral::daemon
