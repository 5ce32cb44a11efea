#include "egress/dns_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <utility>

#include "base/unique_fd.h"
#include "egress/dns_cache.h"
#include "egress/dns_message.h"
#include "egress/dns_records.h"

namespace corral::net {

namespace {

using Clock = std::chrono::steady_clock;
namespace dns = corral::net::dns;

constexpr std::size_t kPacketBuffer = 4096;
constexpr int kMaxReadsPerWakeup = 64;  // fairness between sandboxes
constexpr std::uint32_t kMaxNegativeTtl = 300;

// epoll tags: the kind in the top byte, the sandbox key or fd below.
constexpr std::uint64_t kTagWake = 1ull << 56;
constexpr std::uint64_t kTagSandbox = 2ull << 56;
constexpr std::uint64_t kTagUpstream = 3ull << 56;
constexpr std::uint64_t kTagMask = 0xffull << 56;

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family() const { return storage.ss_family; }
};

std::optional<SockAddr> make_addr(const std::string& host, std::uint16_t port) {
  SockAddr a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.len = sizeof(sockaddr_in);
    return a;
  }
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.len = sizeof(sockaddr_in6);
    return a;
  }
  return std::nullopt;
}

// "IP", "IP:PORT", "[IPv6]:PORT", "IPv6".
Result<SockAddr> parse_upstream(const std::string& spec) {
  std::string host = spec;
  std::uint16_t port = 53;
  auto bad = [&] {
    return make_error(ErrorCode::kInvalidArgument, "invalid DNS server \"" + spec + "\"",
                      "write IP, IP:PORT or [IPv6]:PORT");
  };
  auto parse_port = [&](std::string_view text) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v == 0 || v > 65535) {
      return false;
    }
    port = static_cast<std::uint16_t>(v);
    return true;
  };
  if (!spec.empty() && spec.front() == '[') {
    auto close = spec.find(']');
    if (close == std::string::npos) return bad();
    host = spec.substr(1, close - 1);
    std::string_view rest = std::string_view(spec).substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !parse_port(rest.substr(1)))) return bad();
  } else if (std::count(spec.begin(), spec.end(), ':') == 1) {
    auto colon = spec.find(':');
    host = spec.substr(0, colon);
    if (!parse_port(std::string_view(spec).substr(colon + 1))) return bad();
  }
  auto addr = make_addr(host, port);
  if (!addr) return bad();
  return *addr;
}

std::string address_of(const SockAddr& a) {
  char out[INET6_ADDRSTRLEN] = "";
  if (a.family() == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, out,
                sizeof out);
  } else if (a.family() == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr, out,
                sizeof out);
  }
  return canonical_address(out);
}

std::chrono::microseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
}

// RFC 2308 5: a negative answer lives min(SOA TTL, SOA MINIMUM); MINIMUM
// is the last 4 bytes of the SOA's RDATA. 0 when there is no SOA.
std::uint32_t negative_ttl(const dns::Response& resp) {
  for (const auto& r : resp.authority) {
    if (r.type != dns::kTypeSoa || r.rdata.size() < 4) continue;
    const auto* m = r.rdata.data() + r.rdata.size() - 4;
    std::uint32_t minimum = (std::uint32_t{m[0]} << 24) | (std::uint32_t{m[1]} << 16) |
                            (std::uint32_t{m[2]} << 8) | std::uint32_t{m[3]};
    return std::min({r.ttl, minimum, kMaxNegativeTtl});
  }
  return 0;
}

}  // namespace

std::string_view dns_outcome_name(DnsOutcome outcome) {
  switch (outcome) {
    case DnsOutcome::kAnswered:
      return "answered";
    case DnsOutcome::kUpstreamNxDomain:
      return "upstream_nxdomain";
    case DnsOutcome::kDenied:
      return "denied";
    case DnsOutcome::kRefused:
      return "refused";
    case DnsOutcome::kTypeRefused:
      return "type_refused";
    case DnsOutcome::kServFail:
      return "servfail";
    case DnsOutcome::kFormErr:
      return "formerr";
    case DnsOutcome::kNotImp:
      return "notimp";
    case DnsOutcome::kIgnored:
      return "ignored";
    case DnsOutcome::kCount:
      break;
  }
  return "unknown";
}

struct DnsServer::Impl {
  struct Sandbox {
    std::string id;
    std::uint64_t key = 0;
    UniqueFd fd;
    std::shared_ptr<const DnsPolicy> policy;
    std::string client;  // canonical; empty: any source
    DnsRecords records;  // what it was answered, for the proxy
    DnsCache cache;
    std::size_t pending = 0;
    std::shared_ptr<const std::vector<SockAddr>> upstreams;  // null: the server's
  };

  // A query waiting for upstream. Owned by the loop thread only.
  struct Pending {
    std::uint64_t key = 0;
    std::string sandbox_id;
    SockAddr client;
    dns::Query query;
    std::string reason;
    Clock::time_point t0;
    int attempt = 0;
    std::uint16_t id = 0;
    std::shared_ptr<const std::vector<SockAddr>> servers;  // never empty
    UniqueFd fd;
    Clock::time_point deadline;
    std::string error;
    int upstream_rcode = -1;
  };

  DnsServerConfig config;
  DnsLogSink log;
  std::vector<SockAddr> upstreams;
  std::shared_ptr<const std::vector<SockAddr>> default_upstreams;  // the same, shared
  UniqueFd epoll;
  UniqueFd wake;
  std::thread thread;
  std::atomic<bool> stop{false};

  mutable std::mutex mu;  // guards the sandboxes and their state
  std::unordered_map<std::string, std::unique_ptr<Sandbox>> by_id;
  std::unordered_map<std::uint64_t, Sandbox*> by_key;
  std::uint64_t next_key = 1;

  std::unordered_map<int, std::unique_ptr<Pending>> pending;  // by upstream fd

  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(DnsOutcome::kCount)> outcomes{};
  std::atomic<std::uint64_t> queries{0}, upstream_queries{0}, upstream_timeouts{0},
      upstream_failures{0}, upstream_mismatched{0}, cache_hits{0};

  Sandbox* find(std::uint64_t key) {
    auto it = by_key.find(key);
    return it == by_key.end() ? nullptr : it->second;
  }

  // ---- replies ----

  void count(DnsOutcome o) { outcomes[static_cast<std::size_t>(o)].fetch_add(1); }

  void send_locked(Sandbox& sb, const SockAddr& client, std::span<const std::uint8_t> bytes) {
    // A full socket buffer drops the reply; the client retries.
    (void)::sendto(sb.fd.get(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                   reinterpret_cast<const sockaddr*>(&client.storage), client.len);
  }

  void send(std::uint64_t key, const SockAddr& client, std::span<const std::uint8_t> bytes) {
    std::lock_guard lock(mu);
    if (Sandbox* sb = find(key)) send_locked(*sb, client, bytes);
  }

  void finish(DnsLogEntry& entry, Clock::time_point t0) {
    count(entry.outcome);
    entry.latency = since(t0);
    if (log) log(entry);
  }

  // A reply with `rcode` and no answer (policy or type decisions, errors).
  void reply_rcode(std::uint64_t key, const SockAddr& client, const dns::Query& q, dns::Rcode rcode,
                   DnsLogEntry& entry, Clock::time_point t0) {
    auto bytes = dns::build_response(q, rcode, {});
    if (bytes) send(key, client, *bytes);
    finish(entry, t0);
  }

  // ---- queries from sandboxes ----

  void on_sandbox_readable(std::uint64_t key) {
    for (int i = 0; i < kMaxReadsPerWakeup; ++i) {
      std::uint8_t buf[kPacketBuffer];
      SockAddr client;
      client.len = sizeof client.storage;
      std::shared_ptr<const DnsPolicy> policy;
      std::string id;
      std::string spoofed;
      ssize_t n;
      {
        std::lock_guard lock(mu);
        Sandbox* sb = find(key);
        if (sb == nullptr) return;
        n = ::recvfrom(sb->fd.get(), buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC,
                       reinterpret_cast<sockaddr*>(&client.storage), &client.len);
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          continue;  // e.g. ECONNREFUSED left by an earlier reply's ICMP error
        }
        policy = sb->policy;
        id = sb->id;
        if (!sb->client.empty() && address_of(client) != sb->client) {
          spoofed = address_of(client);
        }
      }
      if (!spoofed.empty()) {
        queries.fetch_add(1);
        DnsLogEntry entry;
        entry.sandbox_id = id;
        entry.outcome = DnsOutcome::kIgnored;
        entry.reason = "datagram from " + spoofed + ", not from the sandbox's address";
        finish(entry, Clock::now());
        continue;
      }
      auto len = std::min(static_cast<std::size_t>(n), sizeof buf);
      handle_query(key, id, policy, client, {buf, len}, static_cast<std::size_t>(n) > sizeof buf);
    }
  }

  void handle_query(std::uint64_t key, const std::string& sandbox_id,
                    const std::shared_ptr<const DnsPolicy>& policy, const SockAddr& client,
                    std::span<const std::uint8_t> packet, bool oversized) {
    auto t0 = Clock::now();
    queries.fetch_add(1);
    DnsLogEntry entry;
    entry.sandbox_id = sandbox_id;

    tl::expected<dns::Query, dns::QueryError> parsed =
        oversized ? tl::expected<dns::Query, dns::QueryError>(tl::unexpected(
                        dns::QueryError{dns::Rcode::kFormErr, "query larger than 4096 bytes"}))
                  : dns::parse_query(packet);
    if (!parsed) {
      auto reply = dns::build_error_reply(packet, parsed.error().rcode);
      entry.reason = parsed.error().reason;
      if (!reply) {
        entry.outcome = DnsOutcome::kIgnored;
      } else {
        entry.outcome = parsed.error().rcode == dns::Rcode::kNotImp ? DnsOutcome::kNotImp
                                                                    : DnsOutcome::kFormErr;
        send(key, client, *reply);
      }
      return finish(entry, t0);
    }
    dns::Query& q = *parsed;
    entry.name = q.question.name;
    entry.qtype = q.question.qtype;

    if (q.question.qclass != dns::kClassIn) {
      entry.outcome = DnsOutcome::kTypeRefused;
      entry.reason = "query class " + std::to_string(q.question.qclass) + " is not served";
      return reply_rcode(key, client, q, dns::Rcode::kRefused, entry, t0);
    }
    if (q.question.qtype != dns::kTypeA && q.question.qtype != dns::kTypeAaaa) {
      entry.outcome = DnsOutcome::kTypeRefused;
      entry.reason = "query type " + dns::type_name(q.question.qtype) + " is not served";
      return reply_rcode(key, client, q, dns::Rcode::kRefused, entry, t0);
    }

    DnsVerdict verdict;
    if (policy && *policy) {
      verdict = (*policy)(DnsQuestionContext{sandbox_id, q.question.name, q.question.qtype});
    } else {
      verdict = DnsVerdict{DnsAction::kRefused, "no policy", std::nullopt};
    }
    entry.reason = verdict.reason;
    switch (verdict.action) {
      case DnsAction::kNxDomain:
        entry.outcome = DnsOutcome::kDenied;
        return reply_rcode(key, client, q, dns::Rcode::kNxDomain, entry, t0);
      case DnsAction::kRefused:
        entry.outcome = DnsOutcome::kRefused;
        return reply_rcode(key, client, q, dns::Rcode::kRefused, entry, t0);
      case DnsAction::kResolve:
        break;
    }

    if (verdict.fixed_ipv4) return answer_fixed(key, client, q, *verdict.fixed_ipv4, entry, t0);

    // The cache, then the per-sandbox limit, under one lock.
    std::shared_ptr<const std::vector<SockAddr>> servers;
    {
      std::lock_guard lock(mu);
      Sandbox* sb = find(key);
      if (sb == nullptr) return;  // removed meanwhile: nobody to answer
      servers = servers_of(*sb);
      if (auto hit = sb->cache.get(q.question)) {
        cache_hits.fetch_add(1);
        entry.cached = true;
        entry.upstream_rcode = hit->upstream_rcode;
        auto bytes = dns::build_response(q, hit->rcode, hit->records);
        if (bytes) {
          entry.outcome = hit->rcode == dns::Rcode::kNxDomain ? DnsOutcome::kUpstreamNxDomain
                                                              : DnsOutcome::kAnswered;
          for (const auto& r : hit->records) {
            if (r.type == q.question.qtype) entry.addresses.push_back(r.data);
          }
          sb->records.remember(q.question.name, entry.addresses, hit->ttl);
        } else {
          entry.outcome = DnsOutcome::kServFail;
          entry.upstream_error = bytes.error().message;
          bytes = dns::build_response(q, dns::Rcode::kServFail, {});
        }
        if (bytes) send_locked(*sb, client, *bytes);
      } else if (servers->empty() || sb->pending >= config.max_pending_per_sandbox ||
                 pending.size() >= config.max_pending) {
        entry.outcome = DnsOutcome::kServFail;
        entry.upstream_error = servers->empty() ? "no DNS server configured"
                                                : "too many queries waiting for upstream";
        auto bytes = dns::build_response(q, dns::Rcode::kServFail, {});
        if (bytes) send_locked(*sb, client, *bytes);
      } else {
        ++sb->pending;
      }
    }
    if (entry.cached || entry.outcome == DnsOutcome::kServFail) return finish(entry, t0);

    auto p = std::make_unique<Pending>();
    p->key = key;
    p->sandbox_id = sandbox_id;
    p->client = client;
    p->query = std::move(q);
    p->servers = std::move(servers);
    p->reason = std::move(verdict.reason);
    p->t0 = t0;
    start_attempt(std::move(p));
  }

  void answer_fixed(std::uint64_t key, const SockAddr& client, const dns::Query& q,
                    const std::string& ipv4, DnsLogEntry& entry, Clock::time_point t0) {
    in_addr check{};
    if (::inet_pton(AF_INET, ipv4.c_str(), &check) != 1) {
      entry.outcome = DnsOutcome::kServFail;
      entry.upstream_error = "the policy's fixed answer \"" + ipv4 + "\" is not an IPv4 address";
      return reply_rcode(key, client, q, dns::Rcode::kServFail, entry, t0);
    }
    std::vector<dns::Record> records;
    if (q.question.qtype == dns::kTypeA) {
      records.push_back(dns::Record{
          q.question.name, dns::kTypeA, dns::kClassIn, config.fixed_answer_ttl, ipv4, {}});
      entry.addresses = {ipv4};
    }
    auto bytes = dns::build_response(q, dns::Rcode::kNoError, records);
    entry.outcome = bytes ? DnsOutcome::kAnswered : DnsOutcome::kServFail;
    {
      std::lock_guard lock(mu);
      if (Sandbox* sb = find(key)) {
        sb->records.remember(q.question.name, entry.addresses, config.fixed_answer_ttl);
        if (bytes) send_locked(*sb, client, *bytes);
      }
    }
    finish(entry, t0);
  }

  // ---- upstream ----

  // The sandbox's own servers, else the server's.
  std::shared_ptr<const std::vector<SockAddr>> servers_of(const Sandbox& sb) const {
    return sb.upstreams ? sb.upstreams : default_upstreams;
  }

  void release_slot(std::uint64_t key) {
    std::lock_guard lock(mu);
    if (Sandbox* sb = find(key); sb != nullptr && sb->pending > 0) --sb->pending;
  }

  // Sends the query to the server of this attempt; on a local failure moves
  // on to the next attempt, and after the last one answers SERVFAIL.
  void start_attempt(std::unique_ptr<Pending> p) {
    while (p->attempt < config.upstream_attempts) {
      const std::vector<SockAddr>& list = *p->servers;
      const SockAddr& server = list[static_cast<std::size_t>(p->attempt) % list.size()];
      p->id = dns::random_query_id();
      auto bytes = dns::build_query(p->id, p->query.question.name, p->query.question.qtype);
      if (!bytes) {  // cannot happen for a name parse_query accepted
        p->error = bytes.error().message;
        break;
      }
      // One connected socket per attempt: a random source port on top of the
      // random id, and the kernel accepts datagrams from that server only.
      UniqueFd fd(::socket(server.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd ||
          ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&server.storage), server.len) !=
              0 ||
          ::send(fd.get(), bytes->data(), bytes->size(), MSG_NOSIGNAL) < 0) {
        p->error = std::string("sending to upstream: ") + std::string(errno_name(errno));
        upstream_failures.fetch_add(1);
        ++p->attempt;
        continue;
      }
      upstream_queries.fetch_add(1);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kTagUpstream | static_cast<std::uint64_t>(fd.get());
      if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) {
        p->error = std::string("epoll_ctl: ") + std::string(errno_name(errno));
        break;
      }
      p->deadline = Clock::now() + config.upstream_timeout;
      int raw = fd.get();
      p->fd = std::move(fd);
      pending[raw] = std::move(p);
      return;
    }
    fail_pending(std::move(p));
  }

  void fail_pending(std::unique_ptr<Pending> p) {
    release_slot(p->key);
    DnsLogEntry entry;
    entry.sandbox_id = p->sandbox_id;
    entry.name = p->query.question.name;
    entry.qtype = p->query.question.qtype;
    entry.outcome = DnsOutcome::kServFail;
    entry.reason = p->reason;
    entry.upstream_error = p->error.empty() ? "no answer" : p->error;
    entry.upstream_rcode = p->upstream_rcode;
    reply_rcode(p->key, p->client, p->query, dns::Rcode::kServFail, entry, p->t0);
  }

  std::unique_ptr<Pending> take_pending(int fd) {
    auto it = pending.find(fd);
    if (it == pending.end()) return nullptr;
    auto p = std::move(it->second);
    pending.erase(it);
    ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, fd, nullptr);
    p->fd.reset();
    return p;
  }

  void retry(int fd, std::string error) {
    auto p = take_pending(fd);
    if (!p) return;
    p->error = std::move(error);
    ++p->attempt;
    start_attempt(std::move(p));
  }

  void on_upstream_readable(int fd) {
    auto it = pending.find(fd);
    if (it == pending.end()) return;
    Pending& p = *it->second;
    for (int i = 0; i < kMaxReadsPerWakeup; ++i) {
      std::uint8_t buf[kPacketBuffer];
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        upstream_failures.fetch_add(1);
        return retry(fd, std::string("upstream: ") + std::string(errno_name(errno)));
      }
      auto resp = dns::parse_response({buf, static_cast<std::size_t>(n)});
      if (!resp || !dns::response_matches(*resp, p.id, p.query.question)) {
        upstream_mismatched.fetch_add(1);
        continue;
      }
      p.upstream_rcode = static_cast<int>(resp->rcode());
      auto rcode = resp->rcode();
      if (rcode == static_cast<unsigned>(dns::Rcode::kNoError) ||
          rcode == static_cast<unsigned>(dns::Rcode::kNxDomain)) {
        auto done = take_pending(fd);
        return complete(std::move(done), *resp);
      }
      upstream_failures.fetch_add(1);
      return retry(fd, "upstream answered " + dns::rcode_name(rcode));
    }
  }

  void complete(std::unique_ptr<Pending> p, const dns::Response& resp) {
    const auto& q = p->query;
    DnsLogEntry entry;
    entry.sandbox_id = p->sandbox_id;
    entry.name = q.question.name;
    entry.qtype = q.question.qtype;
    entry.reason = p->reason;
    entry.upstream_rcode = p->upstream_rcode;

    DnsCache::Entry cached;
    cached.stored = Clock::now();
    cached.upstream_rcode = p->upstream_rcode;
    dns::AddressAnswer chain;
    if (resp.rcode() == static_cast<unsigned>(dns::Rcode::kNxDomain)) {
      cached.rcode = dns::Rcode::kNxDomain;
      cached.ttl = negative_ttl(resp);
      entry.outcome = DnsOutcome::kUpstreamNxDomain;
    } else {
      chain = dns::follow_address_chain(resp.answers, q.question.name, q.question.qtype);
      if (resp.truncated() && chain.addresses.empty()) {
        // TCP to upstream is not implemented: a truncated answer without a
        // usable address counts as a failed attempt.
        upstream_failures.fetch_add(1);
        p->error = "upstream answer truncated";
        ++p->attempt;
        return start_attempt(std::move(p));
      }
      cached.records = chain.records;
      cached.ttl =
          chain.addresses.empty()
              ? negative_ttl(resp)
              : std::min<std::uint32_t>(chain.min_ttl,
                                        static_cast<std::uint32_t>(config.record_max_ttl.count()));
      entry.outcome = DnsOutcome::kAnswered;
      entry.addresses = chain.addresses;
    }
    auto bytes = dns::build_response(q, cached.rcode, cached.records);
    if (!bytes) {
      entry.outcome = DnsOutcome::kServFail;
      entry.upstream_error = bytes.error().message;
      entry.addresses.clear();
    }
    {
      std::lock_guard lock(mu);
      if (Sandbox* sb = find(p->key)) {
        if (sb->pending > 0) --sb->pending;
        if (bytes) {
          sb->records.remember(q.question.name, chain.addresses, chain.min_ttl);
          sb->cache.put(q.question, std::move(cached));
          send_locked(*sb, p->client, *bytes);
        } else if (auto fail = dns::build_response(q, dns::Rcode::kServFail, {})) {
          send_locked(*sb, p->client, *fail);
        }
      }
    }
    finish(entry, p->t0);
  }

  void expire_pending() {
    auto now = Clock::now();
    std::vector<int> late;
    for (const auto& [fd, p] : pending) {
      if (p->deadline <= now) late.push_back(fd);
    }
    for (int fd : late) {
      upstream_timeouts.fetch_add(1);
      retry(fd,
            "upstream timeout after " + std::to_string(config.upstream_timeout.count()) + " ms");
    }
  }

  int next_timeout_ms() const {
    if (pending.empty()) return -1;
    auto first = Clock::time_point::max();
    for (const auto& [fd, p] : pending) first = std::min(first, p->deadline);
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(first - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(ms, 0, 60000));
  }

  void run() {
    epoll_event events[64];
    while (!stop.load()) {
      int n = ::epoll_wait(epoll.get(), events, 64, next_timeout_ms());
      if (n < 0 && errno != EINTR) break;  // only EBADF/EINVAL: our bug
      for (int i = 0; i < n; ++i) {
        std::uint64_t tag = events[i].data.u64;
        switch (tag & kTagMask) {
          case kTagWake: {
            std::uint64_t v;
            (void)::read(wake.get(), &v, sizeof v);
            break;
          }
          case kTagSandbox:
            on_sandbox_readable(tag & ~kTagMask);
            break;
          case kTagUpstream:
            on_upstream_readable(static_cast<int>(tag & ~kTagMask));
            break;
        }
      }
      expire_pending();
    }
    pending.clear();
  }
};

DnsServer::DnsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DnsServer::~DnsServer() {
  impl_->stop.store(true);
  std::uint64_t one = 1;
  (void)::write(impl_->wake.get(), &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::unique_ptr<DnsServer>> DnsServer::start(DnsServerConfig config, DnsLogSink log) {
  auto impl = std::make_unique<Impl>();
  for (const auto& u : config.upstreams) {
    auto addr = parse_upstream(u);
    if (!addr) return tl::unexpected(addr.error());
    impl->upstreams.push_back(*addr);
  }
  impl->default_upstreams = std::make_shared<const std::vector<SockAddr>>(impl->upstreams);
  if (config.upstream_attempts < 1) config.upstream_attempts = 1;
  if (config.upstream_timeout.count() <= 0) {
    return make_error(ErrorCode::kInvalidArgument, "DNS upstream timeout must be positive");
  }
  if (config.record_min_ttl > config.record_max_ttl) {
    return make_error(ErrorCode::kInvalidArgument,
                      "DNS record_min_ttl is larger than record_max_ttl");
  }
  impl->config = std::move(config);
  impl->log = std::move(log);
  impl->epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!impl->epoll) return errno_error("epoll_create1");
  impl->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->wake) return errno_error("eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTagWake;
  if (::epoll_ctl(impl->epoll.get(), EPOLL_CTL_ADD, impl->wake.get(), &ev) != 0) {
    return errno_error("epoll_ctl(eventfd)");
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<DnsServer>(new DnsServer(std::move(impl)));
}

Result<std::uint16_t> DnsServer::add_sandbox(const std::string& sandbox_id,
                                             const std::string& bind_address, std::uint16_t port,
                                             DnsPolicy policy, const std::string& client_address) {
  auto addr = make_addr(bind_address, port);
  if (!addr) {
    return make_error(ErrorCode::kInvalidArgument,
                      "DNS listen address \"" + bind_address + "\" is not a numeric IP address");
  }
  std::string client = canonical_address(client_address);
  if (!client_address.empty() && client.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "sandbox address \"" + client_address + "\" is not a numeric IP address");
  }
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->by_id.contains(sandbox_id)) {
      return make_error(ErrorCode::kAlreadyExists,
                        "sandbox " + sandbox_id + " already has a DNS listener");
    }
  }
  std::string where = bind_address + ":" + std::to_string(port);
  UniqueFd fd(::socket(addr->family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return errno_error("socket(udp)");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr->storage), addr->len) != 0) {
    return errno_error("bind(udp " + where + ")");
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return errno_error("getsockname(" + where + ")");
  }
  std::uint16_t bound_port =
      ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);

  std::lock_guard lock(impl_->mu);
  if (impl_->by_id.contains(sandbox_id)) {
    return make_error(ErrorCode::kAlreadyExists,
                      "sandbox " + sandbox_id + " already has a DNS listener");
  }
  auto sb = std::make_unique<Impl::Sandbox>();
  sb->id = sandbox_id;
  sb->key = impl_->next_key++;
  sb->policy = std::make_shared<const DnsPolicy>(std::move(policy));
  sb->client = std::move(client);
  sb->records =
      DnsRecords(DnsRecordLimits{impl_->config.record_min_ttl, impl_->config.record_max_ttl,
                                 impl_->config.max_recorded_names});
  sb->cache = DnsCache(impl_->config.cache_entries);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTagSandbox | sb->key;
  if (::epoll_ctl(impl_->epoll.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) {
    return errno_error("epoll_ctl(dns " + where + ")");
  }
  sb->fd = std::move(fd);
  impl_->by_key[sb->key] = sb.get();
  impl_->by_id[sandbox_id] = std::move(sb);
  return bound_port;
}

bool DnsServer::remove_sandbox(const std::string& sandbox_id) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->by_id.find(sandbox_id);
  if (it == impl_->by_id.end()) return false;
  ::epoll_ctl(impl_->epoll.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
  impl_->by_key.erase(it->second->key);
  impl_->by_id.erase(it);  // closes the socket
  return true;
}

Status DnsServer::set_upstreams(const std::string& sandbox_id,
                                const std::vector<std::string>& servers) {
  std::shared_ptr<const std::vector<SockAddr>> list;
  if (!servers.empty()) {
    std::vector<SockAddr> addrs;
    for (const auto& u : servers) {
      auto addr = parse_upstream(u);
      if (!addr) return tl::unexpected(addr.error());
      addrs.push_back(*addr);
    }
    list = std::make_shared<const std::vector<SockAddr>>(std::move(addrs));
  }
  std::lock_guard lock(impl_->mu);
  auto it = impl_->by_id.find(sandbox_id);
  if (it == impl_->by_id.end()) {
    return make_error(ErrorCode::kNotFound, "sandbox " + sandbox_id + " has no DNS listener");
  }
  it->second->upstreams = std::move(list);
  it->second->cache.clear();  // answers of the old servers
  return ok();
}

Status DnsServer::set_policy(const std::string& sandbox_id, DnsPolicy policy) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->by_id.find(sandbox_id);
  if (it == impl_->by_id.end()) {
    return make_error(ErrorCode::kNotFound, "sandbox " + sandbox_id + " has no DNS listener");
  }
  it->second->policy = std::make_shared<const DnsPolicy>(std::move(policy));
  return ok();
}

bool DnsServer::answered(const std::string& sandbox_id, std::string_view name,
                         std::string_view address) const {
  std::lock_guard lock(impl_->mu);
  auto sb = impl_->by_id.find(sandbox_id);
  return sb != impl_->by_id.end() && sb->second->records.answered(name, address);
}

std::vector<std::string> DnsServer::names_for(const std::string& sandbox_id,
                                              std::string_view address) const {
  std::lock_guard lock(impl_->mu);
  auto sb = impl_->by_id.find(sandbox_id);
  if (sb == impl_->by_id.end()) return {};
  return sb->second->records.names_for(address);
}

DnsMetrics DnsServer::metrics() const {
  DnsMetrics m;
  for (std::size_t i = 0; i < m.outcomes.size(); ++i) m.outcomes[i] = impl_->outcomes[i].load();
  m.queries = impl_->queries.load();
  m.upstream_queries = impl_->upstream_queries.load();
  m.upstream_timeouts = impl_->upstream_timeouts.load();
  m.upstream_failures = impl_->upstream_failures.load();
  m.upstream_mismatched = impl_->upstream_mismatched.load();
  m.cache_hits = impl_->cache_hits.load();
  return m;
}

}  // namespace corral::net
