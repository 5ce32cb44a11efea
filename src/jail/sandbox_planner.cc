#include "jail/sandbox_planner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/paths.h"
#include "base/random.h"
#include "jail/capabilities.h"
#include "jail/command_userns.h"
#include "jail/fs_util.h"
#include "jail/host_base.h"
#include "jail/idmap_userns.h"
#include "jail/landlock.h"
#include "jail/mount_tree.h"
#include "jail/seccomp_cache.h"

namespace corral {

namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr gid_t kTtyGid = 5;

const char* const kMaskedProcFiles[] = {
    "kcore",    "keys", "timer_list", "sysrq-trigger", "latency_stats", "sched_debug",
    "kallsyms", "kmsg", "config.gz",  "kpagecount",    "kpageflags",    "kpagecgroup"};
const char* const kMaskedProcDirs[] = {"acpi", "scsi", "asound", "driver", "firmware"};
const char* const kReadOnlyProc[] = {"sys", "irq", "bus", "fs"};

std::string sandbox_home(const SandboxSpec& spec) { return spec.root ? "/root" : "/home/sandbox"; }

std::string read_small_file(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) return {};
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// /etc/passwd and /etc/group for the sandbox: the image's own (if any)
// with the sandbox user added, else a minimal one.
std::pair<std::string, std::string> make_account_files(const BaseLayerRef& base, bool root) {
  std::string passwd, group;
  if (!base.passwd_source.empty()) {
    passwd = read_small_file(base.passwd_source + "/passwd");
    group = read_small_file(base.passwd_source + "/group");
  }
  if (passwd.empty()) {
    passwd =
        "root:x:0:0:root:/root:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  }
  if (group.empty()) {
    group = "root:x:0:\ntty:x:5:\nnogroup:x:65534:\n";
  }
  if (!passwd.empty() && passwd.back() != '\n') passwd += '\n';
  if (!group.empty() && group.back() != '\n') group += '\n';
  if (passwd.find(":x:1000:") == std::string::npos)
    passwd += "sandbox:x:1000:1000:corral sandbox:/home/sandbox:/bin/sh\n";
  if (group.find(":x:1000:") == std::string::npos) group += "sandbox:x:1000:\n";
  (void)root;
  return {passwd, group};
}

void add_string(SandboxPlan& plan, std::vector<char*>& into, std::string s) {
  plan.strings.push_back(std::move(s));
  into.push_back(nullptr);  // patched in finalize_pointers
}

// Dry-run: a writable mount's bind, and what its source looks like.
struct DryOverlay {
  std::size_t bind;
  struct stat source;
};

// Dry-run: each writable mount's lower, upper and work dirs in the layer
// (dry/N/...), and the overlay paths init mounts from (ADR 0016).
Status prepare_dry_overlays(WritableLayer& layer, const std::vector<DryOverlay>& overlays,
                            const std::string& stage_dir, std::vector<BindStep>& binds) {
  if (overlays.empty()) return ok();
  CORRAL_TRY(layer.make_dir("dry", 0700, 0, 0));
  for (std::size_t n = 0; n < overlays.size(); ++n) {
    const std::string dir = "dry/" + std::to_string(n);
    const struct stat& st = overlays[n].source;
    CORRAL_TRY(layer.make_dir(dir.c_str(), 0700, 0, 0));
    CORRAL_TRY(layer.make_dir((dir + "/lower").c_str(), 0755, 0, 0));
    CORRAL_TRY(layer.make_dir((dir + "/upper").c_str(), st.st_mode & 07777, st.st_uid, st.st_gid));
    CORRAL_TRY(layer.make_dir((dir + "/work").c_str(), 0700, 0, 0));
    BindStep& b = binds[overlays[n].bind];
    b.overlay_lower = stage_dir + "/" + dir + "/lower";
    b.overlay_upper = stage_dir + "/" + dir + "/upper";
    b.overlay_work = stage_dir + "/" + dir + "/work";
  }
  return ok();
}

}  // namespace

DryRunWrites collect_dry_run_writes(const PreparedSandbox& prepared, const SecretCheck& has_secret) {
  UniqueFd lower(open(prepared.plan.lower_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::vector<DryMountArea> mounts;
  for (const PreparedSandbox::DryMount& m : prepared.dry_mounts)
    mounts.push_back(DryMountArea{m.target, m.source_fd.get(), m.upper});
  return collect_layer_writes(prepared.layer->root_fd(), lower ? lower.get() : -1, mounts,
                              &prepared.dry_baseline, has_secret);
}

std::vector<std::string> landlock_writable_dirs(const SandboxSpec& spec) {
  return {"/workspace", "/tmp", "/var/tmp", sandbox_home(spec)};
}

std::string new_sandbox_id() {
  const std::uint64_t v = random_u64();
  char buf[32];
  snprintf(buf, sizeof buf, "sb-%012llx", static_cast<unsigned long long>(v & 0xffffffffffffULL));
  return buf;
}

std::string etc_hosts_for(const std::string& hostname) {
  return "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" +
         hostname + "\n";
}

Result<std::unique_ptr<PreparedSandbox>> prepare_sandbox(const SandboxSpec& spec,
                                                         const RunOptions& options,
                                                         Stage& failed_stage) {
  auto prepared = std::make_unique<PreparedSandbox>();
  PreparedSandbox& p = *prepared;
  SandboxPlan& plan = p.plan;
  p.id = options.sandbox_id.empty() ? new_sandbox_id() : options.sandbox_id;
  plan.long_lived = options.long_lived;

  failed_stage = Stage::kPlan;
  if (spec.argv.empty() && !options.long_lived)
    return make_error(ErrorCode::kInvalidArgument, "no command given",
                      "put the command after --, e.g. corral run -- echo hi");
  if (spec.limits.disk_bytes < kMiB)
    return make_error(ErrorCode::kInvalidArgument,
                      "disk limit " + std::to_string(spec.limits.disk_bytes) +
                          " bytes is too small to hold the sandbox's own files",
                      "use at least 1Mi");
  if (spec.workdir.empty() || spec.workdir[0] != '/')
    return make_error(ErrorCode::kInvalidArgument,
                      "workdir \"" + spec.workdir + "\" must be an absolute path");
  int abi = landlock_abi();
  if (abi < 1)
    return make_error(ErrorCode::kUnavailable, "Landlock is not available on this kernel",
                      "enable Landlock (CONFIG_SECURITY_LANDLOCK, lsm=landlock,...); run "
                      "`corral doctor`");

  // Dry-run (X2): asked by `corral run` (options) or by the spec (the daemon).
  const bool dry_run = options.dry_run || spec.dry_run;
  {
    auto network = plan_sandbox_network(spec.network, options.network, failed_stage);
    if (!network) return tl::unexpected(network.error());
    p.network = std::move(*network);
    p.network.policy.dry_run = dry_run;  // DNS and proxy answer it themselves
  }

  failed_stage = Stage::kUidRange;
  auto uids = UidRange::acquire();
  if (!uids) return tl::unexpected(uids.error());
  p.uids.emplace(std::move(*uids));
  const uid_t base = p.uids->host_base();
  plan.uid = spec.root ? 0 : kSandboxUid;
  plan.gid = spec.root ? 0 : kSandboxUid;
  plan.host_uid = base + plan.uid;
  plan.host_root = base;
  char map[64];
  snprintf(map, sizeof map, "0 %u %u\n", base, kUidBlockSize);
  plan.uid_map = plan.gid_map = map;
  plan.capabilities = spec.root ? root_capability_mask() : 0;

  failed_stage = Stage::kBaseLayer;
  std::string lower;
  std::vector<std::string> base_binds;
  if (options.base.rootfs.empty()) {
    auto host = ensure_host_base();
    if (!host) return tl::unexpected(host.error());
    lower = host->rootfs;
    base_binds = host->bind_dirs;
    p.base_in_use = std::move(host->in_use);
  } else {
    lower = options.base.rootfs;
  }
  if (lower.find_first_of(",:\\") != std::string::npos)
    return make_error(ErrorCode::kInvalidArgument,
                      "base layer path \"" + lower + "\" contains ',', ':' or '\\'",
                      "set CORRAL_DATA_DIR to a plain path");

  failed_stage = Stage::kMountSources;
  for (const std::string& dir : base_binds) {
    UniqueFd fd(open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return errno_error("open(" + dir + ")");
    auto tree = clone_tree(fd.get(), false, dir);
    if (!tree) return tl::unexpected(tree.error());
    plan.binds.push_back(BindStep{tree->get(), dir.substr(1), true, false, true, {}, {}, {}});
    p.bind_fds.push_back(std::move(*tree));
  }
  std::vector<std::string> landlock_writable;
  p.dry_run = dry_run;
  std::vector<DryOverlay> overlays;  // dry-run: writable mounts made overlays
  for (const MountSpec& m : spec.mounts) {
    auto rel = relative_target(m.target);
    if (!rel) return tl::unexpected(rel.error());
    auto opened = open_mount_source(m, options.mount_roots, options.cwd);
    if (!opened) return tl::unexpected(opened.error());
    const bool overlay = dry_run && m.writable;
    if (overlay && !opened->is_dir)
      return make_error(ErrorCode::kInvalidArgument,
                        "dry-run: the writable mount " + m.target +
                            " is a file, and only a directory can become a copy-on-write overlay",
                        "mount the directory that holds it, or mount the file read-only");
    auto tree = clone_tree(opened->fd.get(), m.writable && !overlay, opened->source);
    if (!tree) return tl::unexpected(tree.error());
    auto notice =
        idmap_user_mount(tree->get(), opened->fd.get(), m.writable, base, plan.uid, opened->source);
    if (!notice) return tl::unexpected(notice.error());
    if (!notice->empty()) p.notices.push_back(*notice);
    if (overlay) {
      // The overlay's root shows its upper dir: give it the owner and
      // mode the sandbox sees on the source (through the idmap, if any).
      struct stat st;
      if (fstat(tree->get(), &st) != 0) return errno_error("fstat(" + opened->source + ")");
      overlays.push_back(DryOverlay{plan.binds.size(), st});
      p.dry_mounts.push_back(PreparedSandbox::DryMount{
          m.target, std::move(opened->fd), "dry/" + std::to_string(overlays.size() - 1) + "/upper"});
    }
    plan.binds.push_back(BindStep{tree->get(), *rel, opened->is_dir, m.writable, false, {}, {}, {}});
    if (m.writable) landlock_writable.push_back("/" + *rel);
    p.bind_fds.push_back(std::move(*tree));
  }

  failed_stage = Stage::kWritableLayer;
  auto layer = WritableLayer::create(spec.limits.disk_bytes, effective_inodes(spec.limits));
  if (!layer) return tl::unexpected(layer.error());
  p.layer.emplace(std::move(*layer));
  WritableLayer& L = *p.layer;
  const uid_t user = base + plan.uid;
  const std::string home = sandbox_home(spec);
  auto [passwd, group] = make_account_files(options.base, spec.root);
  const std::string hosts = etc_hosts_for(spec.hostname);
  Status s = ok();
  auto step = [&](Status st) {
    if (s && !st) s = std::move(st);
  };
  step(L.make_dir("upper", 0755, base, base));
  step(L.make_dir("work", 0700, 0, 0));
  step(L.make_dir("root", 0755, 0, 0));
  step(L.make_dir("lower", 0755, 0, 0));
  step(L.make_dir("proc", 0555, 0, 0));
  step(L.make_dir("tmp", 01777, base, base));
  step(L.make_dir("shm", 01777, base, base));
  step(L.make_dir("upper/etc", 0755, base, base));
  step(L.make_file("upper/etc/passwd", passwd, 0644, base, base));
  step(L.make_file("upper/etc/group", group, 0644, base, base));
  step(L.make_file("upper/etc/hostname", spec.hostname + "\n", 0644, base, base));
  step(L.make_file("upper/etc/hosts", hosts, 0644, base, base));
  if (p.network.slot)
    step(L.make_file("upper/etc/resolv.conf", p.network.resolv_conf(), 0644, base, base));
  // Mount points corral needs, for images that lack them (scratch images).
  step(L.make_dir("upper/dev", 0755, base, base));
  step(L.make_dir("upper/proc", 0555, base, base));
  step(L.make_dir("upper/tmp", 01777, base, base));
  step(L.make_dir("upper/workspace", 0755, user, user));
  if (spec.root) {
    step(L.make_dir("upper/root", 0700, base, base));
  } else {
    step(L.make_dir("upper/home", 0755, base, base));
    step(L.make_dir("upper/home/sandbox", 0700, user, user));
  }
  if (!s) return tl::unexpected(s.error());
  CORRAL_TRY(prepare_dry_overlays(L, overlays, run_dir() + "/stage", plan.binds));
  if (dry_run) {
    UniqueFd upper(openat(L.root_fd(), "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!upper) return errno_error("openat(layer/upper)");
    p.dry_baseline = snapshot_upper(upper.get());
  }

  failed_stage = Stage::kSeccompCompile;
  auto filter = load_seccomp_program(run_dir());
  if (!filter) return tl::unexpected(filter.error());
  plan.seccomp = std::move(*filter);
  // Only a zygote asks (a fork, once per daemon and program).
  if (plan.long_lived)
    plan.seccomp_allows_userns_join = filter_lets_children_join_userns(plan.seccomp);

  failed_stage = Stage::kPlan;
  plan.layer_mount_fd = L.mount_fd();
  plan.stage_dir = run_dir() + "/stage";
  CORRAL_TRY(mkdir_p(plan.stage_dir, 0700));
  plan.root_dir = plan.stage_dir + "/root";
  plan.lower_dir = lower;
  plan.stage_lower = plan.stage_dir + "/lower";
  plan.stage_proc = plan.stage_dir + "/proc";
  plan.overlay_options = "lowerdir=" + plan.stage_lower + ",upperdir=" + plan.stage_dir +
                         "/upper,workdir=" + plan.stage_dir + "/work";
  plan.dev_dir = plan.root_dir + "/dev";
  plan.proc_dir = plan.root_dir + "/proc";
  plan.tmp_dir = plan.root_dir + "/tmp";
  plan.shm_dir = plan.root_dir + "/dev/shm";
  plan.pts_dir = plan.root_dir + "/dev/pts";
  plan.layer_tmp = plan.stage_dir + "/tmp";
  plan.layer_shm = plan.stage_dir + "/shm";
  plan.dev_options = "size=64k,nr_inodes=64,mode=0755,uid=" + std::to_string(base) +
                     ",gid=" + std::to_string(base);
  plan.devpts_options = "newinstance,ptmxmode=0666,mode=0620,gid=" + std::to_string(base + kTtyGid);
  for (const char* f : kMaskedProcFiles)
    plan.proc_steps.push_back({ProcStep::kMaskFile, plan.proc_dir + "/" + f});
  for (const char* d : kMaskedProcDirs)
    plan.proc_steps.push_back({ProcStep::kMaskDir, plan.proc_dir + "/" + d});
  for (const char* r : kReadOnlyProc)
    plan.proc_steps.push_back({ProcStep::kReadOnly, plan.proc_dir + "/" + r});
  plan.hostname = spec.hostname;
  plan.tty = options.tty;

  // Environment: nothing from the host, so no host secret can leak in.
  std::vector<std::pair<std::string, std::string>> env = {
      {"PATH", kDefaultPath},
      {"HOME", home},
      {"USER", spec.root ? "root" : "sandbox"},
      {"LOGNAME", spec.root ? "root" : "sandbox"},
      {"SHELL", "/bin/sh"},
      {"HOSTNAME", spec.hostname},
      {"LANG", "C.UTF-8"},
  };
  if (options.tty) {
    const char* term = getenv("TERM");
    env.emplace_back("TERM", term != nullptr ? term : "xterm");
  }
  auto set_env = [&env](const std::string& k, const std::string& v) {
    for (auto& kv : env) {
      if (kv.first == k) {
        kv.second = v;
        return;
      }
    }
    env.emplace_back(k, v);
  };
  for (const std::string& kv : options.base.env) {
    auto eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) set_env(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (p.network.slot) {
    for (const auto& [k, v] : p.network.proxy_env()) set_env(k, v);
  }
  for (const auto& [k, v] : spec.env) set_env(k, v);

  std::string path_value = kDefaultPath;
  for (const auto& [k, v] : env) {
    if (k == "PATH") path_value = v;
  }
  plan.default_path = path_value;
  const std::string cmd = spec.argv.empty() ? std::string() : spec.argv[0];
  if (cmd.empty()) {
    // A long-lived sandbox: each request names its own command.
  } else if (cmd.find('/') != std::string::npos) {
    plan.exec_candidates.push_back(cmd);
  } else {
    std::stringstream ss(path_value);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      if (dir.empty()) dir = ".";
      plan.exec_candidates.push_back(dir + "/" + cmd);
    }
  }
  plan.workdir = spec.workdir;
  // No RLIMIT_NPROC: the cgroup's pids.max is the process limit, and it
  // is the one that counts refusals for the report.
  plan.rlimits = {
      {RLIMIT_CORE, 0},
      {RLIMIT_NOFILE, 4096},
      {RLIMIT_FSIZE, static_cast<rlim_t>(spec.limits.disk_bytes)},
      {RLIMIT_MEMLOCK, 8 * kMiB},
  };

  // Landlock: read everywhere; write only where the sandbox is meant to.
  plan.landlock = make_landlock_plan(abi);
  std::vector<std::pair<std::string, bool>> rules = {{"/", false}};
  for (const std::string& w : landlock_writable_dirs(spec)) rules.emplace_back(w, true);
  for (const char* w : {"/dev/shm", "/dev/pts", "/dev/null", "/dev/zero", "/dev/full", "/dev/tty",
                        "/dev/ptmx"})
    rules.emplace_back(w, true);
  if (spec.root) {
    // Root may change the writable layer anywhere but /proc, /dev, /sys.
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(lower.c_str()), closedir);
    if (dir) {
      while (dirent* e = readdir(dir.get())) {
        std::string name = e->d_name;
        if (name == "." || name == ".." || name == "proc" || name == "dev" || name == "sys")
          continue;
        rules.emplace_back("/" + name, true);
      }
    }
  }
  for (const auto& w : landlock_writable) rules.emplace_back(w, true);
  for (const auto& [path, writable] : rules) plan.strings.push_back(path);
  // argv and envp strings follow; pointers are taken once `strings` is final.
  size_t argv_start = plan.strings.size();
  for (const auto& a : spec.argv) add_string(plan, plan.argv, a);
  size_t envp_start = plan.strings.size();
  for (const auto& [k, v] : env) add_string(plan, plan.envp, k + "=" + v);
  for (size_t i = 0; i < rules.size(); ++i)
    plan.landlock.rules.push_back({plan.strings[i].c_str(), rules[i].second});
  for (size_t i = 0; i < plan.argv.size(); ++i) plan.argv[i] = plan.strings[argv_start + i].data();
  for (size_t i = 0; i < plan.envp.size(); ++i) plan.envp[i] = plan.strings[envp_start + i].data();
  plan.argv.push_back(nullptr);
  plan.envp.push_back(nullptr);
  return prepared;
}

}  // namespace corral
