#include "store/task_input_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "base/fs.h"
#include "base/random.h"

namespace corral {

namespace {

// "<task id>.<index>": the index is the part after the last '.'.
bool parse_name(const std::string& name, std::string* id, std::size_t* index) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 >= name.size()) return false;
  std::size_t v = 0;
  for (std::size_t i = dot + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || i - dot > 9) return false;
    v = v * 10 + static_cast<std::size_t>(name[i] - '0');
  }
  *id = name.substr(0, dot);
  *index = v;
  return true;
}

}  // namespace

Result<TaskInputFiles> TaskInputFiles::open(const std::string& dir, bool sync) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return errno_error("mkdir(" + dir + ")", errno,
                       "the state database's directory must be writable");
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return errno_error("open(" + dir + ")");
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return errno_error("fstat(" + dir + ")");
  if ((st.st_mode & 077) != 0 && fchmod(fd.get(), 0700) != 0)
    return errno_error("chmod 0700 " + dir);
  return TaskInputFiles(dir, std::move(fd), sync);
}

std::string TaskInputFiles::name_of(std::string_view task_id, std::size_t index) {
  return std::string(task_id) + "." + std::to_string(index);
}

Status TaskInputFiles::write(std::string_view task_id, std::size_t index,
                             std::string_view bytes) const {
  const std::string name = name_of(task_id, index);
  char suffix[17];
  snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random_u64()));
  const std::string tmp = std::string(".tmp-") + suffix;
  const std::string shown = dir_ + "/" + name;
  UniqueFd out(openat(dir_fd_.get(), tmp.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return errno_error("creating " + shown);
  Status st = write_all(out.get(), bytes, shown);
  if (st && sync_ && fsync(out.get()) != 0) st = errno_error("fsync(" + shown + ")");
  out.reset();
  if (st && renameat(dir_fd_.get(), tmp.c_str(), dir_fd_.get(), name.c_str()) != 0)
    st = errno_error("rename to " + shown);
  if (!st) {
    unlinkat(dir_fd_.get(), tmp.c_str(), 0);
    return st;
  }
  if (sync_ && fsync(dir_fd_.get()) != 0) return errno_error("fsync(" + dir_ + ")");
  return ok();
}

Result<std::string> TaskInputFiles::read(std::string_view task_id, std::size_t index) const {
  const std::string name = name_of(task_id, index);
  const std::string shown = dir_ + "/" + name;
  UniqueFd in(openat(dir_fd_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in) return errno_error("open(" + shown + ")");
  struct stat st;
  if (fstat(in.get(), &st) != 0) return errno_error("fstat(" + shown + ")");
  if (!S_ISREG(st.st_mode))
    return make_error(ErrorCode::kInternal, shown + " is not a regular file");
  return read_up_to(in.get(), static_cast<std::size_t>(st.st_size), shown);
}

void TaskInputFiles::remove(std::string_view task_id, std::size_t index) const {
  (void)unlinkat(dir_fd_.get(), name_of(task_id, index).c_str(), 0);
}

Result<std::vector<std::pair<std::string, std::size_t>>> TaskInputFiles::list_and_clean() const {
  auto names = read_dir_names(dir_fd_.get(), dir_);
  if (!names) return tl::unexpected<Error>(names.error());
  std::vector<std::pair<std::string, std::size_t>> out;
  for (const std::string& name : *names) {
    std::string id;
    std::size_t index = 0;
    if (name.rfind(".tmp-", 0) == 0 || !parse_name(name, &id, &index)) {
      (void)unlinkat(dir_fd_.get(), name.c_str(), 0);
      continue;
    }
    out.emplace_back(std::move(id), index);
  }
  return out;
}

}  // namespace corral
