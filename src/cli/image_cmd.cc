// corral image build|import|pull|push|ls|rm: base images (F4). User docs:
// docs/images.md. Exit codes: 0 success, 1 failure (error and hint on
// stderr), 2 usage error (with the usage text).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_text.h"
#include "base/result.h"
#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "image/image_store.h"

namespace corral::cli {

namespace {

constexpr const char* kUsage =
    "usage: corral image build NAME [--packages PKG[,PKG...]]\n"
    "       corral image import NAME FILE\n"
    "       corral image pull REGISTRY/REPO@sha256:DIGEST [--name NAME] [--insecure]\n"
    "       corral image push NAME REGISTRY/REPO[:TAG] [--insecure]\n"
    "       corral image ls [--json]\n"
    "       corral image rm NAME\n"
    "\n"
    "Base images: read-only root file systems that `corral run --image NAME` uses\n"
    "as the shared lower layer of a sandbox.\n"
    "\n"
    "  build NAME       debootstrap a minimal Debian bookworm with mmdebstrap\n"
    "                   (--variant=minbase, needs deb.debian.org); --packages adds\n"
    "                   Debian packages (comma-separated, repeatable)\n"
    "  import NAME FILE unpack an OCI image layout tarball (e.g. from\n"
    "                   `skopeo copy ... oci-archive:FILE:latest`); tag \"latest\" or\n"
    "                   the only tag in it is used\n"
    "  pull REF         fetch an image pinned by its manifest digest from an OCI\n"
    "                   registry with skopeo, verified against the digest; named\n"
    "                   sha256-<digest> unless --name; --insecure: plain HTTP or\n"
    "                   unverified TLS (a registry on loopback)\n"
    "  push NAME TARGET pack image NAME into one OCI layer and push it with\n"
    "                   skopeo; prints REGISTRY/REPO@sha256:DIGEST, the reference\n"
    "                   other nodes pull and creates name (tag default \"latest\")\n"
    "  ls [--json]      list images (name, size, creation time, source)\n"
    "  rm NAME          delete an image; refused while a sandbox uses it\n"
    "\n"
    "Images live in $CORRAL_DATA_DIR/images (default /var/lib/corral/images).\n"
    "See docs/images.md.\n";

int usage_error(std::string_view message) { return cli::usage_error(message, kUsage); }

std::string human_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  }
  return buf;
}

std::string seconds_since(std::chrono::steady_clock::time_point start) {
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

ProgressFn prefixed(const char* prefix) {
  return [prefix](std::string_view line) {
    std::cerr << prefix << line << "\n";
    std::cerr.flush();
  };
}

// Prints "image NAME <verb> in 12.3 s: 180.4 MiB at PATH" (stderr) once the
// image is in place.
int report_done(ImageStore& store, const std::string& name, const char* verb,
                std::chrono::steady_clock::time_point start) {
  std::string elapsed = seconds_since(start);
  auto info = store.get(name);
  if (!info) return command_failure(info.error());
  std::cerr << "image " << name << " " << verb << " in " << elapsed << ": "
            << human_size(info->size_bytes) << " at " << info->rootfs << "\n";
  return 0;
}

bool is_help(std::string_view a) { return a == "--help" || a == "-h" || a == "help"; }

// A subcommand's parser: its usage errors show the whole usage text, and
// an argument it does not take is refused as `unknown` followed by it.
// (-h and --help never reach it: image_command answers them first.)
FlagParser subcommand_parser(std::string unknown) {
  FlagParser parser(kUsage, [](const FlagError& e) { return usage_error(e.message); });
  parser.unknown_message([unknown](std::string_view a) { return unknown + std::string(a); });
  return parser;
}

std::vector<std::string_view> views(const std::vector<std::string>& args) {
  return {args.begin(), args.end()};
}

// Every argument that is not a flag (a lone "-" is not one), in order.
FlagParser::ArgHandler collect(std::vector<std::string>& into) {
  return [&into](std::string_view a) -> Refusal {
    into.emplace_back(a);
    return std::nullopt;
  };
}

int cmd_build(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  std::vector<std::string> packages;
  auto add_packages = [&](std::string_view list) -> bool {
    size_t start = 0;
    for (;;) {
      size_t comma = list.find(',', start);
      std::string_view p =
          list.substr(start, comma == std::string_view::npos ? list.npos : comma - start);
      if (p.empty()) return false;
      packages.emplace_back(p);
      if (comma == std::string_view::npos) return true;
      start = comma + 1;
    }
  };
  FlagParser parser = subcommand_parser("unknown option for image build: ");
  parser.option({"--packages", "-p"},
                [&](const std::string& list) -> Refusal {
                  if (!add_packages(list)) return "empty package name in --packages";
                  return std::nullopt;
                },
                {.attached = ValueForm::Attached::kAfterEquals});
  parser.positional(collect(positional), /*lone_dash_is_positional=*/true);
  if (auto status = parser.parse(views(args))) return *status;
  if (positional.size() != 1) return usage_error("image build takes exactly one NAME");
  const std::string& name = positional[0];
  if (auto s = ImageStore::validate_name(name); !s) return usage_error(s.error().to_string());
  for (const auto& p : packages) {
    if (auto s = ImageStore::validate_package(p); !s) return usage_error(s.error().to_string());
  }
  ImageStore store(ImageStore::default_dir());
  auto start = std::chrono::steady_clock::now();
  std::cerr << "[build] mmdebstrap --variant=minbase bookworm"
            << (packages.empty() ? "" : " (+ packages)") << " into " << store.dir() << "/" << name
            << "\n";
  Status s = store.build(name, packages, prefixed("[build] "));
  if (!s) return command_failure(s.error());
  return report_done(store, name, "built", start);
}

int cmd_import(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  FlagParser parser = subcommand_parser("unknown option for image import: ");
  parser.positional(collect(positional), /*lone_dash_is_positional=*/true);
  if (auto status = parser.parse(views(args))) return *status;
  if (positional.size() != 2) return usage_error("image import takes NAME and FILE");
  const std::string& name = positional[0];
  if (auto s = ImageStore::validate_name(name); !s) return usage_error(s.error().to_string());
  ImageStore store(ImageStore::default_dir());
  auto start = std::chrono::steady_clock::now();
  Status s = store.import_oci(name, positional[1], prefixed("[import] "));
  if (!s) return command_failure(s.error());
  return report_done(store, name, "imported", start);
}

int cmd_pull(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  std::string name;
  bool insecure = false;
  FlagParser parser = subcommand_parser("unknown option for image pull: ");
  parser.option("--name",
                [&](const std::string& v) -> Refusal {
                  name = v;
                  return std::nullopt;
                },
                {.missing = "--name needs an image name"});
  parser.flag({"--insecure"}, insecure);
  parser.positional(collect(positional), /*lone_dash_is_positional=*/true);
  if (auto status = parser.parse(views(args))) return *status;
  if (positional.size() != 1)
    return usage_error("image pull takes one REGISTRY/REPO@sha256:DIGEST");
  auto ref = parse_digest_reference(positional[0]);
  if (!ref) return usage_error(ref.error().to_string());
  if (name.empty()) name = ImageStore::digest_image_name(ref->digest);
  if (auto s = ImageStore::validate_name(name); !s) return usage_error(s.error().to_string());
  ImageStore store(ImageStore::default_dir());
  auto start = std::chrono::steady_clock::now();
  Status s = store.pull(name, *ref, insecure, prefixed("[pull] "));
  if (!s) return command_failure(s.error());
  return report_done(store, name, "pulled", start);
}

int cmd_push(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  bool insecure = false;
  FlagParser parser = subcommand_parser("unknown option for image push: ");
  parser.flag({"--insecure"}, insecure);
  parser.positional(collect(positional), /*lone_dash_is_positional=*/true);
  if (auto status = parser.parse(views(args))) return *status;
  if (positional.size() != 2)
    return usage_error("image push takes an image NAME and a REGISTRY/REPO[:TAG]");
  if (auto s = ImageStore::validate_name(positional[0]); !s)
    return usage_error(s.error().to_string());
  auto target = parse_push_target(positional[1]);
  if (!target) return usage_error(target.error().to_string());
  ImageStore store(ImageStore::default_dir());
  auto pinned = store.push(positional[0], *target, insecure, prefixed("[push] "));
  if (!pinned) return command_failure(pinned.error());
  // The reference alone on stdout, for scripts; progress went to stderr.
  std::cout << pinned->text() << "\n";
  return 0;
}

int cmd_ls(const std::vector<std::string>& args) {
  bool as_json = false;
  FlagParser parser = subcommand_parser("unexpected argument for image ls: ");
  parser.flag({"--json"}, as_json);
  if (auto status = parser.parse(views(args))) return *status;
  ImageStore store(ImageStore::default_dir());
  auto images = store.list();
  if (!images) return command_failure(images.error());
  if (as_json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& i : *images) {
      arr.push_back(
          {{"name", i.name},
           {"rootfs", i.rootfs},
           {"source", i.source},
           {"created", i.created},
           {"size_bytes", i.size_bytes},
           {"env", i.env},
           {"workdir", i.workdir},
           {"digest", i.digest.empty() ? nlohmann::json(nullptr) : nlohmann::json(i.digest)}});
    }
    std::cout << json_text(arr, 2) << "\n";
    return 0;
  }
  size_t w_name = 4, w_size = 4, w_created = 7;
  std::vector<std::string> sizes;
  for (const auto& i : *images) {
    sizes.push_back(human_size(i.size_bytes));
    w_name = std::max(w_name, i.name.size());
    w_size = std::max(w_size, sizes.back().size());
    w_created = std::max(w_created, i.created.size());
  }
  auto row = [&](const std::string& a, const std::string& b, const std::string& c,
                 const std::string& d) {
    std::cout << a << std::string(w_name - a.size() + 2, ' ') << b
              << std::string(w_size - b.size() + 2, ' ') << c
              << std::string(w_created - c.size() + 2, ' ') << d << "\n";
  };
  row("NAME", "SIZE", "CREATED", "SOURCE");
  for (size_t k = 0; k < images->size(); ++k) {
    const auto& i = (*images)[k];
    row(i.name, sizes[k], i.created, i.source);
  }
  return 0;
}

int cmd_rm(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  FlagParser parser = subcommand_parser("unknown option for image rm: ");
  parser.positional(collect(positional), /*lone_dash_is_positional=*/true);
  if (auto status = parser.parse(views(args))) return *status;
  if (positional.empty()) return usage_error("image rm takes one or more NAMEs");
  for (const auto& name : positional) {
    if (auto s = ImageStore::validate_name(name); !s) return usage_error(s.error().to_string());
  }
  ImageStore store(ImageStore::default_dir());
  int rc = 0;
  for (const auto& name : positional) {
    Status s = store.remove(name);
    if (!s) {
      rc = command_failure(s.error());
    } else {
      std::cerr << "image " << name << " removed\n";
    }
  }
  return rc;
}

}  // namespace

int image_command(int argc, char** argv) {
  // argv[0] is "image".
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  if (args.empty()) return usage_error("image needs a subcommand");
  std::string sub = args[0];
  args.erase(args.begin());
  if (is_help(sub)) {
    std::cout << kUsage;
    return 0;
  }
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
  }
  if (sub == "build") return cmd_build(args);
  if (sub == "import") return cmd_import(args);
  if (sub == "pull") return cmd_pull(args);
  if (sub == "push") return cmd_push(args);
  if (sub == "ls" || sub == "list") return cmd_ls(args);
  if (sub == "rm" || sub == "remove") return cmd_rm(args);
  return usage_error("unknown image subcommand: " + sub);
}

}  // namespace corral::cli
