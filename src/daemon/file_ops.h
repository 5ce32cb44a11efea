// What the daemon's file handlers (file_api.cc) and the SDK's LocalProvider
// share, so that a file operation answers and is audited alike through
// either: the sandbox's confined root, the owner of new files, how a
// failure maps to an API error, and the audit records (X1: every file
// operation, refused ones too).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_model.h"
#include "base/result.h"
#include "fs/confined_root.h"
#include "secrets/redactor.h"

namespace corral::daemon {

class SandboxService;
struct SandboxEntry;

// The sandbox's root, resolved by file descriptor; paths may cross into
// the sandbox's own mounts (/tmp, volumes) but never reach kernel file
// systems, nor corral's secret files (/run/secrets: 403 secret_file). A
// kernel without openat2 is 503, anything else 409.
tl::expected<ConfinedRoot, api::ApiError> open_sandbox_root(SandboxService& service,
                                                            const SandboxEntry& sandbox);

// What the file API says about names passes the sandbox's redactor, the
// one its exec output passes (S3): names and link targets in list and stat
// answers, paths echoed in answers, error messages. A file the sandbox
// names after a secret (or links to one) shows "[REDACTED:<name>]".
class FileRedactor {
 public:
  // A null set passes everything through.
  explicit FileRedactor(std::shared_ptr<const secrets::RedactionSet> set);
  FileRedactor(SandboxService& service, const std::string& sandbox);
  std::string text(std::string_view s);
  void info(FileInfo& f);
  api::ApiError error(api::ApiError e);

 private:
  std::optional<secrets::RedactStream> stream_;
};

// Files and directories the API makes belong to the sandbox's user.
uid_t file_owner(const SandboxEntry& sandbox);

// A failed file operation as the API reports it. The errno decides where
// the generic mapping would mislead: a full disk is 507, a read-only mount
// or a change the kernel refused is a conflict with the file's state
// (409), not a path escape.
api::ApiError file_error(const Error& e);

// Writes one chunk of an upload to `fd` (retrying on EINTR) and counts what
// was written into `written`. On failure, the error to give: 507 when the
// sandbox's disk limit is full.
std::optional<api::ApiError> write_upload_chunk(int fd, std::string_view chunk,
                                                std::uint64_t& written);

// One audit record "file.<op>" with the sandbox, the path and `extra`;
// "outcome" is "ok" unless `extra` says otherwise.
void audit_file(SandboxService& service, const std::string& sandbox, std::string_view op,
                std::string_view path, nlohmann::json extra = nlohmann::json::object());

// The record of a refused operation: outcome "refused", the error's code
// as "error" and its message as "reason".
void audit_refused(SandboxService& service, const std::string& sandbox, std::string_view op,
                   std::string_view path, const api::ApiError& e,
                   nlohmann::json extra = nlohmann::json::object());

}  // namespace corral::daemon
