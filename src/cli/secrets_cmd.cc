// corral secrets keygen|encrypt|check: the daemon's secret store files
// (src/secrets/secret_store.h). User docs: docs/secrets.md and docs/cli.md.
// Exit codes: 0 success, 1 failure (error and hint on stderr), 2 usage.
// No verb prints or logs a value: check lists key names and sources only.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "secrets/secret_store.h"
#include "secrets/secret_value.h"

namespace corral::cli {

namespace {

constexpr const char* kUsage =
    "usage: corral secrets keygen --out FILE\n"
    "       corral secrets encrypt --key FILE --in PLAIN --out ENC\n"
    "       corral secrets check [--file FILE] [--env NAME]... [--env-prefix PREFIX]\n"
    "                            [--encrypted ENC --key FILE]\n"
    "\n"
    "The daemon's secret store (docs/secrets.md).\n"
    "\n"
    "  keygen    write a new random 32-byte key (64 hex digits) to FILE, mode 0600;\n"
    "            refuses to overwrite an existing file\n"
    "  encrypt   encrypt the plain store file PLAIN (KEY=value lines, mode 0600)\n"
    "            with the key in FILE into ENC (mode 0600, must not exist)\n"
    "  check     load a store the way the daemon does and list its key names\n"
    "            and where each comes from; never a value\n";

int usage_error(std::string_view message) { return cli::usage_error(message, kUsage); }

// A subcommand's flags: each takes a non-empty value, as --name VALUE or
// --name=VALUE. (-h and --help never reach it: secrets_command answers
// them first.)
class SecretsFlags {
 public:
  SecretsFlags() : parser_(kUsage, [](const FlagError& e) { return usage_error(e.message); }) {
    parser_.unknown_message(
        [](std::string_view a) { return "unexpected argument: " + std::string(a); });
  }
  // `store` gets each value (a repeated flag: each in turn).
  void value(std::string_view name, std::function<void(const std::string&)> store) {
    parser_.option(name,
                   [name, store](const std::string& v) -> Refusal {
                     if (v.empty()) return std::string(name) + " needs a non-empty value";
                     store(v);
                     return std::nullopt;
                   },
                   {.attached = ValueForm::Attached::kAfterEquals});
  }
  // The last value given is kept.
  void value(std::string_view name, std::string& into) {
    value(name, [&into](const std::string& v) { into = v; });
  }
  std::optional<int> parse(const std::vector<std::string>& args) {
    return parser_.parse(std::vector<std::string_view>(args.begin(), args.end()));
  }

 private:
  FlagParser parser_;
};

// Writes `bytes` to a new file of mode 0600; refuses an existing path
// (O_EXCL, no symlink followed). Removes a partly written file.
Status write_new_private_file(const std::string& path, std::string_view bytes) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    int err = errno;
    if (err == EEXIST) {
      return make_error(ErrorCode::kAlreadyExists, path + " exists: refusing to overwrite it",
                        "remove it first, or choose another path");
    }
    return errno_error("open(" + path + ")", err);
  }
  Status st = ok();
  if (::fchmod(fd.get(), 0600) != 0) st = errno_error("fchmod(" + path + ", 0600)");
  std::size_t done = 0;
  while (st && done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      st = errno_error("write(" + path + ")");
    } else {
      done += static_cast<std::size_t>(n);
    }
  }
  if (st && ::fsync(fd.get()) != 0) st = errno_error("fsync(" + path + ")");
  if (!st) ::unlink(path.c_str());
  return st;
}

int cmd_keygen(const std::vector<std::string>& args) {
  std::string out;
  SecretsFlags flags;
  flags.value("--out", out);
  if (auto status = flags.parse(args)) return *status;
  if (out.empty()) return usage_error("keygen needs --out FILE");
  auto key = secrets::generate_key();
  if (!key) return command_failure(key.error());
  auto hex = secrets::encode_key_hex(*key);
  if (!hex) return command_failure(hex.error());
  if (auto st = write_new_private_file(out, hex->view()); !st) {
    return command_failure(st.error().wrap("writing the key"));
  }
  std::cout << "wrote a new 32-byte key to " << out << " (mode 0600)\n";
  return 0;
}

int cmd_encrypt(const std::vector<std::string>& args) {
  std::string key_file, in, out;
  SecretsFlags flags;
  flags.value("--key", key_file);
  flags.value("--in", in);
  flags.value("--out", out);
  if (auto status = flags.parse(args)) return *status;
  if (key_file.empty() || in.empty() || out.empty()) {
    return usage_error("encrypt needs --key FILE, --in PLAIN and --out ENC");
  }
  auto key = secrets::read_key_file(key_file);
  if (!key) return command_failure(key.error());
  auto plain = secrets::read_protected_file(in, "plain secret file");
  if (!plain) return command_failure(plain.error());
  // Parsed here first so that an error names the file (never the line).
  auto parsed = secrets::parse_store_text(plain->view(), "plain secret file " + in);
  if (!parsed) return command_failure(parsed.error());
  const std::size_t count = parsed->size();
  parsed->clear();
  auto sealed = secrets::encrypt_store(plain->view(), *key);
  if (!sealed) return command_failure(sealed.error());
  if (auto st = write_new_private_file(out, *sealed); !st) {
    return command_failure(st.error().wrap("writing the encrypted file"));
  }
  std::cout << "encrypted " << count << (count == 1 ? " key" : " keys") << " from " << in
            << " into " << out << "\n";
  return 0;
}

int cmd_check(const std::vector<std::string>& args) {
  secrets::SecretStoreConfig config;
  SecretsFlags flags;
  flags.value("--file", config.file);
  flags.value("--env", [&](const std::string& v) { config.env.push_back(v); });
  flags.value("--env-prefix", config.env_prefix);
  flags.value("--encrypted", config.encrypted_file);
  flags.value("--key", config.key_file);
  if (auto status = flags.parse(args)) return *status;
  if (config.file.empty() && config.env.empty() && config.env_prefix.empty() &&
      config.encrypted_file.empty() && config.key_file.empty()) {
    return usage_error(
        "check needs at least one source: --file, --env, --env-prefix or "
        "--encrypted with --key");
  }
  auto store = secrets::SecretStore::load(config);
  if (!store) return command_failure(store.error());
  for (const std::string& k : store->keys()) {
    std::cout << k << "\t" << store->source_of(k) << "\n";
  }
  std::cout << store->size() << (store->size() == 1 ? " key" : " keys") << "\n";
  return 0;
}

}  // namespace

int secrets_command(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error("secrets needs a subcommand: keygen, encrypt or check");
  for (const auto& a : args) {
    if (a == "--help" || a == "-h" || a == "help") {
      std::cout << kUsage;
      return 0;
    }
  }
  std::string sub = args[0];
  args.erase(args.begin());
  if (sub == "keygen") return cmd_keygen(args);
  if (sub == "encrypt") return cmd_encrypt(args);
  if (sub == "check") return cmd_check(args);
  return usage_error("unknown secrets subcommand: " + sub);
}

}  // namespace corral::cli
