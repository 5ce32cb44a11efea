// The bytes of a task's inline inputs (D6, issue 15), kept as files beside
// the state database (`<state db>-inputs/<task id>.<index>`) instead of
// blobs inside it. A MiB in SQLite is 256 WAL frames written on the
// submit's commit path and copied again by every checkpoint (about a
// thousand syscalls and an fsync per MiB); a file is one write. The rows
// of task_inputs keep each input's sha256 and say which bytes are in a file
// (in_file = 1, schema 9); rows of older releases keep their blob.
//
// Order: a file is complete (and, with power-loss durability, synced) before
// the row that names it commits; it is removed after its row is deleted. A
// crash between the two leaves a file no row names, which the next open
// removes (StateStore::open). Task ids are [A-Za-z0-9._:-]{1,128}, so a
// file name never holds a '/' and is never "." or "..".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral {

class TaskInputFiles {
 public:
  // Opens (making it 0700 if missing) the directory. `sync`: fsync each file
  // and the directory before a write returns (power-loss durability).
  static Result<TaskInputFiles> open(const std::string& dir, bool sync);

  // The whole of `bytes` as the file of (task, index), replacing one that
  // is there: written to a temporary name, then renamed.
  Status write(std::string_view task_id, std::size_t index, std::string_view bytes) const;
  // Its bytes; kNotFound if there is no file.
  Result<std::string> read(std::string_view task_id, std::size_t index) const;
  // Best effort: a file left behind is removed by the next sweep.
  void remove(std::string_view task_id, std::size_t index) const;

  // Every file's (task id, index); names that are not ours (a temporary
  // file, a name that does not parse) are removed on the way.
  Result<std::vector<std::pair<std::string, std::size_t>>> list_and_clean() const;

  const std::string& dir() const { return dir_; }

 private:
  TaskInputFiles(std::string dir, UniqueFd fd, bool sync)
      : dir_(std::move(dir)), dir_fd_(std::move(fd)), sync_(sync) {}
  static std::string name_of(std::string_view task_id, std::size_t index);

  std::string dir_;
  UniqueFd dir_fd_;
  bool sync_ = false;
};

}  // namespace corral
