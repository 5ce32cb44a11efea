#include "daemon/node_config_yaml.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <array>
#include <cctype>

#include "base/strings.h"
#include "spec/units.h"
#include "store/node_record.h"
#include "store/sql.h"

namespace corral {
namespace {

constexpr std::array<std::string_view, 5> kNodeKeys = {"id", "address", "labels",
                                                       "heartbeat_interval", "lost_after"};
constexpr std::size_t kMaxLabels = 64;
constexpr std::size_t kMaxLabelBytes = 253;

Result<std::int64_t> interval_ms(std::string_view text) {
  auto d = parse_duration(text);
  if (!d) return tl::unexpected(d.error());
  if (d->count() < 100 || d->count() > 3'600'000)
    return make_error(ErrorCode::kInvalidArgument, "must be between 100ms and 1h");
  return static_cast<std::int64_t>(d->count());
}

Result<std::string> node_id(std::string_view text) {
  if (!valid_node_id(text))
    return make_error(ErrorCode::kInvalidArgument,
                      "\"" + std::string(text.substr(0, 80)) +
                          "\" is not a node id: 1-63 of a-z, 0-9 and '-' (not first or last)",
                      "use a DNS label such as the host's or the pod's name");
  return std::string(text);
}

}  // namespace

Result<std::string> parse_node_address(std::string_view text) {
  // host:port, the host a name or an address ([v6] in brackets).
  const auto colon = text.rfind(':');
  const bool bracketed = !text.empty() && text.front() == '[';
  if (text.empty() || text.size() > 255 || colon == std::string_view::npos || colon == 0 ||
      colon + 1 == text.size() || (bracketed && text[colon - 1] != ']'))
    return make_error(ErrorCode::kInvalidArgument,
                      "\"" + std::string(text.substr(0, 80)) + "\" is not host:port",
                      "the address other nodes reach this one's API on, e.g. 10.0.0.5:7070");
  for (char c : text.substr(colon + 1))
    if (c < '0' || c > '9')
      return make_error(ErrorCode::kInvalidArgument,
                        "the port of \"" + std::string(text) + "\" is not a number");
  // The relay connects without resolving names (the binary may be
  // static): the host is an IP address.
  std::string host(text.substr(0, colon));
  if (bracketed) host = host.substr(1, host.size() - 2);
  // fd00::5:7070 would reach nobody: the relay's URL needs the brackets.
  if (!bracketed && host.find(':') != std::string::npos)
    return make_error(ErrorCode::kInvalidArgument,
                      "\"" + std::string(text.substr(0, 80)) +
                          "\": an IPv6 address must be in brackets before its port",
                      "for example [fd00::5]:7070 (in Kubernetes: \"[$(POD_IP)]:7070\")");
  unsigned char buf[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, host.c_str(), buf) != 1 && inet_pton(AF_INET6, host.c_str(), buf) != 1)
    return make_error(
        ErrorCode::kInvalidArgument,
        "\"" + std::string(text.substr(0, 80)) + "\" does not start with an IP address",
        "other nodes connect to it without resolving names: give its IP address "
        "(a pod IP, 10.0.0.5:7070, [fd00::5]:7070)");
  return std::string(text);
}

std::string default_node_id(std::string_view hostname) {
  std::string id(hostname.substr(0, hostname.find('.')));
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return valid_node_id(id) ? id : std::string("local");
}

Result<std::string> parse_state_location(std::string_view text) {
  if (sql::is_postgres_url(text)) return std::string(text);
  if (!text.empty() && text.front() == '/' && text.size() <= 4095 && text.back() != '/')
    return std::string(text);
  return make_error(ErrorCode::kInvalidArgument,
                    "is neither an absolute path nor a postgres:// URL",
                    "an SQLite file such as /var/lib/corral/state.db (the default, in data_dir), "
                    "or postgres://user@db.example:5432/corral for a fleet");
}

Status apply_node_config(const YamlReader& reader, const YamlEntry& entry,
                         daemon::NodeSettings& out) {
  if (entry.value.IsNull()) return ok();
  CORRAL_TRY(reader.expect_map(entry,
                               "a map (id, address, labels, heartbeat_interval, "
                               "lost_after)"));
  CORRAL_TRY(reader.for_each_entry(entry.value, entry.path, [&](const YamlEntry& e) -> Status {
    if (e.name == "id") return reader.read_into(e, "a node id (node-a)", node_id, out.id);
    if (e.name == "address")
      return reader.read_into(e, "host:port", parse_node_address, out.address);
    if (e.name == "heartbeat_interval")
      return reader.read_into(e, "a duration (2s)", interval_ms, out.heartbeat_interval_ms);
    if (e.name == "lost_after")
      return reader.read_into(e, "a duration (15s)", interval_ms, out.lost_after_ms);
    if (e.name == "labels") {
      out.labels.clear();
      if (e.value.IsNull()) return ok();
      CORRAL_TRY(reader.expect_map(e, "a map of label -> value (zone: eu-1)"));
      if (e.value.size() > kMaxLabels)
        return reader.fail(e.line, e.path, "has more than 64 labels");
      return reader.for_each_entry(e.value, e.path, [&](const YamlEntry& l) -> Status {
        auto v = reader.scalar(l, "a label value (a string)");
        if (!v) return tl::unexpected(v.error());
        if (l.name.empty() || l.name.size() > kMaxLabelBytes || v->size() > kMaxLabelBytes)
          return reader.fail(l.line, l.path, "a label and its value are 1-253 bytes");
        out.labels[l.name] = std::move(*v);
        return ok();
      });
    }
    return reader.unknown_key(e, kNodeKeys, {{"name", "id"}, {"heartbeat", "heartbeat_interval"}});
  }));
  if (out.lost_after_ms < 3 * out.heartbeat_interval_ms)
    return reader.fail(entry.line, entry.path,
                       "lost_after is shorter than three heartbeat intervals",
                       "a node must miss several heartbeats before it is marked lost: raise "
                       "lost_after or lower heartbeat_interval");
  return ok();
}

}  // namespace corral
