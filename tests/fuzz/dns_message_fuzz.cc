// Fuzz target for the DNS codec (src/egress/dns_message.h): the bytes a
// sandbox sends to corral's resolver, and the bytes an upstream server
// sends back. The first input byte picks what is fuzzed (its value modulo 2):
//   0 parse_query (+ build_error_reply, build_response, and re-parsing)
//   1 parse_response (+ follow_address_chain, and rebuilding the chain)
// Beyond "no crash", it checks the promises of dns_message.h: accepted
// names are lower-case letters, digits, '-', '_' and dots within the
// limits, reasons are printable, what we build parses back to what we put
// in, and an error reply is a bare 12-byte header answering a query.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fuzz_checks.h"
#include "egress/dns_message.h"

namespace {

namespace dns = corral::net::dns;
using corral::fuzz::printable;
using corral::fuzz::require;

void check_query_name(const std::string& name) {
  require(!name.empty() && name.size() <= dns::kMaxNameText);
  if (name == ".") return;
  require(name.front() != '.' && name.back() != '.');
  std::size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      require(label > 0 && label <= dns::kMaxLabel);
      label = 0;
      continue;
    }
    ++label;
    require((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
  }
  require(label > 0 && label <= dns::kMaxLabel);
}

void fuzz_query(std::span<const std::uint8_t> in) {
  auto q = dns::parse_query(in);
  auto reply = dns::build_error_reply(in, q ? dns::Rcode::kFormErr : q.error().rcode);
  if (reply) {
    require(in.size() >= dns::kHeaderSize && reply->size() == dns::kHeaderSize);
    require((*reply)[0] == in[0] && (*reply)[1] == in[1] && ((*reply)[2] & 0x80));
    require(!(in[2] & 0x80));
  } else {
    require(in.size() < dns::kHeaderSize || (in[2] & 0x80));
  }
  if (!q) {
    require(q.error().rcode == dns::Rcode::kFormErr || q.error().rcode == dns::Rcode::kNotImp);
    require(!q.error().reason.empty() && printable(q.error().reason));
    return;
  }
  check_query_name(q->question.name);
  require(q->question_wire.size() >= 5 && q->question_wire.size() <= in.size() - 12);

  // An answer to it parses back, with our records.
  std::vector<dns::Record> answers = {
      {q->question.name, dns::kTypeCname, dns::kClassIn, 5, "target.example", {}},
      {"target.example", dns::kTypeA, dns::kClassIn, 7, "192.0.2.1", {}},
      {"target.example", dns::kTypeAaaa, dns::kClassIn, 9, "2001:db8::1", {}},
  };
  auto bytes = dns::build_response(*q, dns::Rcode::kNoError, answers);
  require(bytes.has_value());
  std::size_t limit = q->edns_udp_size ? dns::kEdnsUdpSize : dns::kClassicUdpSize;
  require(bytes->size() <= limit);
  auto back = dns::parse_response(*bytes);
  require(back.has_value());
  require(back->id == q->id && back->rcode() == 0);
  require(dns::response_matches(*back, q->id, q->question));
  require(back->answers.size() <= answers.size());
  for (std::size_t i = 0; i < back->answers.size(); ++i) require(back->answers[i] == answers[i]);
  require(back->additional.size() == (q->edns_udp_size ? 1u : 0u));
}

void check_record(const dns::Record& r) {
  require(!r.name.empty() && printable(r.name));
  if (r.type == dns::kTypeA || r.type == dns::kTypeAaaa) {
    require(!r.data.empty() && r.rdata.empty());
  } else if (r.type == dns::kTypeCname) {
    require(!r.data.empty() && printable(r.data) && r.rdata.empty());
  } else {
    require(r.data.empty());
  }
  require(r.ttl < 0x80000000u);
}

void fuzz_response(std::span<const std::uint8_t> in) {
  auto r = dns::parse_response(in);
  if (!r) {
    require(r.error().code == corral::ErrorCode::kInvalidArgument && printable(r.error().message));
    return;
  }
  require(in.size() >= dns::kHeaderSize);
  std::size_t records = r->answers.size() + r->authority.size() + r->additional.size();
  require(records * 11 <= in.size());
  for (const auto* section : {&r->answers, &r->authority, &r->additional}) {
    for (const auto& rec : *section) check_record(rec);
  }
  if (!r->question) return;
  require(printable(r->question->name));

  // What a resolver would hand on rebuilds and parses back unchanged.
  auto chain = dns::follow_address_chain(r->answers, r->question->name, r->question->qtype);
  require(chain.records.size() <= r->answers.size());
  for (const auto& rec : chain.records) {
    require(rec.type == dns::kTypeCname || rec.type == r->question->qtype);
  }
  auto query_bytes = dns::build_query(r->id, r->question->name, r->question->qtype, 0);
  require(query_bytes.has_value());
  dns::Query q;
  q.id = r->id;
  q.flags = dns::kFlagRd;
  q.question = *r->question;
  q.question_wire.assign(query_bytes->begin() + 12, query_bytes->end());
  q.question_wire[q.question_wire.size() - 3] = static_cast<std::uint8_t>(r->question->qtype);
  q.question_wire[q.question_wire.size() - 4] = static_cast<std::uint8_t>(r->question->qtype >> 8);
  q.question_wire[q.question_wire.size() - 1] = static_cast<std::uint8_t>(r->question->qclass);
  q.question_wire[q.question_wire.size() - 2] = static_cast<std::uint8_t>(r->question->qclass >> 8);
  dns::ResponseOptions options;
  options.max_size = 65535;
  auto rebuilt = dns::build_response(q, dns::Rcode::kNoError, chain.records, options);
  require(rebuilt.has_value());
  auto again = dns::parse_response(*rebuilt);
  require(again.has_value());
  require(dns::response_matches(*again, r->id, *r->question));
  require(again->answers == chain.records);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::span<const std::uint8_t> in(data + 1, size - 1);
  switch (data[0] % 2) {
    case 0:
      fuzz_query(in);
      break;
    case 1:
      fuzz_response(in);
      break;
  }
  return 0;
}
