#include "daemon/object_store_config_yaml.h"

#include <algorithm>
#include <array>

#include "base/strings.h"
#include "secrets/secret_store.h"
#include "spec/units.h"

namespace corral {
namespace {

using objstore::ObjectStoreConfig;

constexpr std::array<std::string_view, 9> kObjectStoreKeys = {
    "kind",   "path",    "endpoint",          "bucket",           "prefix",
    "region", "timeout", "access_key_secret", "secret_key_secret"};
constexpr std::array<std::string_view, 7> kS3Keys = {
    "endpoint", "bucket", "prefix", "region", "access_key_secret", "secret_key_secret", "timeout"};

Result<std::string> secret_name(std::string_view text) {
  if (secrets::valid_secret_key(text)) return std::string(text);
  return make_error(ErrorCode::kInvalidArgument,
                    quote_for_message(text) + " is not a secret name",
                    "name an entry of the secret store (1-128 of [A-Za-z0-9_.-]), never the "
                    "value itself");
}

Result<std::string> absolute_path(std::string_view text) {
  if (!text.empty() && text.front() == '/' && text.size() <= 4095 &&
      text.find('\0') == std::string_view::npos)
    return std::string(text);
  return make_error(ErrorCode::kInvalidArgument, quote_for_message(text) + " is not an absolute path",
                    "for example /var/lib/corral/objects");
}

}  // namespace

Status apply_object_store_config(const YamlReader& reader, const YamlEntry& entry,
                                 ObjectStoreConfig& out) {
  if (entry.value.IsNull()) return ok();
  CORRAL_TRY(reader.expect_map(entry, "a map (kind, path, endpoint, bucket, ...)"));
  std::vector<YamlEntry> s3_entries;
  std::optional<YamlEntry> path_entry;
  CORRAL_TRY(reader.for_each_entry(entry.value, entry.path, [&](const YamlEntry& e) -> Status {
    if (std::find(kS3Keys.begin(), kS3Keys.end(), e.name) != kS3Keys.end()) {
      s3_entries.push_back(e);
    }
    if (e.name == "kind") {
      constexpr std::array<std::string_view, 2> kKinds = {"local", "s3"};
      auto kind = reader.one_of(e, kKinds, "local or s3");
      if (!kind) return tl::unexpected(kind.error());
      out.kind = *kind == "s3" ? ObjectStoreConfig::Kind::kS3 : ObjectStoreConfig::Kind::kLocal;
      return ok();
    }
    if (e.name == "path") {
      path_entry = e;
      return reader.read_into(e, "an absolute directory", absolute_path, out.path);
    }
    if (e.name == "endpoint") {
      return reader.read_into(e, "a URL such as https://s3.example.com", objstore::check_s3_endpoint,
                              out.endpoint);
    }
    auto checked = [](Status (*check)(std::string_view)) {
      return [check](std::string_view t) -> Result<std::string> {
        CORRAL_TRY(check(t));
        return std::string(t);
      };
    };
    if (e.name == "bucket") {
      return reader.read_into(e, "a bucket name", checked(objstore::check_s3_bucket), out.bucket);
    }
    if (e.name == "prefix") {
      return reader.read_into(e, "a key prefix such as corral/", checked(objstore::check_s3_prefix),
                              out.prefix);
    }
    if (e.name == "region") {
      return reader.read_into(e, "a region such as us-east-1", checked(objstore::check_s3_region),
                              out.region);
    }
    if (e.name == "access_key_secret") {
      return reader.read_into(e, "a secret name", secret_name, out.access_key_secret);
    }
    if (e.name == "secret_key_secret") {
      return reader.read_into(e, "a secret name", secret_name, out.secret_key_secret);
    }
    if (e.name == "timeout") {
      std::chrono::milliseconds timeout{};
      CORRAL_TRY(reader.read_into(e, "a duration (30s, 2m)", parse_duration, timeout));
      if (timeout.count() < 100 || timeout.count() > 3'600'000)
        return reader.fail(e.value_line, e.path, "must be between 100ms and 1h");
      out.timeout_ms = timeout.count();
      return ok();
    }
    return reader.unknown_key(e, kObjectStoreKeys,
                              {{"type", "kind"},
                               {"backend", "kind"},
                               {"dir", "path"},
                               {"directory", "path"},
                               {"url", "endpoint"},
                               {"access_key", "access_key_secret"},
                               {"access_key_id", "access_key_secret"},
                               {"secret_key", "secret_key_secret"},
                               {"secret_access_key", "secret_key_secret"}});
  }));
  // Settings of the other kind are a mistake, not something to ignore.
  if (out.kind == ObjectStoreConfig::Kind::kLocal) {
    for (const auto& e : s3_entries) {
      if (e.name == "timeout") continue;
      return reader.fail(e.line, e.path, "is an s3 setting, and kind is local",
                         "set kind: s3, or remove it");
    }
    return ok();
  }
  if (path_entry) {
    return reader.fail(path_entry->line, path_entry->path, "is a local setting, and kind is s3",
                       "remove it, or set kind: local");
  }
  for (auto [value, name] : {std::pair{&out.endpoint, "endpoint"}, std::pair{&out.bucket, "bucket"},
                             std::pair{&out.access_key_secret, "access_key_secret"},
                             std::pair{&out.secret_key_secret, "secret_key_secret"}}) {
    if (value->empty()) {
      return reader.fail(entry.line, entry.path, std::string("kind s3 needs ") + name,
                         "an s3 store needs endpoint, bucket, and the names of its two "
                         "credentials in the secret store (access_key_secret, secret_key_secret)");
    }
  }
  return ok();
}

}  // namespace corral
