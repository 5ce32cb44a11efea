// The daemon's configuration apart from its YAML walk (daemon_config_yaml.cc):
// the defaults, the listen address, and the one-line summary for the log.
#include "daemon/daemon_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

#include "base/strings.h"
#include "spec/units.h"

namespace corral {
namespace {

// For a log line: the exact form when it is short ("8Gi", "512Mi"), else
// two decimals of the largest binary unit ("17.66Gi" for 18513069Ki).
std::string readable_size(std::uint64_t bytes) {
  std::string exact = format_size(bytes);
  if (bytes < kMiB || exact.ends_with("Mi") || exact.ends_with("Gi") || exact.ends_with("Ti")) {
    return exact;
  }
  constexpr std::array<std::pair<std::uint64_t, std::string_view>, 3> kUnits = {
      {{kKiB * kGiB, "Ti"}, {kGiB, "Gi"}, {kMiB, "Mi"}}};
  for (const auto& [unit, suffix] : kUnits) {
    if (bytes >= unit) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.2f%.*s",
                    static_cast<double>(bytes) / static_cast<double>(unit),
                    static_cast<int>(suffix.size()), suffix.data());
      return buf;
    }
  }
  return exact;
}

std::string format_ms(std::int64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace

DaemonConfig default_daemon_config() { return DaemonConfig{}; }

Result<std::pair<std::string, std::uint16_t>> parse_listen(std::string_view text) {
  const std::string quoted = quote_for_message(text);
  auto bad = [&](std::string_view why, std::string hint = {}) {
    if (hint.empty()) hint = "for example \"127.0.0.1:7070\", \"[::1]:7070\" or \":7070\"";
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid listen address " + quoted + ": " + std::string(why),
                      std::move(hint));
  };
  std::string host;
  std::string_view port_text;
  if (text.starts_with("[")) {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("no ']' after the IPv6 address");
    host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.starts_with(":")) return bad("expected :PORT after ']'");
    port_text = rest.substr(1);
    in6_addr addr{};
    if (inet_pton(AF_INET6, host.c_str(), &addr) != 1) {
      return bad("the part in brackets is not an IPv6 address");
    }
  } else {
    std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("expected HOST:PORT");
    host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      return bad("an IPv6 address needs brackets", "for example \"[::1]:7070\"");
    }
    if (host.empty()) host = "127.0.0.1";
    in_addr addr{};
    if (inet_pton(AF_INET, host.c_str(), &addr) != 1) {
      return bad("the host is not an IP address",
                 "give an address, not a name: 127.0.0.1 (this host only), 0.0.0.0 (every "
                 "interface) or [::1]");
    }
  }
  std::uint32_t port = 0;
  bool digits =
      !port_text.empty() && port_text.size() <= 5 &&
      std::all_of(port_text.begin(), port_text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  }
  if (!digits || port > 65535) return bad("the port is not a number from 0 to 65535");
  return std::pair<std::string, std::uint16_t>(std::move(host), static_cast<std::uint16_t>(port));
}

std::string describe(const DaemonConfig& c) {
  auto size_or = [](std::uint64_t bytes, std::string_view zero) {
    return bytes == 0 ? std::string(zero) : readable_size(bytes);
  };
  const bool v6 = c.listen_host.find(':') != std::string::npos;
  std::string out = "listen ";
  out.append(v6 ? "[" + c.listen_host + "]" : c.listen_host)
      .append(":")
      .append(std::to_string(c.listen_port));
  out.append(", socket ").append(c.socket_path);
  out.append(", data_dir ").append(c.data_dir);
  out.append(", api keys: ");
  if (c.api_key_sha256.empty() && c.api_key_files.empty()) out.append("none");
  if (!c.api_key_sha256.empty()) {
    out.append(std::to_string(c.api_key_sha256.size()))
        .append(c.api_key_sha256.size() == 1 ? " digest" : " digests");
  }
  for (std::size_t i = 0; i < c.api_key_files.size(); ++i) {
    if (i > 0 || !c.api_key_sha256.empty()) out.append(" + ");
    out.append("file ").append(c.api_key_files[i]);
  }
  out.append("; capacity: ")
      .append(std::to_string(c.max_sandboxes))
      .append(" sandboxes, memory ")
      .append(size_or(c.max_memory_bytes, "auto (75% of RAM)"))
      .append(", disk ")
      .append(size_or(c.max_disk_bytes, "auto (50% of RAM)"));
  out.append("; request timeout ").append(format_ms(c.request_timeout_ms));
  out.append(", exec output ").append(readable_size(c.max_exec_output_bytes));
  out.append(", upload ").append(size_or(c.max_upload_bytes, "up to the sandbox's disk limit"));
  const SandboxSpec& s = c.default_spec;
  char cpus[32];
  std::snprintf(cpus, sizeof cpus, "%g", s.limits.cpus);
  out.append("; default sandbox: cpus ").append(cpus);
  out.append(", memory ").append(readable_size(s.limits.memory_bytes));
  out.append(", disk ").append(readable_size(s.limits.disk_bytes));
  out.append(", pids ").append(std::to_string(s.limits.pids));
  out.append(", timeout ").append(format_ms(s.limits.timeout.count()));
  out.append(", lifetime ").append(format_ms(c.default_max_lifetime_ms));
  out.append(", network ").append(s.network.mode);
  out.append(", image ").append(s.image.empty() ? "host base" : s.image);
  return out;
}

}  // namespace corral
