// Pushing an image of the store to an OCI registry (issue 18, docs/images.md
// "Pushing"): the way one node's image reaches the others, which pull it by
// the digest the push answers. The rootfs becomes the single layer of a
// new OCI image (umoci insert), with the env and workdir the image was
// imported with, in a private partial tree that is removed afterwards;
// skopeo copies it to the registry and reports the manifest's digest.
#include <fstream>
#include <sstream>

#include "base/fs.h"
#include "base/subprocess.h"
#include "image/image_store.h"
#include "image/image_tool.h"
#include "image/staging_dir.h"

namespace corral {

using namespace image_detail;

Result<DigestReference> ImageStore::push(std::string_view name, const PushTarget& target,
                                         bool insecure, const ProgressFn& progress) {
  CORRAL_TRY(validate_name(name));
  const std::string n(name);
  auto info = get(n);
  if (!info) return tl::unexpected(info.error());
  // Held for the whole push: the image cannot be removed under umoci.
  auto in_use = lock_shared(n);
  if (!in_use) return tl::unexpected(in_use.error());
  auto dfd = open_dir(dir_);
  if (!dfd) return tl::unexpected(dfd.error());

  ForwardedSignals signals;
  const std::string what = "push of image " + n + " to " + target.text();
  RunOptions opts;
  opts.signals = &signals;
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  // ".partial-push.<name>-<pid>": removed when done, or by remove_stale if
  // this process dies.
  PartialDir work(dir_, dfd->get(), "push." + n);
  CORRAL_TRY_CTX(work.create(), what);
  opts.inherit_fd = work.lock_fd();
  opts.cwd = work.path();

  auto run = [&](std::vector<std::string> argv, const std::string& hint) -> Status {
    auto r = run_tool(argv, progress, opts);
    CORRAL_TRY(check_interrupted(signals, what));
    if (!r) return tl::unexpected(r.error().wrap(what));
    if (!r->ok()) return tool_failed(argv, *r, hint);
    return ok();
  };
  say("packing " + n + " into one layer");
  CORRAL_TRY(run({"umoci", "init", "--layout", "layout"}, "check that umoci works"));
  CORRAL_TRY(run({"umoci", "new", "--image", "layout:latest"}, "check that umoci works"));
  // The image's own time (when it was imported or built) stands for the
  // push's in the config and the history: the same image pushed again
  // gives the same digest (umoci writes the layer's entries in a fixed
  // order, with the rootfs's own times).
  const std::string created = info->created.empty() ? "1970-01-01T00:00:00Z" : info->created;
  CORRAL_TRY(run({"umoci", "insert", "--image", "layout:latest", "--history.created=" + created,
                  info->rootfs, "/"},
                 "check that " + info->rootfs + " is readable"));
  std::vector<std::string> config = {"umoci",
                                     "config",
                                     "--image",
                                     "layout:latest",
                                     "--created=" + created,
                                     "--history.created=" + created};
  for (const std::string& e : info->env) config.push_back("--config.env=" + e);
  if (!info->workdir.empty()) config.push_back("--config.workingdir=" + info->workdir);
  CORRAL_TRY(run(config, "check the image's env and workdir (image.json)"));
  say("pushing to " + target.text());
  CORRAL_TRY(run({"skopeo", "copy", "--quiet",
                  std::string("--dest-tls-verify=") + (insecure ? "false" : "true"), "--digestfile",
                  "digest", "oci:layout:latest", "docker://" + target.text()},
                 "check that " + target.registry +
                     " is reachable and takes pushes (credentials: skopeo login " +
                     target.registry + "; plain HTTP: --insecure)"));
  std::ifstream file(work.path("digest"));
  std::stringstream text;
  text << file.rdbuf();
  std::string digest = text.str();
  while (!digest.empty() && (digest.back() == '\n' || digest.back() == ' ')) digest.pop_back();
  if (!valid_digest(digest))
    return make_error(
        ErrorCode::kInternal,
        what + ": skopeo reported no sha256 digest (\"" + digest.substr(0, 80) + "\")",
        "check the registry with skopeo inspect docker://" + target.text());
  return target.pinned(digest);
}

}  // namespace corral
