// corral volume create|ls|rm: the named persistent volumes of the caller's
// namespace (D2, F4; docs/volumes.md, docs/cli.md).
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "spec/units.h"
#include "base/json_text.h"
#include "cli/daemon_client.h"

namespace corral::cli {

namespace {

constexpr const char* kVolumeUsage =
    "usage: corral volume create NAME --quota SIZE\n"
    "       corral volume ls [--json]\n"
    "       corral volume rm NAME...\n"
    "\n"
    "Named persistent volumes of your namespace: each one a file system of its\n"
    "own whose size is its quota. Sandboxes mount them with \"volumes\" in their\n"
    "create (docs/volumes.md); their data outlives sandboxes and daemon restarts.\n"
    "A volume in use by a sandbox cannot be removed.\n";

// One usage text per verb: ClientFlags checks that each shows only its flags.
constexpr const char* kCreateUsage =
    "usage: corral volume create NAME --quota SIZE\n"
    "\n"
    "Creates a volume of your namespace.\n"
    "\n"
    "options:\n"
    "  --quota SIZE         the volume's size (16Mi up to the daemon's\n"
    "                       serve.volumes.max_quota), e.g. 1Gi\n";
constexpr const char* kLsUsage =
    "usage: corral volume ls [--json]\n"
    "\n"
    "Lists your namespace's volumes.\n"
    "\n"
    "options:\n"
    "  --json               the daemon's answer as JSON\n";
constexpr const char* kRmUsage =
    "usage: corral volume rm NAME...\n"
    "\n"
    "Removes volumes (refused while a sandbox uses one).\n";

std::string sizes(const nlohmann::json& v) {
  return format_size(v.value("used_bytes", std::uint64_t{0})) + " / " +
         v.value("quota", std::string("?"));
}

int create(const std::vector<std::string_view>& args) {
  ClientFlags flags(kCreateUsage);
  std::vector<std::string> names;
  std::optional<std::string> quota;
  flags.option("--quota", quota);
  flags.positional([&](std::string_view a) -> Refusal {
    names.emplace_back(a);
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  if (names.size() != 1) return flags.usage_error("give one volume NAME");
  if (!quota) return flags.usage_error("give the volume's size: --quota SIZE (e.g. 1Gi)");
  nlohmann::json body{{"name", names[0]}, {"quota", *quota}};
  if (auto bad = non_utf8_field(ojson::parse(json_text(body)), "")) return flags.usage_error(*bad);
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  auto reply = (*provider)->call("POST", "/v1/volumes", json_text(body));
  if (!reply) return command_failure(reply.error());
  auto j = nlohmann::json::parse(*reply, nullptr, false);
  printf("%s\t%s\n", names[0].c_str(), j.is_object() ? sizes(j).c_str() : "");
  return 0;
}

int ls(const std::vector<std::string_view>& args) {
  ClientFlags flags(kLsUsage);
  bool as_json = false;
  flags.flag({"--json"}, as_json);
  if (auto status = flags.parse(args)) return *status;
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  auto reply = (*provider)->call("GET", "/v1/volumes");
  if (!reply || as_json) return print_json(reply);
  auto j = nlohmann::json::parse(*reply, nullptr, false);
  if (!j.is_object() || !j.contains("volumes") || !j["volumes"].is_array())
    return command_failure(Error{ErrorCode::kInternal, "the daemon's answer has no volumes", "", 0});
  printf("NAME\tUSED / QUOTA\tMOUNTED\n");
  for (const auto& v : j["volumes"]) {
    printf("%s\t%s\t%s\n", v.value("name", std::string()).c_str(), sizes(v).c_str(),
           v.value("mounted", false) ? "yes" : "no");
  }
  return 0;
}

int rm(const std::vector<std::string_view>& args) {
  ClientFlags flags(kRmUsage);
  std::vector<std::string> names;
  flags.positional([&](std::string_view a) -> Refusal {
    names.emplace_back(a);
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  if (names.empty()) return flags.usage_error("which volumes? give their NAMEs");
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  int status = 0;
  for (const std::string& name : names) {
    auto reply = (*provider)->call("DELETE", "/v1/volumes/" + name);
    if (!reply) {
      print_error(reply.error());
      status = 1;
      continue;
    }
    printf("%s\n", name.c_str());
    fflush(stdout);
  }
  return status;
}

}  // namespace

int volume_command(const std::vector<std::string_view>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    fputs(kVolumeUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::vector<std::string_view> rest(args.begin() + 1, args.end());
  if (args[0] == "create") return create(rest);
  if (args[0] == "ls") return ls(rest);
  if (args[0] == "rm") return rm(rest);
  fprintf(stderr, "corral volume: unknown command \"%.*s\"\n\n%s",
          static_cast<int>(args[0].size()), args[0].data(), kVolumeUsage);
  return 2;
}

}  // namespace corral::cli
