// Fuzz target for the spec layer's parsers: the YAML configuration file
// and the quantities, mounts and variables users write on the command line.
// Beyond "no crash", it checks what a successful parse promises and that
// every message is printable text that names its source.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_checks.h"
#include "spec/config_file.h"
#include "spec/mount_arg.h"
#include "spec/units.h"

namespace {

using corral::fuzz::printable;
using corral::fuzz::require;

void check_error(const corral::Error& e) {
  require(e.code == corral::ErrorCode::kInvalidArgument);
  require(!e.message.empty());
  require(printable(e.message));
  require(printable(e.hint));
}

void check_target(const std::string& target) {
  require(!target.empty() && target.front() == '/' && target != "/");
  require(target.back() != '/');
  require(target.find("//") == std::string::npos);
  require(target.find("/../") == std::string::npos && !target.ends_with("/.."));
  for (std::string_view reserved : {"/proc", "/sys", "/dev"}) {
    require(target != reserved);
    require(!target.starts_with(std::string(reserved) + "/"));
  }
}

void fuzz_config(std::string_view text) {
  corral::SandboxSpec spec;
  corral::Status st = corral::apply_config_yaml(text, "fuzz.yaml", spec);
  if (!st) {
    check_error(st.error());
    require(st.error().message.starts_with("fuzz.yaml:"));
    return;
  }
  const corral::Limits& l = spec.limits;
  require(l.cpus > 0 && l.cpus <= 1024);
  require(l.memory_bytes > 0 && l.disk_bytes > 0 && l.pids > 0);
  require(l.timeout.count() > 0 && l.max_lifetime.count() > 0);
  const std::string& mode = spec.network.mode;
  require(mode == "none" || mode == "allowlist" || mode == "open");
  require((mode == "allowlist") == !spec.network.allow_domains.empty());
  for (const auto& m : spec.mounts) {
    require(!m.source.empty());
    check_target(m.target);
  }
  for (const auto& [name, value] : spec.env) require(corral::is_valid_env_name(name));
  require(!spec.workdir.empty() && spec.workdir.front() == '/');
}

void fuzz_units(std::string_view text) {
  if (auto size = corral::parse_size(text)) {
    require(*size > 0);
    auto again = corral::parse_size(corral::format_size(*size));
    require(again && *again == *size);
  } else {
    check_error(size.error());
  }
  if (auto d = corral::parse_duration(text)) {
    require(d->count() > 0);
  } else {
    check_error(d.error());
  }
  if (auto cpus = corral::parse_cpus(text)) {
    require(*cpus > 0 && *cpus <= 1024);
  } else {
    check_error(cpus.error());
  }
  if (auto n = corral::parse_count(text)) {
    require(*n > 0);
  } else {
    check_error(n.error());
  }
  if (auto n = corral::parse_count64(text)) {
    require(*n > 0);
  } else {
    check_error(n.error());
  }
  if (auto m = corral::parse_mount_arg(text)) {
    require(!m->source.empty());
    check_target(m->target);
  } else {
    check_error(m.error());
  }
  if (auto kv = corral::parse_env_arg(text)) {
    require(corral::is_valid_env_name(kv->first));
  } else {
    check_error(kv.error());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz_config(text);
  fuzz_units(text);
  return 0;
}
