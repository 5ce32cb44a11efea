#include "cli/client_flags.h"

#include "cli/cli_output.h"

namespace corral::cli {
namespace {

constexpr std::string_view kEndpointHelp =
    "  --url URL            the daemon: unix:/path/to.sock or http://HOST:PORT\n"
    "                       (default: $CORRAL_URL, else unix:/run/corral/corral.sock)\n"
    "  --api-key-file FILE  the key for an http URL (default: $CORRAL_API_KEY)\n";

}  // namespace

ClientFlags::ClientFlags(std::string_view verb_usage, int usage_status)
    : FlagParser(std::string(verb_usage) + std::string(kEndpointHelp),
                 [this, usage_status](const FlagError& e) {
                   cli::usage_error(e.message, usage());
                   return usage_status;
                 }) {
  option("--url", [this](const std::string& v) -> Refusal {
    endpoint_.url = v;
    return std::nullopt;
  });
  option("--api-key-file", [this](const std::string& v) -> Refusal {
    endpoint_.key_file = v;
    return std::nullopt;
  });
}

}  // namespace corral::cli
