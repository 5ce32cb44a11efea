#include "daemon/snapshot_config_yaml.h"

#include <array>

#include "spec/units.h"

namespace corral {
namespace {

constexpr std::array<std::string_view, 6> kSnapshotKeys = {
    "retention", "quota", "sweep_interval", "max_files", "max_depth", "max_bytes"};

Result<std::int64_t> positive_ms(std::string_view text) {
  auto d = parse_duration(text);
  if (!d) return tl::unexpected(d.error());
  if (d->count() <= 0) return make_error(ErrorCode::kInvalidArgument, "must be more than 0");
  return static_cast<std::int64_t>(d->count());
}

Result<std::uint64_t> positive_size(std::string_view text) {
  auto s = parse_size(text);
  if (!s) return tl::unexpected(s.error());
  if (*s == 0) return make_error(ErrorCode::kInvalidArgument, "must be more than 0");
  return *s;
}

}  // namespace

Status apply_snapshot_config(const YamlReader& reader, const YamlEntry& entry,
                             snapshot::SnapshotConfig& out) {
  if (entry.value.IsNull()) return ok();
  CORRAL_TRY(reader.expect_map(entry, "a map (retention, quota, ...)"));
  return reader.for_each_entry(entry.value, entry.path, [&](const YamlEntry& e) -> Status {
    if (e.name == "retention")
      return reader.read_into(e, "a duration (168h)", positive_ms, out.retention_ms);
    if (e.name == "sweep_interval")
      return reader.read_into(e, "a duration (1m)", positive_ms, out.sweep_interval_ms);
    if (e.name == "quota")
      return reader.read_into(e, "a size (10Gi)", positive_size, out.quota_bytes);
    if (e.name == "max_bytes")
      return reader.read_into(e, "a size (1Gi)", positive_size, out.limits.max_total_bytes);
    if (e.name == "max_files")
      return reader.read_into(e, "a count (100000)", parse_count64, out.limits.max_files);
    if (e.name == "max_depth")
      return reader.read_into(e, "a count (64)", parse_count, out.limits.max_depth);
    return reader.unknown_key(e, kSnapshotKeys, {});
  });
}

}  // namespace corral
