// The command line of a client verb (corral create|ls|inspect|exec|cp|rm):
// a FlagParser with what every client verb takes besides its own flags:
// --url URL and --api-key-file FILE (their help is added to the verb's
// usage text), and the verbs' way of refusing: "corral: error: MESSAGE",
// then the usage text, exit 2 (exec: 125).
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "cli/flag_parser.h"

namespace corral::cli {

// --url, --api-key-file: where the daemon is.
struct Endpoint {
  std::string url;
  std::string key_file;
};

class ClientFlags : public FlagParser {
 public:
  // `verb_usage`: the verb's usage text, to which the help of --url and
  // --api-key-file is added. `usage_status`: the exit status of a usage
  // error (2; `exec` uses 125 for all its own failures).
  explicit ClientFlags(std::string_view verb_usage, int usage_status = 2);
  ClientFlags(const ClientFlags&) = delete;  // its handlers point into it
  ClientFlags& operator=(const ClientFlags&) = delete;

  const Endpoint& endpoint() const { return endpoint_; }

  // `flag VALUE` goes into the request as given, object[key] = VALUE, once
  // `check` (one of the daemon's own parsers: parse_size, parse_duration,
  // ...) accepted it; its error refuses the flag. Without a check the
  // daemon alone judges the value.
  template <typename Object, typename Check>
  void sent(std::string_view flag, Object& object, std::string key, Check check) {
    option(flag, [flag = std::string(flag), check, &object, key](const std::string& v) -> Refusal {
      if (auto r = check(v); !r) return refused(flag, r.error());
      object[key] = v;
      return std::nullopt;
    });
  }
  template <typename Object>
  void sent(std::string_view flag, Object& object, std::string key) {
    option(flag, [&object, key](const std::string& v) -> Refusal {
      object[key] = v;
      return std::nullopt;
    });
  }

 private:
  Endpoint endpoint_;
};

}  // namespace corral::cli
