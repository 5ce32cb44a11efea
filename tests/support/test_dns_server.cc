#include "support/test_dns_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace corral::testing {

namespace dns = corral::net::dns;

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The SOA of the test zone, for negative answers: MINIMUM 60 (RFC 2308).
dns::Record soa_record() {
  dns::Record soa;
  soa.name = "test";
  soa.type = dns::kTypeSoa;
  soa.ttl = 60;
  // MNAME "ns.test", RNAME "hostmaster.test", serial 1, refresh, retry,
  // expire, minimum 60.
  const std::uint8_t rdata[] = {2,   'n', 's', 4,   't', 'e', 's', 't', 0,  10,  'h', 'o',
                                's', 't', 'm', 'a', 's', 't', 'e', 'r', 4,  't', 'e', 's',
                                't', 0,   0,   0,   0,   1,   0,   0,   14, 16,  0,   0,
                                3,   132, 0,   9,   58,  128, 0,   0,   0,  60};
  soa.rdata.assign(std::begin(rdata), std::end(rdata));
  return soa;
}

}  // namespace

Result<std::unique_ptr<TestDnsServer>> TestDnsServer::start(const std::string& address,
                                                            std::uint16_t port) {
  std::unique_ptr<TestDnsServer> s(new TestDnsServer());
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    return make_error(ErrorCode::kInvalidArgument, "test DNS server: bad address " + address);
  }
  s->fd_.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s->fd_) return errno_error("socket");
  if (::bind(s->fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    return errno_error("bind(" + address + ":" + std::to_string(port) + ")");
  }
  socklen_t len = sizeof sa;
  ::getsockname(s->fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  s->address_ = address;
  s->port_ = ntohs(sa.sin_port);
  s->stop_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!s->stop_) return errno_error("eventfd");
  TestDnsServer* raw = s.get();
  s->thread_ = std::thread([raw] { raw->run(); });
  return s;
}

TestDnsServer::~TestDnsServer() {
  std::uint64_t one = 1;
  (void)::write(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

void TestDnsServer::add_a(const std::string& name, const std::string& ip, std::uint32_t ttl) {
  std::lock_guard lock(mu_);
  records_.emplace(lower(name), dns::Record{lower(name), dns::kTypeA, dns::kClassIn, ttl, ip, {}});
}

void TestDnsServer::add_aaaa(const std::string& name, const std::string& ip, std::uint32_t ttl) {
  std::lock_guard lock(mu_);
  records_.emplace(lower(name),
                   dns::Record{lower(name), dns::kTypeAaaa, dns::kClassIn, ttl, ip, {}});
}

void TestDnsServer::add_cname(const std::string& name, const std::string& target,
                              std::uint32_t ttl) {
  std::lock_guard lock(mu_);
  records_.emplace(
      lower(name),
      dns::Record{lower(name), dns::kTypeCname, dns::kClassIn, ttl, lower(target), {}});
}

void TestDnsServer::add_txt(const std::string& name, const std::string& text, std::uint32_t ttl) {
  dns::Record r{lower(name), dns::kTypeTxt, dns::kClassIn, ttl, {}, {}};
  r.rdata.push_back(static_cast<std::uint8_t>(std::min<std::size_t>(text.size(), 255)));
  r.rdata.insert(r.rdata.end(), text.begin(), text.begin() + r.rdata[0]);
  std::lock_guard lock(mu_);
  records_.emplace(lower(name), std::move(r));
}

void TestDnsServer::add_extra(const std::string& name, const dns::Record& record) {
  std::lock_guard lock(mu_);
  extras_.emplace(lower(name), record);
}

int TestDnsServer::queries() const {
  std::lock_guard lock(mu_);
  return queries_;
}

int TestDnsServer::queries_for(const std::string& name) const {
  std::lock_guard lock(mu_);
  return static_cast<int>(std::count(names_seen_.begin(), names_seen_.end(), lower(name)));
}

std::vector<std::string> TestDnsServer::names_seen() const {
  std::lock_guard lock(mu_);
  return names_seen_;
}

std::vector<std::uint8_t> TestDnsServer::answer(const dns::Query& q) {
  std::lock_guard lock(mu_);
  std::vector<dns::Record> answers;
  std::string name = q.question.name;
  bool exists = records_.count(name) > 0;
  for (int link = 0; link < 8; ++link) {
    auto [begin, end] = records_.equal_range(name);
    std::string next;
    for (auto it = begin; it != end; ++it) {
      if (it->second.type == q.question.qtype) answers.push_back(it->second);
      if (it->second.type == dns::kTypeCname && q.question.qtype != dns::kTypeCname) {
        answers.push_back(it->second);
        next = it->second.data;
      }
    }
    if (next.empty()) break;
    name = next;
  }
  auto [xb, xe] = extras_.equal_range(q.question.name);
  for (auto it = xb; it != xe; ++it) answers.push_back(it->second);
  dns::ResponseOptions options;
  options.authoritative = true;
  options.recursion_available = false;
  auto rcode = exists ? dns::Rcode::kNoError : dns::Rcode::kNxDomain;
  if (forced_rcode_ >= 0) rcode = static_cast<dns::Rcode>(forced_rcode_.load());
  if (answers.empty()) options.authority.push_back(soa_record());
  auto bytes = dns::build_response(q, rcode, answers, options);
  return bytes ? std::move(*bytes) : std::vector<std::uint8_t>{};
}

void TestDnsServer::run() {
  while (true) {
    pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (!fds[0].revents) continue;
    std::uint8_t buf[4096];
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    ssize_t n = ::recvfrom(fd_.get(), buf, sizeof buf, MSG_DONTWAIT,
                           reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) continue;
    auto q = dns::parse_query({buf, static_cast<std::size_t>(n)});
    {
      std::lock_guard lock(mu_);
      ++queries_;
      if (q) names_seen_.push_back(q->question.name);
    }
    if (silent_) continue;
    std::vector<std::uint8_t> reply;
    if (q) {
      reply = answer(*q);
    } else if (auto err =
                   dns::build_error_reply({buf, static_cast<std::size_t>(n)}, q.error().rcode)) {
      reply = std::move(*err);
    }
    if (reply.size() >= 2 && wrong_id_) reply[1] = static_cast<std::uint8_t>(reply[1] + 1);
    if (!reply.empty()) {
      (void)::sendto(fd_.get(), reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from),
                     from_len);
    }
  }
}

}  // namespace corral::testing
