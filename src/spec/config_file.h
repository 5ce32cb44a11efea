// The YAML configuration file (C1). Accepts the design source's layout as
// written (a top-level `sandbox:` map with cpu_limit, memory_limit,
// disk_limit, pids_limit, timeout, max_lifetime and network.default /
// allow_domains / dns_servers) and corral's extensions next to them.
// Errors name the key and the line: "config.yaml:4: sandbox.memory_limit:
// invalid size "2GG": ...".
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "base/result.h"
#include "spec/sandbox_spec.h"

namespace corral {

struct YamlEntry;

// The settings of a sandbox (the top level, or the `sandbox:` map), in the
// order the reference (docs/config.md) lists them.
inline constexpr std::array<std::string_view, 14> kSandboxSettingKeys = {
    "cpu_limit", "memory_limit", "disk_limit", "inodes_limit", "pids_limit",
    "timeout",   "max_lifetime", "network",    "image",        "hostname",
    "root",      "workdir",      "env",        "mounts"};

// Applies the keys present in `yaml_text` on top of `spec` (keys absent
// keep their value). `source_name` is used in messages (file name).
Status apply_config_yaml(std::string_view yaml_text, std::string_view source_name,
                         SandboxSpec& spec);
// Applies the `sandbox:` entry of a larger document that is already parsed
// (the daemon's config, daemon/daemon_config_yaml.cc). Its nodes keep their
// marks, so messages carry the lines of that document. Call it only from
// inside read_yaml_document's `apply` (yaml-cpp may throw).
Status apply_config_entry(const YamlEntry& sandbox, std::string_view source_name,
                          SandboxSpec& spec);
// Reads `path` (refusing files over 1 MiB) and applies it.
Status apply_config_file(const std::string& path, SandboxSpec& spec);

}  // namespace corral
