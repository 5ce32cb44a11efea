// The generic copy engine of the file API: copy_file_range between regular
// files, splice through a pipe, else read/write with one bounded buffer.
#include "fs/copy_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "base/fs.h"

namespace corral {

namespace {

enum class CopyMethod { kCopyFileRange, kSplice, kReadWrite };

std::string_view method_name(CopyMethod m) {
  switch (m) {
    case CopyMethod::kCopyFileRange:
      return "copy_file_range";
    case CopyMethod::kSplice:
      return "splice";
    case CopyMethod::kReadWrite:
      return "read/write";
  }
  return "read/write";
}

// Waits for a non-blocking fd; false on a poll error.
bool wait_ready(int fd, short events) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, -1);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

tl::unexpected<Error> copy_error(std::string_view call, int err) {
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
    return tl::unexpected<Error>(Error{ErrorCode::kResourceExhausted,
                                       std::string(call) + ": the sandbox's disk limit is full [" +
                                           std::string(errno_name(err)) + "]",
                                       "free space in the sandbox or give it a larger disk limit",
                                       err});
  }
  return errno_error(call, err);
}

// read(2) retried on EINTR, waiting on EAGAIN.
ssize_t read_some(int fd, char* buf, std::size_t n) {
  for (;;) {
    ssize_t r = ::read(fd, buf, n);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    if (errno == EAGAIN && wait_ready(fd, POLLIN)) continue;
    return -1;
  }
}

}  // namespace

Result<std::uint64_t> copy_stream(int from_fd, int to_fd, std::uint64_t max_bytes,
                                  CopyStats* stats) {
  struct stat from_st {};
  struct stat to_st {};
  if (::fstat(from_fd, &from_st) != 0) return errno_error("copy_stream: fstat(source)");
  if (::fstat(to_fd, &to_st) != 0) return errno_error("copy_stream: fstat(destination)");
  CopyMethod method = CopyMethod::kReadWrite;
  if (S_ISREG(from_st.st_mode) && S_ISREG(to_st.st_mode)) {
    method = CopyMethod::kCopyFileRange;
  } else if (S_ISFIFO(from_st.st_mode) || S_ISFIFO(to_st.st_mode)) {
    method = CopyMethod::kSplice;
  }
  std::unique_ptr<char[]> buffer;  // allocated only for read/write
  std::uint64_t copied = 0;
  auto finish = [&]() {
    if (stats != nullptr) {
      stats->bytes = copied;
      stats->buffer_bytes = buffer ? kCopyBufferBytes : 0;
      stats->method = method_name(method);
    }
  };

  for (;;) {
    std::uint64_t remaining = max_bytes - copied;
    if (remaining == 0) {
      // The limit is reached: one more byte of input means the stream is
      // too large. Nothing past the limit is written.
      char probe;
      ssize_t n = read_some(from_fd, &probe, 1);
      finish();
      if (n < 0) return errno_error("copy_stream: read", errno);
      if (n > 0) {
        return make_error(ErrorCode::kResourceExhausted,
                          "copy_stream: the input is larger than the limit of " +
                              std::to_string(max_bytes) + " bytes",
                          "send a smaller file or raise the upload limit");
      }
      return copied;
    }
    std::size_t chunk =
        static_cast<std::size_t>(std::min<std::uint64_t>(remaining, kCopyBufferBytes));
    ssize_t n = -1;
    if (method == CopyMethod::kCopyFileRange) {
      n = ::copy_file_range(from_fd, nullptr, to_fd, nullptr, chunk, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
                    errno == EBADF)) {
        method = CopyMethod::kReadWrite;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        finish();
        return copy_error("copy_stream: copy_file_range", err);
      }
    } else if (method == CopyMethod::kSplice) {
      n = ::splice(from_fd, nullptr, to_fd, nullptr, chunk, SPLICE_F_MOVE);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        if (wait_ready(from_fd, POLLIN) && wait_ready(to_fd, POLLOUT)) continue;
      }
      if (n < 0 && errno == EINVAL) {  // e.g. an O_APPEND destination
        method = CopyMethod::kReadWrite;
        continue;
      }
      if (n < 0) {
        int err = errno;
        finish();
        return copy_error("copy_stream: splice", err);
      }
    } else {
      if (!buffer) buffer.reset(new char[kCopyBufferBytes]);
      n = read_some(from_fd, buffer.get(), chunk);
      if (n < 0) {
        int err = errno;
        finish();
        return errno_error("copy_stream: read", err);
      }
      if (n > 0 && !write_all(to_fd, std::string_view(buffer.get(), static_cast<std::size_t>(n)))) {
        int err = errno;
        finish();
        return copy_error("copy_stream: write", err);
      }
    }
    if (n == 0) break;  // end of input
    copied += static_cast<std::uint64_t>(n);
  }
  finish();
  return copied;
}

}  // namespace corral
