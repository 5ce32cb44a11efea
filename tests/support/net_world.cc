#include "support/net_world.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>

#include "support/reflector.h"

namespace corral::testing {

namespace {

enum Kind { kHttp = 0, kTls = 1, kEcho = 2, kInternal = 3 };

// Runs a shell command; returns its exit status (and its output in *out).
int sh(const std::string& cmd, std::string* out = nullptr) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  int st = pclose(p);
  if (out) *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Status run(const std::string& cmd) {
  std::string out;
  if (sh(cmd, &out) != 0)
    return make_error(ErrorCode::kSystem, "net world: `" + cmd + "` failed: " + out);
  return ok();
}

// Calls `fn` on a thread that has entered network namespace `netns`
// (/run/netns/<name>): sockets it creates live there.
template <typename Fn>
auto in_netns(const std::string& netns, Fn fn) -> decltype(fn()) {
  return std::async(std::launch::async,
                    [&]() -> decltype(fn()) {
                      UniqueFd ns(::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
                      if (!ns || ::setns(ns.get(), CLONE_NEWNET) != 0)
                        return make_error(ErrorCode::kSystem,
                                          "net world: cannot enter netns " + netns);
                      return fn();
                    })
      .get();
}

Result<UniqueFd> listen_on(const char* address, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return errno_error("socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, address, &sa.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(fd.get(), 128) != 0)
    return errno_error(std::string("listen ") + address + ":" + std::to_string(port));
  return fd;
}

std::string local_address(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof buf);
  return buf;
}

std::string header_value(const std::string& head, const std::string& name) {
  std::string lower_head = head;
  for (char& c : lower_head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::size_t at = lower_head.find("\r\n" + name + ":");
  if (at == std::string::npos) return "";
  std::size_t start = at + 3 + name.size();
  std::size_t end = head.find("\r\n", start);
  std::string v = head.substr(start, end - start);
  v.erase(0, v.find_first_not_of(" \t"));
  if (std::size_t colon = v.find(':'); colon != std::string::npos) v.resize(colon);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

std::string response(const std::string& who) {
  std::string body = "hello from " + who + "\n";
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

std::error_code& ec_ignore() {
  static thread_local std::error_code ec;
  return ec;
}

// Only one world at a time on a host: the addresses are fixed.
constexpr const char* kWorldLock = "/run/corral-test-networld.lock";

}  // namespace

Result<std::unique_ptr<NetWorld>> NetWorld::create() {
  // The world's servers write with write(2) and SSL_write: a proxy that
  // ends a connection first (a refusal, one request per intercepted
  // connection) must not end the test process with SIGPIPE. Every user of
  // the world gets this, not only the suites that remembered it.
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<NetWorld> w(new NetWorld());
  static std::atomic<int> counter{0};
  const int n = counter++;
  const std::string id = std::to_string(getpid() % 100000) + static_cast<char>('a' + n % 26);
  w->netns_ = "corral-tw-" + id;
  w->host_if_ = "cw" + id;
  char tmpl[] = "/tmp/corral-networld-XXXXXX";
  if (!mkdtemp(tmpl)) return errno_error("mkdtemp");
  w->dir_ = tmpl;

  // A lock held for the world's life (closed by the destructor via stop_).
  int lock = ::open(kWorldLock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) return errno_error(kWorldLock);
  w->listeners_.emplace_back(lock);

  // Under the lock, any world still here belongs to a test process that
  // died without its destructor (killed, or a crash): remove it first, or
  // its addresses would shadow ours.
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec_ignore())) {
    const std::string name = e.path().filename();
    if (name.rfind("corral-tw-", 0) != 0) continue;
    sh("ip netns del " + name);
    sh("ip link del cw" + name.substr(std::string("corral-tw-").size()));
  }
  const std::string ns = w->netns_, hif = w->host_if_;
  CORRAL_TRY(run("ip netns add " + ns));
  CORRAL_TRY(run("ip link add " + hif + " type veth peer name eth0 netns " + ns));
  CORRAL_TRY(run("ip addr add " + std::string(kHostEnd) + "/24 dev " + hif));
  CORRAL_TRY(run("ip link set " + hif + " up"));
  for (const char* a : {kAllowedAddress, kDeniedAddress, kDnsAddress, kInternalAddress})
    CORRAL_TRY(run("ip -n " + ns + " addr add " + std::string(a) + "/24 dev eth0"));
  CORRAL_TRY(run("ip -n " + ns + " link set eth0 up"));
  CORRAL_TRY(run("ip -n " + ns + " link set lo up"));

  // The world's CA and one certificate for its names (EC keys: fast).
  const std::string d = w->dir_;
  CORRAL_TRY(run(
      "cd " + d +
      " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
      " -keyout ca.key -out ca.pem -days 2 -subj /CN=corral-test-ca"
      " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
      " -keyout srv.key -out srv.csr -subj /CN=allowed.test"
      " && printf 'subjectAltName=DNS:allowed.test,DNS:www.allowed.test,DNS:denied.test\\n' > san"
      " && openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem"
      " -days 2 -extfile san"));
  w->ca_pem_ = d + "/ca.pem";
  w->cert_pem_ = d + "/srv.pem";
  w->key_pem_ = d + "/srv.key";

  CORRAL_TRY(w->start_servers());
  return w;
}

Status NetWorld::start_servers() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr || SSL_CTX_use_certificate_chain_file(ctx, cert_pem_.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, key_pem_.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ctx) SSL_CTX_free(ctx);
    return make_error(ErrorCode::kSystem, "net world: TLS server context");
  }
  ssl_ctx_ = ctx;
  stop_.reset(::eventfd(0, EFD_CLOEXEC));

  struct Want {
    const char* address;
    std::uint16_t port;
    Kind kind;
  };
  const Want wants[] = {{kAllowedAddress, 80, kHttp},
                        {kAllowedAddress, 443, kTls},
                        {kAllowedAddress, 5432, kEcho},
                        {kDeniedAddress, 80, kHttp},
                        {kDeniedAddress, 443, kTls},
                        {kDeniedAddress, 5432, kEcho},
                        {kInternalAddress, kInternalPort, kInternal}};
  for (const Want& want : wants) {
    auto fd = in_netns(netns_, [&] { return listen_on(want.address, want.port); });
    if (!fd) return tl::unexpected(fd.error());
    int raw = fd->get();
    listeners_.push_back(std::move(*fd));
    threads_.emplace_back([this, raw, kind = want.kind] { serve(raw, kind); });
  }

  auto dns = in_netns(netns_, [] { return TestDnsServer::start(kDnsAddress, 53); });
  if (!dns) return tl::unexpected(dns.error());
  dns_ = std::move(*dns);
  dns_->add_a("allowed.test", kAllowedAddress, 300);
  dns_->add_a("www.allowed.test", kAllowedAddress, 300);
  dns_->add_a("denied.test", kDeniedAddress, 300);
  dns_->add_a("loopback.test", "127.0.0.1", 300);
  dns_->add_a("private.test", "10.1.2.3", 300);
  dns_->add_a("metadata.test", "169.254.169.254", 300);
  dns_->add_txt("txt.test", "v=spf1 -all", 300);
  return ok();
}

void NetWorld::serve(int listener, int kind) {
  for (;;) {
    pollfd fds[2] = {{listener, POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents) return;
    UniqueFd c(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!c) continue;
    timeval tv{5, 0};
    ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const std::string local = local_address(c.get());
    if (kind == kEcho) {
      {
        std::lock_guard lock(mu_);
        ++tcp_[local];
      }
      char buf[4096];
      ssize_t n;
      while ((n = ::read(c.get(), buf, sizeof buf)) > 0) {
        if (::write(c.get(), buf, static_cast<size_t>(n)) != n) break;
      }
      continue;
    }
    if (kind == kInternal) {
      std::string req;
      char buf[4096];
      ssize_t n;
      while (req.find("\r\n\r\n") == std::string::npos &&
             (n = ::read(c.get(), buf, sizeof buf)) > 0)
        req.append(buf, static_cast<size_t>(n));
      const std::string head = req.substr(0, req.find("\r\n\r\n") + 2);
      // The body, by its Content-Length (read, so that closing does not reset).
      std::string cl = header_value(head, "content-length");
      std::size_t want = cl.empty() ? 0 : std::strtoul(cl.c_str(), nullptr, 10);
      std::size_t have = req.size() - std::min(req.size(), head.size() + 2);
      while (have < want && (n = ::read(c.get(), buf, sizeof buf)) > 0)
        have += static_cast<size_t>(n);
      const std::string line = head.substr(0, head.find(' ', head.find(' ') + 1));
      const bool auth = !header_value(head, "authorization").empty() ||
                        head.find("\r\nAuthorization:") != std::string::npos;
      std::string sandbox;
      {
        std::string lower_head = head;
        for (char& ch : lower_head)
          ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        std::size_t at = lower_head.find("\r\nx-corral-sandbox:");
        if (at != std::string::npos) {
          std::size_t start = at + 20;
          sandbox = head.substr(start, head.find("\r\n", start) - start);
          sandbox.erase(0, sandbox.find_first_not_of(" \t"));
        }
      }
      const std::string seen = line + " auth=" + (auth ? "yes" : "no") + " token=" +
                               (head.find("cgw1.") != std::string::npos ? "yes" : "no") +
                               " sandbox=" + sandbox;
      {
        std::lock_guard lock(mu_);
        internal_.push_back(seen);
      }
      std::string body = "internal " + line + " auth=" + (auth ? "yes" : "no") + "\n";
      std::string r = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\nConnection: close\r\n\r\n" + body;
      (void)!::write(c.get(), r.data(), r.size());
      continue;
    }
    if (kind == kHttp) {
      std::string head;
      char buf[4096];
      ssize_t n;
      while (head.find("\r\n\r\n") == std::string::npos &&
             (n = ::read(c.get(), buf, sizeof buf)) > 0)
        head.append(buf, static_cast<size_t>(n));
      const std::string host = header_value(head, "host");
      {
        std::lock_guard lock(mu_);
        ++http_[host];
        if (!head.empty()) http_heads_.push_back(head);
      }
      if (wants_reflection(head)) {
        const std::size_t end = head.find("\r\n\r\n") + 4;
        std::string body = head.substr(end);
        head.resize(end);
        const std::size_t want = std::strtoul(raw_field(head, "content-length").c_str(), nullptr, 10);
        while (body.size() < want && (n = ::read(c.get(), buf, sizeof buf)) > 0)
          body.append(buf, static_cast<size_t>(n));
        for (const std::string& w : reflection_writes(head, body))
          if (::write(c.get(), w.data(), w.size()) != static_cast<ssize_t>(w.size())) break;
        continue;
      }
      std::string r = response(host);
      (void)!::write(c.get(), r.data(), r.size());
      continue;
    }
    SSL* ssl = SSL_new(static_cast<SSL_CTX*>(ssl_ctx_));
    SSL_set_fd(ssl, c.get());
    if (SSL_accept(ssl) == 1) {
      const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
      const std::string name = sni ? sni : "";
      {
        std::lock_guard lock(mu_);
        ++tls_[name];
      }
      char buf[4096];
      std::string head;
      int n;
      while (head.find("\r\n\r\n") == std::string::npos && (n = SSL_read(ssl, buf, sizeof buf)) > 0)
        head.append(buf, static_cast<size_t>(n));
      if (!head.empty()) {
        std::lock_guard lock(mu_);
        tls_heads_.push_back(head);
      }
      if (wants_reflection(head)) {
        const std::size_t end = head.find("\r\n\r\n") + 4;
        std::string body = head.substr(end);
        head.resize(end);
        const std::size_t want = std::strtoul(raw_field(head, "content-length").c_str(), nullptr, 10);
        while (body.size() < want && (n = SSL_read(ssl, buf, sizeof buf)) > 0)
          body.append(buf, static_cast<size_t>(n));
        for (const std::string& w : reflection_writes(head, body))
          if (SSL_write(ssl, w.data(), static_cast<int>(w.size())) <= 0) break;
      } else {
        std::string r = response(name);
        SSL_write(ssl, r.data(), static_cast<int>(r.size()));
      }
      SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    ERR_clear_error();
  }
}

NetWorld::~NetWorld() {
  if (stop_) {
    std::uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof one);
  }
  for (auto& t : threads_) t.join();
  dns_.reset();
  if (ssl_ctx_) SSL_CTX_free(static_cast<SSL_CTX*>(ssl_ctx_));
  // The host end goes with its peer when the namespace is deleted; delete
  // it too in case the namespace was never made.
  sh("ip netns del " + netns_);
  sh("ip link del " + host_if_);
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  listeners_.clear();  // last: releases the host-wide world lock
}

int NetWorld::http_requests(const std::string& host) const {
  std::lock_guard lock(mu_);
  auto it = http_.find(host);
  return it == http_.end() ? 0 : it->second;
}

int NetWorld::tls_handshakes(const std::string& sni) const {
  std::lock_guard lock(mu_);
  auto it = tls_.find(sni);
  return it == tls_.end() ? 0 : it->second;
}

std::vector<std::string> NetWorld::http_request_heads() const {
  std::lock_guard lock(mu_);
  return http_heads_;
}

std::vector<std::string> NetWorld::tls_request_heads() const {
  std::lock_guard lock(mu_);
  return tls_heads_;
}

std::vector<std::string> NetWorld::internal_requests() const {
  std::lock_guard lock(mu_);
  return internal_;
}

int NetWorld::tcp_connections(const std::string& address) const {
  std::lock_guard lock(mu_);
  auto it = tcp_.find(address);
  return it == tcp_.end() ? 0 : it->second;
}

}  // namespace corral::testing
