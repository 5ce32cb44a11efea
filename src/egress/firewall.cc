#include "egress/firewall.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "base/scope_guard.h"
#include "base/sha256.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "sys/syscalls.h"

namespace corral::net {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxTableLen = 64;
constexpr std::size_t kMaxPrefixLen = 10;  // "<prefix><slot>" within IFNAMSIZ - 1
constexpr int kNftTimeoutMs = 30'000;
constexpr std::size_t kMaxOutput = 16 << 20;
const char kInstallHint[] = "install nftables (apt-get install -y nftables) or set its path";

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// --- the ruleset ------------------------------------------------------------
//
// Priorities. Every base chain on a hook sees the packet, in priority order,
// whatever the other tables (nftables or iptables) decided before: in
// netfilter an `accept` only ends the chain that issued it and the packet
// goes on to the next base chain, while a `drop` anywhere is final. So no
// accept in another table can bypass our drops, at any priority, and no
// priority of ours can make the host accept what another table drops. What
// the priorities below choose is what we see and what we decide first:
//
// - prerouting filter at mangle - 10 (-160): after conntrack (-200), so the
//   connection state is known, and before every mangle, TPROXY and NAT
//   chain of the stock priorities, so a sandbox's packet is judged as it
//   left the sandbox, before anyone rewrites or steals it.
// - prerouting nat at dstnat - 10 (-110): the first NAT chain to give a new
//   connection a mapping wins, and the stock NAT chains (iptables nat,
//   Docker, kube-proxy) sit at dstnat (-100): ours comes first, so sandbox
//   traffic cannot be DNATed elsewhere (to a container's published port,
//   say). If an earlier NAT chain of someone else did win, the packet lands
//   on another port or another host and our input or forward chain drops it:
//   fail closed.
// - input and forward at filter - 10 (-10): before the stock filter chains
//   (0), so that what we drop is counted by us even if a later chain of
//   someone else would have dropped it too.
//
// The classification is done in prerouting, not input: a packet to a
// non-local destination (UDP to 9.9.9.9:123, a ping to the internet) never
// reaches input; it is routed, or refused by routing uncounted when
// forwarding is off. Judged before routing, everything a sandbox sends is
// counted by reason. Only new TCP and new UDP to port 53 go on, and both are
// redirected to the host end, so input sees nothing else from a sandbox.

}  // namespace

Status validate_firewall_config(const FirewallConfig& c) {
  auto bad = [](std::string message) {
    return make_error(ErrorCode::kInvalidArgument, "firewall config: " + std::move(message));
  };
  if (c.table.empty() || c.table.size() > kMaxTableLen || !is_alpha(c.table[0])) {
    return bad("table name \"" + c.table + "\" must start with a letter and have 1 to " +
               std::to_string(kMaxTableLen) + " characters");
  }
  for (char ch : c.table) {
    if (!is_alpha(ch) && !is_digit(ch) && ch != '_') {
      return bad("table name \"" + c.table + "\" may only contain letters, digits and '_'");
    }
  }
  if (c.iface_prefix.empty() || c.iface_prefix.size() > kMaxPrefixLen) {
    return bad("interface prefix \"" + c.iface_prefix + "\" must have 1 to " +
               std::to_string(kMaxPrefixLen) + " characters");
  }
  for (char ch : c.iface_prefix) {
    if (!is_alpha(ch) && !is_digit(ch) && ch != '_' && ch != '-') {
      return bad("interface prefix \"" + c.iface_prefix +
                 "\" may only contain letters, digits, '_' and '-'");
    }
  }
  if (c.proxy_port == 0 || c.dns_port == 0) return bad("proxy and DNS ports must not be 0");
  if (c.proxy_port == c.dns_port) {
    return bad("proxy port and DNS port are both " + std::to_string(c.proxy_port));
  }
  if (c.nft.empty() || c.nft[0] != '/') {
    return bad("nft path \"" + c.nft + "\" must be absolute");
  }
  return ok();
}

namespace {

// The table; @TABLE@, @COUNTERS@, @SANDBOXES@ ("<prefix>*"), @PROXY@ and @DNS@
// are filled in by render_ruleset.
//
// - sandbox_ingress judges everything a sandbox sends, before routing and
//   NAT (see the top): IPv6 and spoofed sources first (also for packets of
//   known connections, so that a sandbox cannot inject into a connection of
//   another one), then known connections pass, then new TCP and new UDP to
//   port 53 pass (to be redirected), and every other packet is counted by
//   reason and dropped. `fib saddr . iif oif missing` is a strict
//   reverse-path check: the source must be routed back through the
//   interface the packet came in on. Without it a sandbox could send with
//   any source address and make the host's proxy or DNS answer it, over the
//   host's uplink, to an address of its choosing.
// - prerouting_nat: `redirect` maps the destination to the primary address
//   of the interface the packet came in on, the sandbox's own host end, so
//   that the listener that accepts tells which sandbox is talking, and a
//   sandbox that aims at another sandbox's host end reaches its own.
// - input: after the redirect only the proxy and DNS ports remain for new
//   traffic from a sandbox. From elsewhere (another interface, or the host
//   itself through lo: a local process must not talk to the proxy as if it
//   were a sandbox) the two ports are closed, except to replies of
//   connections the host opened itself from one of them.
// - forward: nothing is routed from or to a sandbox.
constexpr std::string_view kRulesetTemplate = R"(table inet @TABLE@ {
@COUNTERS@
	chain sandbox_ingress {
		meta nfproto ipv6 counter name "drop_ipv6" drop
		fib saddr . iif oif missing counter name "drop_spoofed" drop
		ct state established,related accept
		ct state != new counter name "drop_other" drop
		meta l4proto tcp accept
		udp dport 53 accept
		meta l4proto icmp counter name "drop_icmp" drop
		meta l4proto udp counter name "drop_udp" drop
		counter name "drop_other" drop
	}

	chain prerouting_filter {
		type filter hook prerouting priority mangle - 10; policy accept;
		iifname @SANDBOXES@ jump sandbox_ingress
	}

	chain prerouting_nat {
		type nat hook prerouting priority dstnat - 10; policy accept;
		iifname @SANDBOXES@ meta nfproto ipv4 meta l4proto tcp counter name "redirect_tcp" redirect to :@PROXY@
		iifname @SANDBOXES@ meta nfproto ipv4 udp dport 53 counter name "redirect_dns" redirect to :@DNS@
	}

	chain sandbox_input {
		ct state established,related accept
		tcp dport @PROXY@ accept
		udp dport @DNS@ accept
		counter name "drop_other" drop
	}

	chain input {
		type filter hook input priority filter - 10; policy accept;
		iifname @SANDBOXES@ jump sandbox_input
		tcp dport @PROXY@ ct state != { established, related } counter name "drop_foreign" drop
		udp dport @DNS@ ct state != { established, related } counter name "drop_foreign" drop
	}

	chain forward {
		type filter hook forward priority filter - 10; policy accept;
		iifname @SANDBOXES@ counter name "drop_forward" drop
		oifname @SANDBOXES@ counter name "drop_forward" drop
	}
}
)";

void replace_all(std::string& s, std::string_view from, const std::string& to) {
  for (std::size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos)) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

}  // namespace

namespace {
std::string ruleset_mark(std::string_view rules) {
  return "ruleset_" + sha256_hex(rules).substr(0, 16);
}
// The name of the fingerprint chain of `rendered` (a render_ruleset text).
std::string mark_in(std::string_view rendered) {
  const std::size_t at = rendered.find("\tchain ruleset_");
  if (at == std::string_view::npos) return {};
  const std::size_t start = at + 7, end = rendered.find(' ', start);
  return std::string(rendered.substr(start, end - start));
}
}  // namespace

std::string render_ruleset(const FirewallConfig& c) {
  if (auto valid = validate_firewall_config(c); !valid) {
    std::fprintf(stderr, "corral: render_ruleset on an invalid config (a bug): %s\n",
                 valid.error().to_string().c_str());
    std::abort();
  }
  std::string counters;
  for (const auto& counter : kFirewallCounters) {
    counters += "\tcounter " + std::string(counter.name) + " {\n\t}\n";
  }
  std::string s(kRulesetTemplate);
  replace_all(s, "@TABLE@", c.table);
  replace_all(s, "@COUNTERS@", counters);
  replace_all(s, "@SANDBOXES@", "\"" + c.iface_prefix + "*\"");
  replace_all(s, "@PROXY@", std::to_string(c.proxy_port));
  replace_all(s, "@DNS@", std::to_string(c.dns_port));
  // The table carries a fingerprint of its own rules, an empty chain named
  // after them: firewall_installed() can then tell this exact ruleset from
  // an older corral's or an edited one (nft's JSON has no table comments).
  const std::string mark = "\tchain " + ruleset_mark(s) + " {\n\t}\n";
  s.insert(s.find('\n') + 1, mark);
  return s;
}

namespace {

// --- running nft -------------------------------------------------------------

struct NftRun {
  int status = 0;  // waitpid status
  std::string out;
  std::string err;
};

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs `<nft> args...` with `input` on stdin, stdout and stderr captured,
// in the C locale, with a timeout (base/subprocess.h). An error only if nft
// could not be run or did not finish; its exit status is the caller's to
// judge.
Result<NftRun> run_nft(const FirewallConfig& c, const std::vector<std::string>& args,
                       std::string_view input) {
  SubprocessOptions sub;
  sub.argv.push_back(c.nft);
  sub.argv.insert(sub.argv.end(), args.begin(), args.end());
  sub.env = std::vector<std::string>{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  sub.stdin_text = std::string(input);
  sub.output_limit = kMaxOutput;
  sub.timeout = std::chrono::milliseconds(kNftTimeoutMs);
  sub.death_signal = SIGKILL;
  sub.exec_hint = [](int err) {
    return err == ENOENT || err == EACCES ? std::string(kInstallHint) : std::string();
  };
  auto done = run_subprocess(sub);
  if (!done) return tl::unexpected(done.error());
  NftRun run;
  run.status = done->wait_status;
  run.out = std::move(done->out);
  run.err = trimmed(std::move(done->err));
  return run;
}

// nft's JSON read without exceptions: a field of the wrong type reads as
// absent (nlohmann's value() would throw).
std::string str_field(const json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}
std::optional<std::int64_t> int_field(const json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}
std::uint64_t count_field(const json& object, const char* key) {
  if (!object.is_object()) return 0;
  auto it = object.find(key);
  return it != object.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}
// The items of {"nftables": [...]} with a member `kind` that is an object.
std::vector<const json*> items_of(const json& doc, const char* kind) {
  std::vector<const json*> found;
  if (!doc.is_object()) return found;
  auto list = doc.find("nftables");
  if (list == doc.end() || !list->is_array()) return found;
  for (const json& item : *list) {
    if (!item.is_object()) continue;
    auto it = item.find(kind);
    if (it != item.end() && it->is_object()) found.push_back(&*it);
  }
  return found;
}

bool succeeded(const NftRun& run) { return WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0; }

tl::unexpected<Error> nft_failed(const FirewallConfig& c, const std::string& what,
                                 const NftRun& run) {
  std::string message = c.nft + " (" + what + "): " + describe_status(run.status);
  if (!run.err.empty()) message += ": " + run.err;
  return make_error(ErrorCode::kSystem, std::move(message),
                    "corral needs root (CAP_NET_ADMIN) and nf_tables with nat, ct and fib "
                    "support in the kernel");
}

std::string table_ref(const FirewallConfig& c) { return "table inet " + c.table; }

// The table as nft's JSON (`nft -j list table`), or nullopt if it does not
// exist. Whether it exists is asked separately (`nft -j list tables`) only
// when the listing fails, rather than read from nft's localized error text.
Result<std::optional<json>> list_table(const FirewallConfig& c) {
  CORRAL_TRY(validate_firewall_config(c));
  auto run = run_nft(c, {"-j", "list", "table", "inet", c.table}, {});
  if (!run) return tl::unexpected(run.error());
  if (!succeeded(*run)) {
    auto tables = run_nft(c, {"-j", "list", "tables", "inet"}, {});
    if (!tables) return tl::unexpected(tables.error());
    if (!succeeded(*tables)) return nft_failed(c, "list tables inet", *tables);
    json doc = json::parse(tables->out, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      return make_error(ErrorCode::kSystem, c.nft + " -j list tables inet: output is not JSON");
    }
    bool present = false;
    for (const json* t : items_of(doc, "table")) {
      if (str_field(*t, "family") == "inet" && str_field(*t, "name") == c.table) present = true;
    }
    if (!present) return std::optional<json>();
    return nft_failed(c, "list " + table_ref(c), *run);
  }
  json doc = json::parse(run->out, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || items_of(doc, "table").empty()) {
    return make_error(ErrorCode::kSystem,
                      c.nft + " -j list " + table_ref(c) + ": output is not nft's JSON");
  }
  return std::optional<json>(std::move(doc));
}

struct ChainSpec {
  std::string_view name;
  std::string_view type;  // empty for a regular chain
  std::string_view hook;
  int prio;
  std::size_t rules;
};
// What render_ruleset makes; firewall_installed compares the live table.
constexpr ChainSpec kChains[] = {
    {"sandbox_ingress", "", "", 0, 9},
    {"prerouting_filter", "filter", "prerouting", -160, 1},
    {"prerouting_nat", "nat", "prerouting", -110, 2},
    {"sandbox_input", "", "", 0, 4},
    {"input", "filter", "input", -10, 3},
    {"forward", "filter", "forward", -10, 2},
};

}  // namespace

FirewallCounter FirewallCounters::get(std::string_view name) const {
  auto it = by_name.find(name);
  return it == by_name.end() ? FirewallCounter{} : it->second;
}

Status install_firewall(const FirewallConfig& c) {
  CORRAL_TRY_CTX(validate_firewall_config(c), "installing the firewall");
  // One transaction: create the table if it is missing (so that the delete
  // cannot fail), delete it, define it again. The kernel applies all or
  // nothing, and packets never see the table missing.
  std::string script = table_ref(c) + " {}\ndelete " + table_ref(c) + "\n" + render_ruleset(c);
  auto run = run_nft(c, {"-f", "-"}, script);
  if (!run) return tl::unexpected(run.error().wrap("installing firewall " + table_ref(c)));
  if (!succeeded(*run)) {
    return tl::unexpected(
        nft_failed(c, "-f -", *run).value().wrap("installing firewall " + table_ref(c)));
  }
  return ok();
}

Result<bool> firewall_installed(const FirewallConfig& c) {
  auto doc = list_table(c);
  if (!doc) return tl::unexpected(doc.error().wrap("checking firewall " + table_ref(c)));
  if (!doc->has_value()) return false;
  const json& table = **doc;
  std::set<std::string, std::less<>> chains_ok, counters;
  for (const json* chain : items_of(table, "chain")) {
    std::string name = str_field(*chain, "name");
    for (const auto& spec : kChains) {
      if (spec.name != name) continue;
      bool as_specified = spec.type.empty() ? !chain->contains("hook")
                                            : str_field(*chain, "type") == spec.type &&
                                                  str_field(*chain, "hook") == spec.hook &&
                                                  int_field(*chain, "prio") == spec.prio &&
                                                  str_field(*chain, "policy") == "accept";
      if (as_specified) chains_ok.insert(name);
    }
  }
  std::map<std::string, std::size_t, std::less<>> rules;
  for (const json* rule : items_of(table, "rule")) ++rules[str_field(*rule, "chain")];
  for (const json* counter : items_of(table, "counter")) {
    counters.insert(str_field(*counter, "name"));
  }
  for (const auto& spec : kChains) {
    auto it = rules.find(spec.name);
    if (!chains_ok.contains(spec.name) || it == rules.end() || it->second != spec.rules) {
      return false;
    }
  }
  for (const auto& counter : kFirewallCounters) {
    if (!counters.contains(counter.name)) return false;
  }
  // The same rules as this corral's, not only the same shape.
  const std::string mark = mark_in(render_ruleset(c));
  for (const json* chain : items_of(table, "chain")) {
    if (str_field(*chain, "name") == mark) return true;
  }
  return false;
}

Result<FirewallCounters> read_firewall_counters(const FirewallConfig& c) {
  auto doc = list_table(c);
  if (!doc) return tl::unexpected(doc.error().wrap("reading firewall counters"));
  if (!doc->has_value()) {
    return make_error(ErrorCode::kNotFound,
                      "reading firewall counters: " + table_ref(c) + " does not exist",
                      "the firewall is installed when the daemon or `corral run` starts");
  }
  FirewallCounters counters;
  for (const json* counter : items_of(**doc, "counter")) {
    std::string name = str_field(*counter, "name");
    if (name.empty()) continue;
    counters.by_name[name] = {count_field(*counter, "packets"), count_field(*counter, "bytes")};
  }
  return counters;
}

Status remove_firewall(const FirewallConfig& c) {
  CORRAL_TRY_CTX(validate_firewall_config(c), "removing the firewall");
  std::string script = table_ref(c) + " {}\ndelete " + table_ref(c) + "\n";
  auto run = run_nft(c, {"-f", "-"}, script);
  if (!run) return tl::unexpected(run.error().wrap("removing firewall " + table_ref(c)));
  if (!succeeded(*run)) {
    return tl::unexpected(
        nft_failed(c, "-f -", *run).value().wrap("removing firewall " + table_ref(c)));
  }
  return ok();
}

}  // namespace corral::net
