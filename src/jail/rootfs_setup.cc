#include "jail/rootfs_setup.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "jail/mount_tree.h"
#include "jail/stage.h"
#include "sys/syscalls.h"

namespace corral {

namespace {

constexpr DevNode kDevNodes[] = {
    {"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9},
    {"tty", 5, 0},
};

struct DevLink {
  const char* name;
  const char* target;
};
constexpr DevLink kDevLinks[] = {
    {"fd", "/proc/self/fd"},         {"stdin", "/proc/self/fd/0"},
    {"stdout", "/proc/self/fd/1"},   {"stderr", "/proc/self/fd/2"},
    {"ptmx", "pts/ptmx"},
};

[[noreturn]] void fail(const SandboxPlan& plan, Stage stage, const char* detail) {
  child_fail(plan.control_fd, static_cast<int>(stage), errno, detail);
}

void idmap_tree(const SandboxPlan& plan, int tree, int userns_fd, Stage stage, const char* what) {
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<std::uint64_t>(userns_fd);
  if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
    fail(plan, stage, what);
}

void bind_tree(const SandboxPlan& plan, int root_fd, const BindStep& step, Stage stage) {
  int target = open_mount_target(root_fd, step.target.c_str(), step.is_dir);
  if (target < 0) fail(plan, stage, step.target.c_str());
  if (move_mount(step.source_fd, "", target, "",
                 MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    fail(plan, stage, step.target.c_str());
  close(target);
}

// Dry-run (ADR 0016): the mount's read-only tree becomes the lower dir of
// an overlay whose upper dir is in the writable layer; the overlay goes
// where the bind would have gone, so the host copy never changes.
void overlay_tree(const SandboxPlan& plan, int root_fd, const BindStep& step, Stage stage) {
  const char* what = step.target.c_str();
  if (move_mount(step.source_fd, "", AT_FDCWD, step.overlay_lower.c_str(),
                 MOVE_MOUNT_F_EMPTY_PATH) != 0)
    fail(plan, stage, what);
  int fs = fsopen("overlay", FSOPEN_CLOEXEC);
  if (fs < 0 ||
      fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", step.overlay_lower.c_str(), 0) != 0 ||
      fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", step.overlay_upper.c_str(), 0) != 0 ||
      fsconfig(fs, FSCONFIG_SET_STRING, "workdir", step.overlay_work.c_str(), 0) != 0 ||
      fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    fail(plan, stage, what);
  int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (mnt < 0) fail(plan, stage, what);
  close(fs);
  int target = open_mount_target(root_fd, what, true);
  if (target < 0) fail(plan, stage, what);
  if (move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    fail(plan, stage, what);
  close(target);
  close(mnt);
}

void bind_path(const SandboxPlan& plan, const char* from, const char* to, Stage stage) {
  if (mount(from, to, nullptr, MS_BIND, nullptr) != 0) fail(plan, stage, to);
  if (mount(nullptr, to, nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, nullptr) != 0)
    fail(plan, stage, to);
}

void setup_dev(const SandboxPlan& plan) {
  const char* dev = plan.dev_dir.c_str();
  if (mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, plan.dev_options.c_str()) != 0)
    fail(plan, Stage::kDev, dev);
  int dev_fd = open(dev, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dev_fd < 0) fail(plan, Stage::kDev, dev);
  for (const DevNode& node : kDevNodes) {
    if (mknodat(dev_fd, node.name, S_IFCHR | 0666, makedev(node.major, node.minor)) != 0 ||
        fchownat(dev_fd, node.name, plan.host_root, plan.host_root, AT_SYMLINK_NOFOLLOW) != 0)
      fail(plan, Stage::kDev, node.name);
  }
  for (const DevLink& link : kDevLinks) {
    if (symlinkat(link.target, dev_fd, link.name) != 0 ||
        fchownat(dev_fd, link.name, plan.host_root, plan.host_root, AT_SYMLINK_NOFOLLOW) != 0)
      fail(plan, Stage::kDev, link.name);
  }
  if (mkdirat(dev_fd, "pts", 0755) != 0 || mkdirat(dev_fd, "shm", 01777) != 0 ||
      fchownat(dev_fd, "pts", plan.host_root, plan.host_root, 0) != 0 ||
      fchownat(dev_fd, "shm", plan.host_root, plan.host_root, 0) != 0)
    fail(plan, Stage::kDev, "pts/shm");
  close(dev_fd);
  if (mount("devpts", plan.pts_dir.c_str(), "devpts", MS_NOSUID | MS_NOEXEC,
            plan.devpts_options.c_str()) != 0)
    fail(plan, Stage::kDev, "devpts");
  bind_path(plan, plan.layer_shm.c_str(), plan.shm_dir.c_str(), Stage::kDev);
}

void setup_proc(const SandboxPlan& plan) {
  if (mount(plan.stage_proc.c_str(), plan.proc_dir.c_str(), nullptr, MS_MOVE, nullptr) != 0)
    fail(plan, Stage::kProc, "move proc");
  for (const ProcStep& step : plan.proc_steps) {
    const char* path = step.path.c_str();
    struct stat st;
    if (lstat(path, &st) != 0) continue;  // not on this kernel
    switch (step.kind) {
      case ProcStep::kMaskFile:
        if (mount("/dev/null", path, nullptr, MS_BIND, nullptr) != 0)
          fail(plan, Stage::kProc, path);
        break;
      case ProcStep::kMaskDir:
        if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=0,nr_inodes=1,mode=0555") != 0)
          fail(plan, Stage::kProc, path);
        break;
      case ProcStep::kReadOnly:
        if (mount(path, path, nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
            mount(nullptr, path, nullptr,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  nullptr) != 0)
          fail(plan, Stage::kProc, path);
        break;
    }
  }
}

}  // namespace

void stage_writable_layer(const SandboxPlan& plan) {
  // Nothing we mount may propagate back to the host.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    fail(plan, Stage::kMountPropagation, "/");
  if (move_mount(plan.layer_mount_fd, "", AT_FDCWD, plan.stage_dir.c_str(),
                 MOVE_MOUNT_F_EMPTY_PATH) != 0)
    fail(plan, Stage::kStageWritableLayer, plan.stage_dir.c_str());
  if (mount("proc", plan.stage_proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "hidepid=invisible") != 0)
    fail(plan, Stage::kProc, "mount proc");
}

void setup_rootfs(const SandboxPlan& plan, int userns_fd) {
  // The base layer, idmapped and read-only, becomes the overlay's lower dir.
  int lower = open_tree(AT_FDCWD, plan.lower_dir.c_str(),
                        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
  if (lower < 0) fail(plan, Stage::kOverlay, plan.lower_dir.c_str());
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (mount_setattr(lower, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
    fail(plan, Stage::kOverlay, "lower attributes");
  idmap_tree(plan, lower, userns_fd, Stage::kOverlay, "idmap lower");
  if (move_mount(lower, "", AT_FDCWD, plan.stage_lower.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    fail(plan, Stage::kOverlay, plan.stage_lower.c_str());
  close(lower);
  if (mount("overlay", plan.root_dir.c_str(), "overlay", MS_NOSUID | MS_NODEV,
            plan.overlay_options.c_str()) != 0)
    fail(plan, Stage::kOverlay, plan.overlay_options.c_str());
  int root_fd = open(plan.root_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) fail(plan, Stage::kOverlay, plan.root_dir.c_str());
  for (const BindStep& step : plan.binds) {
    Stage stage = step.from_base ? Stage::kBaseBinds : Stage::kUserMounts;
    if (step.from_base) idmap_tree(plan, step.source_fd, userns_fd, stage, step.target.c_str());
    if (step.overlay_lower.empty())
      bind_tree(plan, root_fd, step, stage);
    else
      overlay_tree(plan, root_fd, step, stage);
  }
  close(root_fd);
  setup_dev(plan);
  setup_proc(plan);
  bind_path(plan, plan.layer_tmp.c_str(), plan.tmp_dir.c_str(), Stage::kTmp);
}

int open_sandbox_pty(const SandboxPlan& plan, int* index) {
  char ptmx[4096];
  snprintf(ptmx, sizeof ptmx, "%s/ptmx", plan.pts_dir.c_str());
  int master = open(ptmx, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) fail(plan, Stage::kPty, "open ptmx");
  int unlock = 0;
  if (ioctl(master, TIOCSPTLCK, &unlock) != 0) fail(plan, Stage::kPty, "TIOCSPTLCK");
  int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) fail(plan, Stage::kPty, "TIOCGPTPEER");
  if (fchown(slave, plan.host_uid, static_cast<gid_t>(-1)) != 0)
    fail(plan, Stage::kPty, "fchown pty");
  unsigned int number = 0;
  if (ioctl(master, TIOCGPTN, &number) != 0) fail(plan, Stage::kPty, "TIOCGPTN");
  *index = static_cast<int>(number);
  // Send the master to the launcher, which relays it to the user's terminal.
  ControlMessage msg{};
  msg.type = ControlType::kPtyMaster;
  iovec iov{&msg, sizeof msg};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &master, sizeof(int));
  if (sendmsg(plan.control_fd, &mh, MSG_NOSIGNAL) < 0) fail(plan, Stage::kPty, "send master");
  close(master);
  return slave;
}

void enter_rootfs(const SandboxPlan& plan) {
  // pivot_root(".", ".") stacks the old root under the new one; detaching
  // it leaves nothing of the host reachable from this mount namespace.
  if (chdir(plan.root_dir.c_str()) != 0) fail(plan, Stage::kPivotRoot, plan.root_dir.c_str());
  if (sys::pivot_root(".", ".") != 0) fail(plan, Stage::kPivotRoot, "pivot_root");
  if (umount2(".", MNT_DETACH) != 0) fail(plan, Stage::kPivotRoot, "detach old root");
  if (chdir("/") != 0) fail(plan, Stage::kPivotRoot, "chdir /");
}

}  // namespace corral
