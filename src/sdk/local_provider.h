// LocalProvider: SandboxProvider in-process, no daemon (REQUIREMENTS.md
// P2). It runs the daemon's own engine (corral::daemon::SandboxService with
// its state store, audit log, cgroups, metrics and sandbox factory) and
// calls it directly instead of over HTTP, so sandboxes behave exactly as
// under `corral serve`: same limits, lifecycle, audit records, file
// confinement and exit codes.
//
// Call LocalProvider::open() early, FIRST THING in main() (or in a test's
// global setup), before the process starts any thread: it forks the
// sandbox factory, and a fork of a multithreaded process may catch another
// thread holding a lock (see runtime/sandbox_factory.h). It also:
//   - needs root (it creates namespaces, cgroups and mounts);
//   - sets CORRAL_DATA_DIR to options.data_dir for the whole process, as
//     `corral serve --data-dir` does: images and the host base skeleton are
//     looked up there;
//   - ignores SIGPIPE if it was at its default (a command that closes its
//     stdin must not kill the caller);
//   - keeps the factory process as a child of the calling thread, which
//     must live as long as the provider (it dies with that thread).
// Only one LocalProvider (or daemon) may use a data dir at a time: the
// audit log is locked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sdk/sandbox_provider.h"

namespace corral::daemon {
class SandboxService;
}

namespace corral::sdk {

struct LocalOptions {
  // Private and absolute: state.db, audit.log, images/, the host base.
  std::string data_dir;
  // Capacity, as serve.capacity in docs/config.md: 0 means "auto" (a share
  // of the host's memory, computed like the daemon does).
  std::uint32_t max_sandboxes = 256;
  std::uint64_t max_memory_bytes = 0;
  std::uint64_t max_disk_bytes = 0;
  // Per stream, exec() wait mode (serve.max_exec_output).
  std::uint64_t max_exec_output_bytes = std::uint64_t{64} << 20;
  // On destruction, destroy every sandbox still alive. Without it they keep
  // running, and the next LocalProvider (or `corral serve`) on the same
  // data dir re-attaches to them.
  bool destroy_on_close = true;
};

class LocalProvider : public SandboxProvider {
 public:
  static Result<std::unique_ptr<LocalProvider>> open(LocalOptions options);
  ~LocalProvider() override;
  LocalProvider(const LocalProvider&) = delete;
  LocalProvider& operator=(const LocalProvider&) = delete;

  Result<api::SandboxInfo> create_sandbox(const api::CreateSandboxRequest& request,
                                          std::optional<std::string> idempotency_key) override;
  Result<api::ExecResult> exec(std::string_view id, const api::ExecRequest& request) override;
  Result<api::ExecResult> exec_stream(std::string_view id, const api::ExecRequest& request,
                                      const OutputSink& sink) override;
  Result<api::UploadResult> put_file_from(std::string_view id, std::string_view path,
                                          const ByteSource& source,
                                          std::optional<std::uint64_t> length,
                                          std::uint32_t mode) override;
  Result<std::uint64_t> get_file_to(std::string_view id, std::string_view path,
                                    const ByteSink& sink) override;
  Result<api::SandboxInfo> inspect(std::string_view id) override;
  Result<std::vector<api::SandboxInfo>> list(bool include_cleaned) override;
  Result<api::SandboxInfo> destroy_sandbox(std::string_view id) override;

  // The engine, for what the interface does not cover (processes, extend).
  daemon::SandboxService& service();
  const std::string& data_dir() const;

 private:
  struct State;
  explicit LocalProvider(std::unique_ptr<State> state);
  Result<api::ExecResult> run_exec(std::string_view id, const api::ExecRequest& request,
                                   const OutputSink* sink);
  std::unique_ptr<State> state_;
};

}  // namespace corral::sdk
