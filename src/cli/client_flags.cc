#include "cli/client_flags.h"

#include <algorithm>
#include <cstdio>

#include "cli/cli_output.h"

namespace corral::cli {
namespace {

constexpr std::string_view kEndpointHelp =
    "  --url URL            the daemon: unix:/path/to.sock or http://HOST:PORT\n"
    "                       (default: $CORRAL_URL, else unix:/run/corral/corral.sock)\n"
    "  --api-key-file FILE  the key for an http URL (default: $CORRAL_API_KEY)\n";

}  // namespace

std::string refused(std::string_view flag, const Error& error) {
  return std::string(flag) + ": " + error.message;
}

ClientFlags::ClientFlags(std::string_view verb_usage, int usage_status)
    : usage_(std::string(verb_usage) + std::string(kEndpointHelp)), usage_status_(usage_status) {}

void ClientFlags::flag(std::initializer_list<std::string_view> names, std::function<void()> on) {
  flags_.push_back({std::vector<std::string_view>(names), std::move(on)});
}

void ClientFlags::flag(std::initializer_list<std::string_view> names, bool& set) {
  flag(names, [&set] { set = true; });
}

void ClientFlags::option(std::string_view name, ValueHandler on) {
  options_.push_back({name, std::move(on)});
}

void ClientFlags::option(std::string_view name, std::optional<std::string>& into) {
  option(name, [&into](const std::string& value) -> Refusal {
    into = value;
    return std::nullopt;
  });
}

void ClientFlags::positional(ArgHandler on, bool lone_dash_is_positional) {
  positional_ = std::move(on);
  lone_dash_is_positional_ = lone_dash_is_positional;
}

int ClientFlags::usage_error(std::string_view message) const {
  cli::usage_error(message, usage_);
  return usage_status_;
}

std::optional<int> ClientFlags::parse(const std::vector<std::string_view>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (stop_at_double_dash_ && a == "--") {
      after_double_dash_.emplace(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      return std::nullopt;
    }
    if (a == "-h" || a == "--help") {
      fputs(usage_.c_str(), stdout);
      return 0;
    }
    const bool endpoint = a == "--url" || a == "--api-key-file";
    auto option = std::find_if(options_.begin(), options_.end(),
                               [&](const Option& o) { return o.name == a; });
    if (endpoint || option != options_.end()) {
      if (i + 1 >= args.size()) return usage_error(std::string(a) + " needs a value");
      const std::string value(args[++i]);
      if (endpoint) {
        (a == "--url" ? endpoint_.url : endpoint_.key_file) = value;
      } else if (Refusal refusal = option->on(value)) {
        return usage_error(*refusal);
      }
      continue;
    }
    auto flag = std::find_if(flags_.begin(), flags_.end(), [&](const Flag& f) {
      return std::find(f.names.begin(), f.names.end(), a) != f.names.end();
    });
    if (flag != flags_.end()) {
      flag->on();
      continue;
    }
    const bool looks_like_flag = a.starts_with("-") && !(lone_dash_is_positional_ && a == "-");
    if (positional_ && !looks_like_flag) {
      if (Refusal refusal = positional_(a)) return usage_error(*refusal);
      continue;
    }
    return usage_error("unknown " + unknown_word_ + " \"" + std::string(a) + "\"");
  }
  return std::nullopt;
}

}  // namespace corral::cli
