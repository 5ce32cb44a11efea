#include "daemon/gzip_inflater.h"

#include <zlib.h>

namespace corral::daemon {

struct GzipInflater::State {
  z_stream z{};
  bool ready = false;
  ~State() {
    if (ready) inflateEnd(&z);
  }
};

GzipInflater::GzipInflater() : state_(std::make_unique<State>()) {
  // 16 + MAX_WBITS: a gzip header and trailer, not raw deflate or zlib.
  state_->ready = inflateInit2(&state_->z, 16 + MAX_WBITS) == Z_OK;
}

GzipInflater::~GzipInflater() = default;
GzipInflater::GzipInflater(GzipInflater&&) noexcept = default;

Status GzipInflater::feed(std::string_view in, std::string& out) {
  if (!state_->ready) return make_error(ErrorCode::kInternal, "zlib could not be initialized");
  if (done_) {
    if (in.empty()) return ok();
    return make_error(ErrorCode::kInvalidArgument, "bytes after the end of the gzip stream");
  }
  z_stream& z = state_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  char buf[64 * 1024];
  while (z.avail_in > 0 || z.avail_out == 0) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    const int rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_STREAM_END) {
      done_ = true;
      if (z.avail_in != 0)
        return make_error(ErrorCode::kInvalidArgument, "bytes after the end of the gzip stream");
      return ok();
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // needs more input
    if (rc != Z_OK)
      return make_error(ErrorCode::kInvalidArgument, z.msg != nullptr ? z.msg : "inflate failed");
  }
  return ok();
}

}  // namespace corral::daemon
