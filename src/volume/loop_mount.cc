#include "volume/loop_mount.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "base/unique_fd.h"

namespace corral::volume {
namespace {

constexpr int kAttachAttempts = 16;
constexpr unsigned kLoopMajor = 7;

std::string backing_file(dev_t dev) {
  std::ifstream in("/sys/dev/block/" + std::to_string(major(dev)) + ":" +
                   std::to_string(minor(dev)) + "/loop/backing_file");
  std::string line;
  std::getline(in, line);
  return line;
}

// The device of the mount whose root is `target`, or 0 when `target` is
// not a mount point (same device as its parent).
Result<dev_t> mounted_device(const std::string& target) {
  struct stat st {}, parent {};
  if (::lstat(target.c_str(), &st) != 0) return errno_error("lstat(" + target + ")");
  if (::lstat((target + "/..").c_str(), &parent) != 0) return errno_error("lstat(" + target + "/..)");
  if (st.st_dev == parent.st_dev) return dev_t{0};
  return st.st_dev;
}

}  // namespace

Status mount_image(const std::string& image_path, const std::string& target) {
  UniqueFd image(::open(image_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!image) return errno_error("open(" + image_path + ")");
  UniqueFd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control)
    return make_error(ErrorCode::kUnavailable,
                      "volumes need loop devices: open(/dev/loop-control): " +
                          std::string(std::strerror(errno)),
                      "load the loop module (modprobe loop) and run the daemon as root with "
                      "access to /dev/loop-control");
  // Another process may take the free device between GET_FREE and
  // CONFIGURE (EBUSY): ask again.
  for (int attempt = 0; attempt < kAttachAttempts; ++attempt) {
    int n = ::ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (n < 0)
      return make_error(ErrorCode::kUnavailable,
                        "no free loop device: LOOP_CTL_GET_FREE: " + std::string(std::strerror(errno)),
                        "the host's loop devices are all in use (losetup -a)");
    const std::string dev = "/dev/loop" + std::to_string(n);
    UniqueFd loop(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
    if (!loop) {
      if (errno == ENOENT || errno == ENXIO) continue;
      return errno_error("open(" + dev + ")");
    }
    loop_config config {};
    config.fd = static_cast<std::uint32_t>(image.get());
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), image_path.c_str(),
                 LO_NAME_SIZE - 1);
    if (::ioctl(loop.get(), LOOP_CONFIGURE, &config) != 0) {
      if (errno == EBUSY) continue;
      return errno_error("ioctl(" + dev + ", LOOP_CONFIGURE)", errno,
                         "LOOP_CONFIGURE needs Linux 5.8 or later");
    }
    // The mount holds the device from here; closing `loop` then leaves it
    // to the mount (autoclear). If the mount fails, the close detaches it.
    if (::mount(dev.c_str(), target.c_str(), "ext4", MS_NOSUID | MS_NODEV,
                "errors=remount-ro") != 0)
      return errno_error("mount(" + dev + " (" + image_path + ") on " + target + ", ext4)");
    return ok();
  }
  return make_error(ErrorCode::kUnavailable,
                    "no free loop device after " + std::to_string(kAttachAttempts) + " attempts",
                    "other processes are taking loop devices as fast as they free up; retry");
}

Result<bool> image_mounted_at(const std::string& image_path, const std::string& target) {
  auto dev = mounted_device(target);
  if (!dev) return tl::unexpected(dev.error());
  if (*dev == 0) return false;
  if (major(*dev) == kLoopMajor && backing_file(*dev) == image_path) return true;
  return make_error(ErrorCode::kPermissionDenied,
                    target + " has a mount corral did not make (device " +
                        std::to_string(major(*dev)) + ":" + std::to_string(minor(*dev)) + ")",
                    "unmount it; corral mounts only the volume's own image there");
}

Status unmount(const std::string& target) {
  // Every stacked mount on `target`, so none is left behind.
  for (int i = 0; i < 64; ++i) {
    auto dev = mounted_device(target);
    if (!dev && dev.error().sys_errno == ENOENT) return ok();
    if (!dev) return tl::unexpected(dev.error());
    if (*dev == 0) return ok();
    if (::umount2(target.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0)
      return errno_error("umount2(" + target + ", MNT_DETACH)");
  }
  return make_error(ErrorCode::kInternal, "more than 64 mounts stacked on " + target);
}

std::string loop_device_of(const std::string& target) {
  auto dev = mounted_device(target);
  if (!dev || *dev == 0 || major(*dev) != kLoopMajor) return {};
  return "/dev/loop" + std::to_string(minor(*dev));
}

Status bind_fd(int dir_fd, const std::string& target) {
  const std::string source = "/proc/self/fd/" + std::to_string(dir_fd);
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return errno_error("mount(bind fd -> " + target + ")");
  return ok();
}

}  // namespace corral::volume
