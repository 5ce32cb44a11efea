// Parsing of the repeatable command-line values `--mount SRC:DST[:ro|:rw]`
// and `--env K=V`, and the checks on mounts and variable names that the
// configuration file shares with them.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "base/result.h"
#include "spec/sandbox_spec.h"

namespace corral {

// "SRC:DST", "SRC:DST:ro" or "SRC:DST:rw" (read-only unless ":rw").
// Neither path may contain ':'; the config file's map form has no such
// limit. The target is checked and normalized as by normalize_mount_target;
// the source only has to be non-empty here (it is confined to the allowed
// mount roots later, see jail/mount_source.h).
Result<MountSpec> parse_mount_arg(std::string_view text);

// A mount target inside the sandbox: absolute, no ".." component, not "/"
// and not /proc, /sys, /dev or anything under them. Returns it normalized
// (repeated '/', "." components and a trailing '/' removed).
Result<std::string> normalize_mount_target(std::string_view target);

// A mount source on the host: non-empty, no NUL byte.
Status check_mount_source(std::string_view source);

// "KEY=VALUE" (the value may be empty and may contain '='). KEY must match
// [A-Za-z_][A-Za-z0-9_]*; the value must not contain a NUL byte.
Result<std::pair<std::string, std::string>> parse_env_arg(std::string_view text);

// True when `name` matches [A-Za-z_][A-Za-z0-9_]*.
bool is_valid_env_name(std::string_view name);

}  // namespace corral
