// corral audit verify|tail: the daemon's hash-chained audit log. User docs:
// docs/audit.md. Exit codes: 0 success (chain intact), 1 the log is damaged
// or cannot be read (first bad line and reason on stderr), 2 usage error.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/paths.h"
#include "base/result.h"
#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "store/audit_log.h"

namespace corral::cli {

namespace {

constexpr const char* kUsage =
    "usage: corral audit verify [--log PATH]\n"
    "       corral audit tail [-n N] [--log PATH]\n"
    "\n"
    "The daemon's audit log: one JSON record per line, each carrying the hash of\n"
    "the line before it. Rotated files (PATH.<first seq>) continue the chain.\n"
    "\n"
    "  verify   check every record of the log and of its rotated files, the chain\n"
    "           across them, and that records gone before the oldest file were\n"
    "           deleted by retention; prints \"N records in K files, chain intact\"\n"
    "           and each repair the daemon recorded (a torn last line it removed at\n"
    "           start-up) (exit 0), or the file, line and reason of the first\n"
    "           problem (exit 1)\n"
    "  tail     print the last N records of the active file (default 10)\n"
    "\n"
    "  --log PATH   the active log (default $CORRAL_DATA_DIR/audit.log,\n"
    "               i.e. /var/lib/corral/audit.log)\n"
    "\n"
    "See docs/audit.md.\n";

int usage_error(std::string_view message) { return cli::usage_error(message, kUsage); }

bool is_help(std::string_view a) { return a == "--help" || a == "-h" || a == "help"; }

int report(const FlagError& e) { return usage_error(e.message); }

// --log PATH / --log=PATH, into `log`.
void add_log_option(FlagParser& parser, std::string& log) {
  parser.option("--log",
                [&log](const std::string& v) -> Refusal {
                  log = v;
                  return std::nullopt;
                },
                {.missing = "--log needs a path", .attached = ValueForm::Attached::kAfterEquals});
}

// A subcommand's parser: --log and (added by the caller) its own flags; an
// argument it does not take is "unexpected argument for audit SUB: ARG".
// (-h and --help never reach it: audit_command answers them first.)
FlagParser subcommand_parser(const std::string& sub, std::string& log) {
  FlagParser parser(kUsage, report);
  parser.unknown_message([sub](std::string_view a) {
    return "unexpected argument for audit " + sub + ": " + std::string(a);
  });
  add_log_option(parser, log);
  return parser;
}

// Reads a subcommand's arguments. --log is taken out first, wherever it
// stands (even between -n and its number), as audit has always read it;
// then `parser` reads the rest in order.
std::optional<int> parse_subcommand(FlagParser& parser, const std::vector<std::string>& args,
                                    std::string& log) {
  std::vector<std::string_view> rest;
  FlagParser log_first(kUsage, report);
  add_log_option(log_first, log);
  log_first.positional(
      [&rest](std::string_view a) -> Refusal {
        rest.push_back(a);
        return std::nullopt;
      },
      /*lone_dash_is_positional=*/true);
  log_first.others_are_positional();
  if (auto status = log_first.parse(std::vector<std::string_view>(args.begin(), args.end())))
    return status;
  if (log.empty()) return usage_error("--log needs a non-empty path");
  return parser.parse(rest);
}

int cmd_verify(const std::vector<std::string>& args, std::string log) {
  FlagParser parser = subcommand_parser("verify", log);
  if (auto status = parse_subcommand(parser, args, log)) return *status;
  auto report = verify_audit_set(log);
  if (!report) return command_failure(report.error());
  const auto plural = [](std::uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  if (report->ok) {
    std::cout << plural(report->records, "record", "records") << " in "
              << plural(report->files, "file", "files") << ", chain intact";
    if (report->records != 0)
      std::cout << " (seq " << report->first_seq << " to " << report->last_seq << ")";
    std::cout << "\n";
    for (const AuditRepair& r : report->repairs)
      std::cout << "repaired: " << r.file << ": line " << r.line << " (seq " << r.seq
                << "): audit.repair: the daemon removed a torn last line of " << r.dropped_bytes
                << (r.dropped_bytes == 1 ? " byte" : " bytes") << " at offset " << r.offset
                << " (sha256 " << r.dropped_sha256 << ")\n";
    if (report->removed_by_retention_through != 0)
      std::cout << "records 1 to " << report->removed_by_retention_through
                << " were deleted by retention, as an audit.retention record says\n";
    std::cout << "last line sha256: " << report->last_line_hash << "\n";
    return 0;
  }
  std::cerr << "corral: audit log " << report->bad_file;
  if (report->bad_line != 0) std::cerr << ": line " << report->bad_line;
  std::cerr << ": " << audit_problem_name(report->problem) << ": " << report->reason << "\n"
            << plural(report->records, "record", "records") << " before it verified\n";
  return 1;
}

int cmd_tail(const std::vector<std::string>& args, std::string log) {
  std::size_t n = 10;
  FlagParser parser = subcommand_parser("tail", log);
  parser.option("-n",
                [&n](const std::string& value) -> Refusal {
                  if (value.empty() || value.size() > 9 ||
                      value.find_first_not_of("0123456789") != std::string::npos) {
                    return "-n needs a non-negative number, not \"" + value + "\"";
                  }
                  n = std::stoul(value);
                  return std::nullopt;
                },
                {.missing = "-n needs a number", .attached = ValueForm::Attached::kGlued});
  if (auto status = parse_subcommand(parser, args, log)) return *status;
  auto lines = tail_audit_log(log, n);
  if (!lines) return command_failure(lines.error());
  for (const auto& l : *lines) std::cout << l << "\n";
  return 0;
}

}  // namespace

int audit_command(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error("audit needs a subcommand: verify or tail");
  if (is_help(args[0])) {
    std::cout << kUsage;
    return 0;
  }
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
  }
  std::string sub = args[0];
  args.erase(args.begin());
  std::string log = data_dir() + "/audit.log";
  if (sub == "verify") return cmd_verify(args, std::move(log));
  if (sub == "tail") return cmd_tail(args, std::move(log));
  return usage_error("unknown audit subcommand: " + sub);
}

}  // namespace corral::cli
