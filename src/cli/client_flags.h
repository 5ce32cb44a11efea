// The command line of a client verb (corral create|ls|inspect|exec|cp|rm):
// the verb's own flags and positional arguments, and what every verb takes:
// -h/--help, --url URL and --api-key-file FILE. A value is always the next
// argument, whatever it looks like (`--env -x` sets "-x").
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::cli {

// --url, --api-key-file: where the daemon is.
struct Endpoint {
  std::string url;
  std::string key_file;
};

// What a handler says of an argument: nullopt to accept it, else the
// message of the usage error that refuses it.
using Refusal = std::optional<std::string>;

// "--memory: <the parser's message>".
std::string refused(std::string_view flag, const Error& error);

class ClientFlags {
 public:
  using ValueHandler = std::function<Refusal(const std::string& value)>;
  using ArgHandler = std::function<Refusal(std::string_view arg)>;

  // `verb_usage`: the verb's usage text, to which the help of --url and
  // --api-key-file is added. `usage_status`: the exit status of a usage
  // error (2; `exec` uses 125 for all its own failures).
  explicit ClientFlags(std::string_view verb_usage, int usage_status = 2);

  // A flag without a value.
  void flag(std::initializer_list<std::string_view> names, std::function<void()> on);
  void flag(std::initializer_list<std::string_view> names, bool& set);
  // A flag that takes the next argument as its value.
  void option(std::string_view name, ValueHandler on);
  // The same, stored as given (the last one counts).
  void option(std::string_view name, std::optional<std::string>& into);
  // The arguments that are not flags, in order. Without a handler every one
  // is refused as unknown. A lone "-" counts as a flag unless
  // `lone_dash_is_positional` (cp: stdin / stdout).
  void positional(ArgHandler on, bool lone_dash_is_positional = false);
  // The word of "unknown option \"-x\"" ("argument" for a verb that takes
  // no positional arguments and says so).
  void unknown_word(std::string word) { unknown_word_ = std::move(word); }
  // "--" ends the flags; what follows is after_double_dash().
  void stop_at_double_dash() { stop_at_double_dash_ = true; }

  // Reads `args` (the arguments after the verb) and calls the handlers.
  // nullopt: go on; else the verb's exit status: 0 after printing the usage
  // for -h, usage_status() after a usage error (already printed).
  std::optional<int> parse(const std::vector<std::string_view>& args);

  const Endpoint& endpoint() const { return endpoint_; }
  // The arguments after "--", if it was given.
  const std::optional<std::vector<std::string_view>>& after_double_dash() const {
    return after_double_dash_;
  }
  // Prints `message` and the usage text on stderr; returns usage_status().
  int usage_error(std::string_view message) const;
  int usage_status() const { return usage_status_; }

 private:
  struct Flag {
    std::vector<std::string_view> names;
    std::function<void()> on;
  };
  struct Option {
    std::string_view name;
    ValueHandler on;
  };

  std::string usage_;
  int usage_status_;
  std::vector<Flag> flags_;
  std::vector<Option> options_;
  ArgHandler positional_;
  bool lone_dash_is_positional_ = false;
  std::string unknown_word_ = "option";
  bool stop_at_double_dash_ = false;
  Endpoint endpoint_;
  std::optional<std::vector<std::string_view>> after_double_dash_;
};

}  // namespace corral::cli
