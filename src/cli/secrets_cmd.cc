// corral secrets keygen|encrypt|check: the daemon's secret store files
// (src/secrets/secret_store.h). User docs: docs/secrets.md and docs/cli.md.
// Exit codes: 0 success, 1 failure (error and hint on stderr), 2 usage.
// No verb prints or logs a value: check lists key names and sources only.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "cli/cli_output.h"
#include "cli/commands.h"
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

// Flags of the form --name VALUE or --name=VALUE; repeated ones accumulate.
struct Flags {
  std::vector<std::pair<std::string, std::string>> values;
  std::string error;

  std::vector<std::string> all(std::string_view name) const {
    std::vector<std::string> out;
    for (const auto& [k, v] : values) {
      if (k == name) out.push_back(v);
    }
    return out;
  }
  std::string one(std::string_view name) const {
    auto a = all(name);
    return a.empty() ? std::string() : a.back();
  }
};

Flags parse_flags(const std::vector<std::string>& args, const std::vector<std::string>& known) {
  Flags f;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string name = a;
    std::string value;
    bool inline_value = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    bool ok = false;
    for (const auto& k : known) ok = ok || k == name;
    if (!ok) {
      f.error = "unexpected argument: " + a;
      return f;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) {
        f.error = name + " needs a value";
        return f;
      }
      value = args[++i];
    }
    if (value.empty()) {
      f.error = name + " needs a non-empty value";
      return f;
    }
    f.values.emplace_back(name.substr(2), value);
  }
  return f;
}

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
  Flags f = parse_flags(args, {"--out"});
  if (!f.error.empty()) return usage_error(f.error);
  const std::string out = f.one("out");
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
  Flags f = parse_flags(args, {"--key", "--in", "--out"});
  if (!f.error.empty()) return usage_error(f.error);
  const std::string key_file = f.one("key");
  const std::string in = f.one("in");
  const std::string out = f.one("out");
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
  Flags f = parse_flags(args, {"--file", "--env", "--env-prefix", "--encrypted", "--key"});
  if (!f.error.empty()) return usage_error(f.error);
  secrets::SecretStoreConfig config;
  config.file = f.one("file");
  config.env = f.all("env");
  config.env_prefix = f.one("env-prefix");
  config.encrypted_file = f.one("encrypted");
  config.key_file = f.one("key");
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
