// A streaming gzip decoder (zlib) for the E2B facade's compressed uploads:
// fed the body as it arrives, it hands out what it decoded. The caller
// bounds the output (the sandbox's disk limit, serve.max_upload), so a
// small body that inflates to a huge file is cut off there.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace corral::daemon {

class GzipInflater {
 public:
  GzipInflater();
  ~GzipInflater();
  GzipInflater(GzipInflater&&) noexcept;
  GzipInflater& operator=(GzipInflater&&) = delete;
  // Appends what `in` decodes to to `out`. kInvalidArgument for a corrupt
  // stream, or bytes after its end.
  Status feed(std::string_view in, std::string& out);
  // True once the gzip stream's end (and its checksum) has been read.
  bool done() const { return done_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  bool done_ = false;
};

}  // namespace corral::daemon
