#include "jail/uid_range.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <string>

#include "base/paths.h"
#include "base/random.h"

namespace corral {

Result<UidRange> UidRange::acquire() {
  std::string dir = run_dir() + "/uids";
  if (mkdir(run_dir().c_str(), 0700) != 0 && errno != EEXIST)
    return errno_error("mkdir(" + run_dir() + ")");
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno_error("mkdir(" + dir + ")");
  // Start at a random slot so concurrent launchers rarely contend.
  const auto start = static_cast<std::uint32_t>(random_below(kUidBlockSlots));
  for (std::uint32_t i = 0; i < kUidBlockSlots; ++i) {
    std::uint32_t slot = (start + i) % kUidBlockSlots;
    std::string path = dir + "/" + std::to_string(slot);
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return errno_error("open(" + path + ")");
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return UidRange(std::move(fd), slot);
    if (errno != EWOULDBLOCK) return errno_error("flock(" + path + ")");
  }
  return make_error(ErrorCode::kResourceExhausted,
                    "all " + std::to_string(kUidBlockSlots) + " uid blocks are in use",
                    "too many sandboxes run at once on this host");
}

}  // namespace corral
