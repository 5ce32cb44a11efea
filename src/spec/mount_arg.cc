#include "spec/mount_arg.h"

#include <array>
#include <vector>

#include "base/strings.h"
#include "spec/units.h"

namespace corral {
namespace {

constexpr std::size_t kMaxPathBytes = 4095;  // PATH_MAX without the NUL

// Directories the runtime itself mounts inside every sandbox; a user mount
// over them would hide or replace what the isolation relies on.
constexpr std::array<std::string_view, 3> kReservedTargets = {"proc", "sys", "dev"};

tl::unexpected<Error> invalid_mount(std::string_view text, std::string_view why,
                                    std::string hint = {}) {
  return make_error(ErrorCode::kInvalidArgument,
                    "invalid mount " + quote_for_message(text) + ": " + std::string(why),
                    std::move(hint));
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    std::size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

bool is_env_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_env_char(char c) { return is_env_start(c) || (c >= '0' && c <= '9'); }

}  // namespace

Result<std::string> normalize_mount_target(std::string_view target) {
  if (target.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "target is empty",
                      "give an absolute path inside the sandbox, such as /data");
  }
  std::string quoted = quote_for_message(target);
  if (target.find('\0') != std::string_view::npos) {
    return make_error(ErrorCode::kInvalidArgument, "target " + quoted + " contains a NUL byte");
  }
  if (target.size() > kMaxPathBytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "target " + quoted + " is longer than 4095 bytes");
  }
  if (target.front() != '/') {
    return make_error(ErrorCode::kInvalidArgument, "target " + quoted + " is not an absolute path",
                      "targets are paths inside the sandbox and start with '/', such as /data");
  }
  std::string normalized;
  std::string_view first;
  for (std::string_view part : split(target, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      return make_error(ErrorCode::kInvalidArgument,
                        "target " + quoted + " contains a \"..\" component",
                        "write the target without \"..\"");
    }
    if (first.empty()) first = part;
    normalized.push_back('/');
    normalized.append(part);
  }
  if (normalized.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "target " + quoted + " is the sandbox's root directory",
                      "mount into a directory such as /data");
  }
  for (std::string_view reserved : kReservedTargets) {
    if (first == reserved) {
      return make_error(ErrorCode::kInvalidArgument,
                        "target " + quoted + " is inside /" + std::string(reserved) +
                            ", which corral sets up itself",
                        "mount somewhere else, such as /data");
    }
  }
  return normalized;
}

Status check_mount_source(std::string_view source) {
  if (source.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "source is empty",
                      "give the host path to mount, such as ./data");
  }
  if (source.find('\0') != std::string_view::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      "source " + quote_for_message(source) + " contains a NUL byte");
  }
  if (source.size() > kMaxPathBytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "source " + quote_for_message(source) + " is longer than 4095 bytes");
  }
  return ok();
}

Result<MountSpec> parse_mount_arg(std::string_view text) {
  constexpr std::string_view kExpected = "expected SRC:DST, SRC:DST:ro or SRC:DST:rw";
  std::vector<std::string_view> parts = split(text, ':');
  if (parts.size() < 2) {
    return invalid_mount(text, kExpected, "for example --mount ./data:/data:ro");
  }
  if (parts.size() > 3) {
    return invalid_mount(text, std::string(kExpected) + " (paths cannot contain ':')",
                         "mount paths that contain ':' from a config file's mounts list");
  }
  MountSpec mount;
  if (parts.size() == 3) {
    if (parts[2] == "rw") {
      mount.writable = true;
    } else if (parts[2] != "ro") {
      return invalid_mount(text, "mode " + quote_for_message(parts[2]) +
                                     " must be ro or rw (paths cannot contain ':')");
    }
  }
  if (auto st = check_mount_source(parts[0]); !st) {
    return invalid_mount(text, st.error().message, st.error().hint);
  }
  auto target = normalize_mount_target(parts[1]);
  if (!target) return invalid_mount(text, target.error().message, target.error().hint);
  mount.source = std::string(parts[0]);
  mount.target = std::move(*target);
  return mount;
}

bool is_valid_env_name(std::string_view name) {
  if (name.empty() || !is_env_start(name.front())) return false;
  for (char c : name) {
    if (!is_env_char(c)) return false;
  }
  return true;
}

Result<std::pair<std::string, std::string>> parse_env_arg(std::string_view text) {
  std::string quoted = quote_for_message(text);
  std::size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid environment variable " + quoted + ": expected KEY=VALUE",
                      "for example --env LANG=C.UTF-8 (use KEY= for an empty value)");
  }
  std::string_view name = text.substr(0, eq);
  std::string_view value = text.substr(eq + 1);
  if (!is_valid_env_name(name)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid environment variable " + quoted + ": name " +
                          quote_for_message(name) +
                          " must start with a letter or '_' and contain only letters, digits "
                          "and '_'");
  }
  if (value.find('\0') != std::string_view::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid environment variable " + quoted + ": the value contains a NUL byte");
  }
  return std::make_pair(std::string(name), std::string(value));
}

}  // namespace corral
