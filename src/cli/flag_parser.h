// The one flag parser of every `corral` verb. A verb states its flags as a
// table (names, whether a value follows, what to do with it) next to its
// usage text, and parse() reads the arguments against that table, so the
// help and the parsing come from one place: parse() also checks that every
// flag it knows is in the usage text and that every flag a usage line
// starts with is one it knows (a mismatch is our bug: it aborts, so any
// test that runs the verb catches it).
//
// A value is the next argument, whatever it looks like (`--env -x` sets
// "-x"); an option may also take --name=VALUE or -nVALUE (ValueForm).
// -h/--help prints the usage text and ends the verb with 0. How a refused
// command line is reported (and its exit status) is the verb's: its
// Reporter prints the FlagError.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::cli {

// Why a command line was refused.
struct FlagError {
  enum class Kind {
    kUnknown,       // an argument the verb does not take: `unknown option "-x"`
    kMissingValue,  // the option is the last argument: `--memory needs a value`
    kBadValue,      // a value parser refused it: `--memory: invalid size "2GG" ...`
    kMisuse,        // anything else the verb refuses (conflicting flags, a missing ID)
  };
  // Implicit, so that a handler can `return "one sandbox ID at a time";`.
  FlagError(std::string message_, Kind kind_ = Kind::kMisuse)
      : kind(kind_), message(std::move(message_)) {}
  FlagError(const char* message_) : FlagError(std::string(message_)) {}

  Kind kind;
  std::string message;  // complete, without the verb's prefix
  std::string flag;     // for kMissingValue: the option, as its first name
};

// What a handler says of an argument: nullopt to accept it, else why not.
using Refusal = std::optional<FlagError>;

// "--memory: <the parser's message>", a kBadValue.
FlagError refused(std::string_view flag, const Error& error);

// How an option takes its value.
struct ValueForm {
  // The message when the value is missing; empty: "<name> needs a value".
  std::string missing;
  // Where else the value may be: --name=VALUE (kAfterEquals, long names
  // only) or -nVALUE (kGlued, one-letter names only).
  enum class Attached { kNo, kAfterEquals, kGlued };
  Attached attached = Attached::kNo;
};

class FlagParser {
 public:
  using ValueHandler = std::function<Refusal(const std::string& value)>;
  using ArgHandler = std::function<Refusal(std::string_view arg)>;
  // Prints the error the verb's way; returns the verb's exit status.
  using Reporter = std::function<int(const FlagError& error)>;

  // `usage`: what -h prints, and the text the flags are checked against.
  FlagParser(std::string usage, Reporter report);

  // A flag without a value; the first name is the one the usage text must
  // show (later ones are aliases).
  void flag(std::initializer_list<std::string_view> names, std::function<void()> on);
  void flag(std::initializer_list<std::string_view> names, bool& set);

  // An option: the next argument is its value.
  void option(std::initializer_list<std::string_view> names, ValueHandler on, ValueForm form = {});
  void option(std::string_view name, ValueHandler on, ValueForm form = {}) {
    option({name}, std::move(on), std::move(form));
  }
  // The same, stored as given (the last one counts).
  void option(std::string_view name, std::optional<std::string>& into);
  // The arguments that are not flags, in order. Without a handler every one
  // is refused as unknown. A lone "-" counts as a flag unless
  // `lone_dash_is_positional` (cp: stdin / stdout).
  void positional(ArgHandler on, bool lone_dash_is_positional = false);
  // The message for an argument the verb does not take (default:
  // `unknown option "ARG"`).
  void unknown_message(std::function<std::string(std::string_view arg)> message) {
    unknown_message_ = std::move(message);
  }
  // Every argument that is none of its flags goes to the positional
  // handler, even one that looks like a flag: a first pass that takes some
  // flags out of a command line, wherever they stand.
  void others_are_positional() { others_are_positional_ = true; }
  // "--" ends the flags; what follows is after_double_dash().
  void stop_at_double_dash() { stop_at_double_dash_ = true; }

  // Reads `args` (the arguments after the verb) and calls the handlers.
  // nullopt: go on; else the verb's exit status: 0 after printing the usage
  // for -h, the reporter's after a refusal (already printed).
  std::optional<int> parse(const std::vector<std::string_view>& args);

  // The arguments after "--", if it was given.
  const std::optional<std::vector<std::string_view>>& after_double_dash() const {
    return after_double_dash_;
  }
  // Reports `error` (a kMisuse unless it says otherwise); returns the status.
  int usage_error(const FlagError& error) const { return report_(error); }
  const std::string& usage() const { return usage_; }

 private:
  struct Flag {
    std::vector<std::string_view> names;
    std::function<void()> on;
  };
  struct Option {
    std::vector<std::string_view> names;
    ValueHandler on;
    ValueForm form;
  };
  // The option `arg` names (with its value when attached), if any.
  struct Match {
    const Option* option = nullptr;
    std::optional<std::string> attached_value;
  };
  Match find_option(std::string_view arg) const;
  void check_usage_matches_flags() const;

  std::string usage_;
  Reporter report_;
  std::vector<Flag> flags_;
  std::vector<Option> options_;
  ArgHandler positional_;
  bool lone_dash_is_positional_ = false;
  std::function<std::string(std::string_view)> unknown_message_;
  bool others_are_positional_ = false;
  bool stop_at_double_dash_ = false;
  std::optional<std::vector<std::string_view>> after_double_dash_;
};

}  // namespace corral::cli
