// Fuzz target for the API's JSON codec (src/api/: api_model.h, the reader
// in json_reader.cc, the *_codec.cc files), which reads request bodies
// straight from the network. Beyond "no crash, no throw",
// it checks that every refusal is a named API error with a printable
// message, that what is accepted meets the documented bounds, and that
// what is accepted encodes to JSON that parses back to the same encoding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/api_model.h"
#include "api/task_model.h"
#include "fuzz_checks.h"
#include "spec/mount_arg.h"

namespace {

using corral::fuzz::printable;
using corral::fuzz::require;
namespace api = corral::api;

void check_error(const corral::Error& e) {
  require(e.code == corral::ErrorCode::kInvalidArgument);
  require(printable(e.message) && printable(e.hint));
  api::ApiError mapped = api::to_api_error(e);
  require(mapped.http_status == 400);
  require(mapped.is(api::ApiErrorCode::kBadJson) || mapped.is(api::ApiErrorCode::kUnknownField) ||
          mapped.is(api::ApiErrorCode::kWrongType) || mapped.is(api::ApiErrorCode::kInvalidValue));
  require(e.message.starts_with(mapped.code + ": "));
  require(mapped.field == e.hint);
  require(!api::to_json(mapped).empty());
}

// Parses, and when accepted, re-encodes and parses again: the second
// encoding must equal the first.
template <typename Parse, typename Check>
void round_trip(std::string_view text, Parse parse, Check check) {
  auto first = parse(text);
  if (!first) {
    check_error(first.error());
    return;
  }
  check(*first);
  std::string json = api::to_json(*first);
  auto second = parse(json);
  require(second.has_value());
  require(api::to_json(*second) == json);
}

void check_spec(const corral::SandboxSpec& s) {
  const corral::Limits& l = s.limits;
  require(l.memory_bytes >= 4 * corral::kMiB && l.disk_bytes >= corral::kMiB);
  require(l.pids >= 1 && l.pids <= 65536);
  require(l.cpus > 0 && l.cpus <= 1024);
  require(l.timeout.count() >= 1 && l.timeout.count() <= 7LL * 24 * 3600 * 1000);
  require(l.max_lifetime.count() >= 1000 && l.max_lifetime.count() <= 7LL * 24 * 3600 * 1000);
  require(s.argv.empty());
  require(s.env.size() <= 4096 && s.mounts.size() <= 64);
  for (const auto& [name, value] : s.env) {
    require(corral::is_valid_env_name(name));
    require(value.find('\0') == std::string::npos);
  }
  for (const auto& m : s.mounts) {
    require(!m.source.empty() && m.source.front() == '/');
    require(!m.target.empty() && m.target.front() == '/');
  }
  require(!s.workdir.empty() && s.workdir.front() == '/');
  require(corral::is_valid_hostname(s.hostname));
  require(s.network.mode == "none");
  // The stored form keeps it exactly.
  std::string stored = api::spec_to_json(s);
  auto back = api::spec_from_json(stored);
  require(back.has_value());
  require(api::spec_to_json(*back) == stored);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  round_trip(text, api::parse_create_sandbox,
             [](const api::CreateSandboxRequest& r) { check_spec(r.spec); });
  round_trip(text, api::parse_exec, [](const api::ExecRequest& r) {
    require(!r.argv.empty() && r.argv.size() <= 4096 && !r.argv[0].empty());
    for (const auto& arg : r.argv) require(arg.find('\0') == std::string::npos);
    require(!r.cmd || (r.argv.size() == 3 && r.argv[2] == *r.cmd));
    require(r.env.size() <= 4096);
    require(!r.cwd || (!r.cwd->empty() && r.cwd->front() == '/'));
    require(r.max_output_bytes <= 64 * corral::kMiB);
    require(r.stream.empty() || r.stream == "ndjson" || r.stream == "sse");
    require(!r.timeout_ms || *r.timeout_ms >= 1);
  });
  round_trip(text, api::parse_exec_event, [](const api::ExecEvent&) {});
  round_trip(text, api::parse_mkdir, [](const api::MkdirRequest& r) {
    require(r.mode <= 0777);
    require(!r.path.empty() && r.path.find('\0') == std::string::npos);
  });
  round_trip(text, api::parse_rename,
             [](const api::RenameRequest& r) { require(!r.from.empty() && !r.to.empty()); });
  round_trip(text, api::parse_extend, [](const api::ExtendRequest& r) {
    require(r.max_lifetime_ms.has_value() != r.extend_by_ms.has_value());
  });

  // POST /v1/tasks/{id}/replay (T2): bounds hold, the canonical form is
  // stable.
  if (auto rp = api::parse_task_replay(text)) {
    require(!rp->id || api::valid_task_id(*rp->id));
    require(!rp->timeout_ms || (*rp->timeout_ms >= 1 && *rp->timeout_ms <= 7LL * 24 * 3600 * 1000));
    require(rp->network == api::TaskReplayRequest::Network::kExplicit ||
            rp->network_spec.mode == "none");
    const std::string canonical = api::to_canonical_json(*rp);
    require(!canonical.empty() && canonical.front() == '{');
    require(api::to_canonical_json(*rp) == canonical);
  } else {
    check_error(rp.error());
  }

  if (auto sig = api::parse_signal_request(text)) {
    require(*sig >= 1 && *sig <= 64);
  } else {
    check_error(sig.error());
  }
  // Error bodies from a server: never fail, always bounded.
  api::ApiError e = api::parse_api_error(500, text);
  require(!e.code.empty());
  require(!api::to_json(e).empty());
  return 0;
}
