// A tiny authoritative DNS server for tests: answers a static map of
// name -> A/AAAA/CNAME/TXT records over UDP on a given address, follows its
// own CNAMEs, says NXDOMAIN for the rest, and counts what it was asked, so
// that a test can prove a denied name never reached upstream. Modes for
// failure tests: silent (never answers) and answering with a wrong id.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "egress/dns_message.h"

namespace corral::testing {

class TestDnsServer {
 public:
  // Binds UDP `address`:`port` (0: any free port) and starts answering.
  static Result<std::unique_ptr<TestDnsServer>> start(const std::string& address,
                                                      std::uint16_t port = 0);
  ~TestDnsServer();  // stops the thread, closes the socket

  void add_a(const std::string& name, const std::string& ip, std::uint32_t ttl = 300);
  void add_aaaa(const std::string& name, const std::string& ip, std::uint32_t ttl = 300);
  void add_cname(const std::string& name, const std::string& target, std::uint32_t ttl = 300);
  void add_txt(const std::string& name, const std::string& text, std::uint32_t ttl = 300);
  // Any record, put in the answer section of every response for `name`,
  // whatever was asked (to check that a resolver strips it).
  void add_extra(const std::string& name, const net::dns::Record& record);

  void set_silent(bool silent) { silent_ = silent; }    // receive, never answer
  void set_wrong_id(bool wrong) { wrong_id_ = wrong; }  // answer with id + 1
  void set_rcode(int rcode) { forced_rcode_ = rcode; }  // answer this RCODE (-1: normal)

  const std::string& address() const { return address_; }
  std::uint16_t port() const { return port_; }
  std::string endpoint() const { return address_ + ":" + std::to_string(port_); }

  int queries() const;                             // datagrams received
  int queries_for(const std::string& name) const;  // questions for `name` (lower-case)
  std::vector<std::string> names_seen() const;

 private:
  TestDnsServer() = default;
  void run();
  std::vector<std::uint8_t> answer(const net::dns::Query& q);

  std::string address_;
  std::uint16_t port_ = 0;
  UniqueFd fd_;
  UniqueFd stop_;  // eventfd
  std::thread thread_;
  std::atomic<bool> silent_{false}, wrong_id_{false};
  std::atomic<int> forced_rcode_{-1};

  mutable std::mutex mu_;
  std::multimap<std::string, net::dns::Record> records_;  // by owner name
  std::multimap<std::string, net::dns::Record> extras_;
  int queries_ = 0;
  std::vector<std::string> names_seen_;
};

}  // namespace corral::testing
