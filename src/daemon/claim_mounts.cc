// A claim's mounts and volumes (C4, ADR 0015), bound into the running
// sandbox's mount namespace with what a cold create's planner gives them:
// the source confined beneath the mount roots (open_mount_source) or the
// volume's checked sub-path, its tree cloned on the host with nosuid,
// nodev and read-only unless writable, idmapped to the sandbox's user
// (jail/mount_tree.h, the planner's own functions), and attached at a
// mount point opened beneath the sandbox's root without following a
// symlink (jail/running_mounts.h). The same helper writes resolv.conf
// for a claim's network.
//
// What stays a miss: a writable mount whose target is not beneath a
// directory the sandbox may write (landlock_writable_dirs): its Landlock
// rules were fixed when it started, so the mount would be read-only in
// effect.
#include "daemon/claim_binding.h"
#include "daemon/sandbox_service_internal.h"
#include "jail/mount_tree.h"
#include "jail/running_mounts.h"
#include "jail/sandbox_planner.h"
#include "volume/volume_store.h"

namespace corral::daemon {

namespace {

// At or beneath one of `dirs` ("/workspace" holds "/workspace/x").
bool beneath_any(const std::string& target, const std::vector<std::string>& dirs) {
  auto rel = relative_target(target);
  if (!rel) return false;
  const std::string path = "/" + *rel;
  for (const std::string& d : dirs) {
    if (path == d || (path.size() > d.size() && path.compare(0, d.size(), d) == 0 &&
                      path[d.size()] == '/'))
      return true;
  }
  return false;
}

}  // namespace

std::string SandboxService::ClaimBinder::prepare_mounts(ClaimBinding& b) {
  const std::vector<std::string> writable_dirs = landlock_writable_dirs(spec_);
  for (const MountSpec& m : spec_.mounts) {
    // As Creation::check_mounts, then the planner: a wrong one goes cold
    // and is answered there.
    if (s_.limits_.mount_roots.empty() || m.source.empty() || m.source[0] != '/') return "mounts";
    if (!relative_target(m.target)) return "mounts";
    if (m.writable && !beneath_any(m.target, writable_dirs)) return "mounts";
    auto opened = open_mount_source(m, s_.limits_.mount_roots, "/");
    if (!opened) return "mounts";
    b.mounts.push_back(std::move(*opened));
  }
  for (const VolumeMountSpec& v : spec_.volumes) {
    if (s_.volumes_ == nullptr || !relative_target(v.target)) return "volumes";
    if (v.writable && !beneath_any(v.target, writable_dirs)) return "volumes";
    auto fd = s_.volumes_->open_subpath(ns_, v.volume, v.subpath);
    if (!fd) return "volumes";
    OpenedMount o;
    o.fd = std::move(*fd);
    o.is_dir = true;
    o.source = "volume " + v.volume + (v.subpath.empty() ? "" : "/" + v.subpath);
    o.target = v.target;
    o.writable = v.writable;
    b.mounts.push_back(std::move(o));
  }
  return {};
}

Status SandboxService::ClaimBinder::bind_mounts(SandboxEntry& e, ClaimBinding& b) {
  if (b.mounts.empty() && b.resolv_conf.empty()) return ok();
  // In use by this sandbox from now on, as a cold create's volumes are.
  for (const VolumeMountSpec& v : spec_.volumes) {
    CORRAL_TRY(s_.volumes_->acquire(ns_, v.volume, e.id));
    b.acquired_volumes.push_back(v.volume);
  }
  const uid_t host_base = e.live->identity().host_uid_base;
  std::vector<UniqueFd> trees;
  std::vector<std::string> targets;
  for (const OpenedMount& m : b.mounts) {
    auto tree = clone_tree(m.fd.get(), m.writable, m.source);
    if (!tree) return tl::unexpected(std::move(tree).error().wrap("mount " + m.target));
    auto notice = idmap_user_mount(tree->get(), m.fd.get(), m.writable, host_base,
                                   sandbox_user_uid(spec_), m.source);
    if (!notice) return tl::unexpected(std::move(notice).error().wrap("mount " + m.target));
    auto rel = relative_target(m.target);
    if (!rel) return tl::unexpected(std::move(rel).error());
    trees.push_back(std::move(*tree));
    targets.push_back(std::move(*rel));
  }
  std::vector<RunningBind> binds;
  for (std::size_t i = 0; i < trees.size(); ++i)
    binds.push_back(RunningBind{trees[i].get(), targets[i], b.mounts[i].is_dir});
  if (auto st = attach_to_running_sandbox(e.live->pidfd(), binds, b.resolv_conf, host_base); !st)
    return tl::unexpected(std::move(st).error().wrap("binding at claim"));
  return ok();
}

void SandboxService::ClaimBinder::release_volumes(SandboxEntry& e, ClaimBinding& b) {
  for (const std::string& v : b.acquired_volumes) s_.volumes_->creation_done(v, e.id);
  b.acquired_volumes.clear();
}

}  // namespace corral::daemon
