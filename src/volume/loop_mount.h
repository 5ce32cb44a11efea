// The privileged half of volumes (ADR 0010): an ext4 image attached to a
// loop device and mounted on the host, and a bind of an opened directory.
// Every call here needs CAP_SYS_ADMIN in the host's namespaces (the daemon
// runs as root); nothing else in src/volume mounts.
//
// The loop device is configured with LO_FLAGS_AUTOCLEAR: it detaches itself
// when its last user goes (the host mount, and the bind mounts sandboxes
// hold), so a daemon killed at any moment leaks no device: one attached but
// never mounted is freed when the killed daemon's fd closes.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/result.h"

namespace corral::volume {

// Attaches `image_path` (opened O_RDWR) to a free loop device and mounts its
// ext4 file system on `target` (an existing empty directory) with nosuid and
// nodev. kUnavailable when the host has no loop devices (/dev/loop-control
// missing or refused): volumes fail closed.
Status mount_image(const std::string& image_path, const std::string& target);

// True when `target` is the root of a mount of a loop device whose backing
// file is `image_path` (a mount a killed daemon left, to be reused). False
// when nothing is mounted there; an error when something else is.
Result<bool> image_mounted_at(const std::string& image_path, const std::string& target);

// Detaches the mount on `target` (MNT_DETACH: sandboxes that hold a bind of
// the volume keep it until they end; the loop device clears itself then).
// Nothing mounted there is fine.
Status unmount(const std::string& target);

// The loop device ("/dev/loop3") that backs the mount on `target`, or "".
std::string loop_device_of(const std::string& target);

// Binds the directory `dir_fd` (O_PATH) refers to onto `target`, by the fd
// (/proc/self/fd/N): what was checked is what is bound, whatever a path to
// it now leads to.
Status bind_fd(int dir_fd, const std::string& target);

}  // namespace corral::volume
