// Background processes: bound to their own timeout, a kill or their
// sandbox's end, never to a request. Their stdout and stderr are files on
// the sandbox's writable layer (out of the sandbox's view, counted against
// its disk limit), so output keeps its offsets whatever happens to the
// request or to the daemon. Both corral's process API (exec_api.cc) and the
// E2B facade's Process service (envd_process_api.cc) start them here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_model.h"
#include "base/unique_fd.h"
#include "daemon/api_result.h"
#include "daemon/process_entry.h"
#include "secrets/redactor.h"

namespace corral::daemon {

class SandboxService;
struct SandboxEntry;

// "corral-daemon/<pid>.stdout", relative to the layer root.
std::string process_output_name(const std::string& process_id, std::string_view stream);

// Starts `request` in `sandbox` (which the caller holds leased): output
// files, a stdin pipe kept by the daemon (with the initial stdin, at most
// 1 MiB, already in it), the spawn, and a bounded wait for the zygote to
// say whether it runs. A process that could not start is returned too
// (phase kFailed), its reason written to its stderr file.
ApiResult<std::shared_ptr<ProcessEntry>> start_background_process(
    SandboxService& sandboxes, const std::shared_ptr<SandboxEntry>& sandbox,
    const api::ExecRequest& request, std::optional<std::string> tag = std::nullopt);

// One output file of a background process, read from an offset as it
// grows, through the sandbox's redactor (S3): what is handed out never
// holds a secret, and the start of what may be one is held back until the
// rest arrives or the process has ended (finish).
class OutputFollower {
 public:
  // The file `stream` of `process_id` on the layer `layer_fd`; `from_end`:
  // start at its current end (what was written before is not shown).
  static std::optional<OutputFollower> open(int layer_fd, const std::string& process_id,
                                            std::string_view stream,
                                            std::shared_ptr<const secrets::RedactionSet> redaction,
                                            bool from_end);
  // New output since the last call, redacted, at most `max` raw bytes read.
  // Empty when nothing new was written.
  std::string read_some(std::size_t max = 64 * 1024);
  // What the redactor still holds: call once, after the process ended and
  // read_some returned empty.
  std::string finish();

 private:
  UniqueFd file_;
  std::uint64_t pos_ = 0;
  std::string raw_;  // read buffer, kept between calls (a stream polls it)
  std::unique_ptr<secrets::RedactStream> redactor_;
};

}  // namespace corral::daemon
