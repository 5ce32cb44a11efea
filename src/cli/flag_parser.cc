#include "cli/flag_parser.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace corral::cli {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

// `name` as a word of `text` ("--network" is not in "--network-rate").
bool mentions(std::string_view text, std::string_view name) {
  for (std::size_t at = text.find(name); at != std::string_view::npos;
       at = text.find(name, at + 1)) {
    const std::size_t end = at + name.size();
    if ((at == 0 || !is_name_char(text[at - 1])) &&
        (end == text.size() || !is_name_char(text[end])))
      return true;
  }
  return false;
}

// The flags a usage line such as "  -i, --stdin          send ..." or
// "  --tty / --no-tty     force ..." starts with: the words that begin with
// '-' before the gap of two spaces that starts the description.
std::vector<std::string_view> flags_of_usage_line(std::string_view line) {
  std::vector<std::string_view> out;
  if (!line.starts_with("  -")) return out;
  std::string_view column = line.substr(2);
  column = column.substr(0, column.find("  "));
  std::size_t i = 0;
  while (i < column.size()) {
    while (i < column.size() && (column[i] == ' ' || column[i] == ',')) ++i;
    std::size_t start = i;
    while (i < column.size() && column[i] != ' ' && column[i] != ',') ++i;
    std::string_view word = column.substr(start, i - start);
    if (word.size() > 1 && word[0] == '-') out.push_back(word);
  }
  return out;
}

[[noreturn]] void usage_text_bug(std::string_view what, std::string_view flag) {
  fprintf(stderr, "corral: bug: %.*s %.*s\n", static_cast<int>(what.size()), what.data(),
          static_cast<int>(flag.size()), flag.data());
  abort();
}

}  // namespace

FlagError refused(std::string_view flag, const Error& error) {
  return FlagError(std::string(flag) + ": " + error.message, FlagError::Kind::kBadValue);
}

FlagParser::FlagParser(std::string usage, Reporter report)
    : usage_(std::move(usage)), report_(std::move(report)) {}

void FlagParser::flag(std::initializer_list<std::string_view> names, std::function<void()> on) {
  flags_.push_back({std::vector<std::string_view>(names), std::move(on)});
}

void FlagParser::flag(std::initializer_list<std::string_view> names, bool& set) {
  flag(names, [&set] { set = true; });
}

void FlagParser::option(std::initializer_list<std::string_view> names, ValueHandler on,
                        ValueForm form) {
  options_.push_back({std::vector<std::string_view>(names), std::move(on), std::move(form)});
}

void FlagParser::option(std::string_view name, std::optional<std::string>& into) {
  option(name, [&into](const std::string& value) -> Refusal {
    into = value;
    return std::nullopt;
  });
}

void FlagParser::positional(ArgHandler on, bool lone_dash_is_positional) {
  positional_ = std::move(on);
  lone_dash_is_positional_ = lone_dash_is_positional;
}

FlagParser::Match FlagParser::find_option(std::string_view arg) const {
  for (const Option& o : options_) {
    for (std::string_view name : o.names) {
      if (arg == name) return {&o, std::nullopt};
      if (!arg.starts_with(name) || arg.size() == name.size()) continue;
      using Attached = ValueForm::Attached;
      const bool long_name = name.starts_with("--");
      if (o.form.attached == Attached::kAfterEquals && long_name && arg[name.size()] == '=')
        return {&o, std::string(arg.substr(name.size() + 1))};
      if (o.form.attached == Attached::kGlued && !long_name && name.size() == 2)
        return {&o, std::string(arg.substr(2))};
    }
  }
  return {};
}

// Both directions, so that neither the help nor the table can gain a flag
// alone. Aliases (a flag's later names) need not be shown.
void FlagParser::check_usage_matches_flags() const {
  for (const Flag& f : flags_)
    if (!mentions(usage_, f.names.front())) usage_text_bug("the usage text lacks", f.names.front());
  for (const Option& o : options_)
    if (!mentions(usage_, o.names.front())) usage_text_bug("the usage text lacks", o.names.front());
  std::string_view text = usage_;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    for (std::string_view shown : flags_of_usage_line(line)) {
      const auto named = [&](const auto& entry) {
        return std::find(entry.names.begin(), entry.names.end(), shown) != entry.names.end();
      };
      if (shown != "-h" && shown != "--help" && std::none_of(flags_.begin(), flags_.end(), named) &&
          std::none_of(options_.begin(), options_.end(), named))
        usage_text_bug("the usage text shows a flag the verb does not take:", shown);
    }
  }
}

std::optional<int> FlagParser::parse(const std::vector<std::string_view>& args) {
  check_usage_matches_flags();
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
    if (Match m = find_option(a); m.option) {
      const Option& o = *m.option;
      if (!m.attached_value && i + 1 >= args.size()) {
        FlagError missing(o.form.missing.empty() ? std::string(o.names.front()) + " needs a value"
                                                 : o.form.missing,
                          FlagError::Kind::kMissingValue);
        missing.flag = std::string(o.names.front());
        return report_(missing);
      }
      const std::string value = m.attached_value ? *m.attached_value : std::string(args[++i]);
      if (Refusal refusal = o.on(value)) return report_(*refusal);
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
    if (positional_ && (!looks_like_flag || others_are_positional_)) {
      if (Refusal refusal = positional_(a)) return report_(*refusal);
      continue;
    }
    return report_(FlagError(
        unknown_message_ ? unknown_message_(a) : "unknown option \"" + std::string(a) + "\"",
        FlagError::Kind::kUnknown));
  }
  return std::nullopt;
}

}  // namespace corral::cli
