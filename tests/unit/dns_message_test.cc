// The DNS codec (src/egress/dns_message.h) on packets built byte by byte.
#include "egress/dns_message.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace corral::net::dns {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

// "Example.COM" A IN, as a stub resolver sends it (RD set).
const Bytes kHeader = {0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
const Bytes kQuestion =
    concat({{7}, text("Example"), {3}, text("COM"), {0, 0x00, 0x01, 0x00, 0x01}});
// dig's OPT record: root, type 41, payload 4096, no flags, no options.
const Bytes kOpt = {0x00, 0x00, 0x29, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

Bytes query_packet() { return concat({kHeader, kQuestion}); }

Bytes edns_query_packet() {
  Bytes p = concat({kHeader, kQuestion, kOpt});
  p[11] = 1;  // ARCOUNT
  return p;
}

TEST(DnsMessage, ParsesAStubQuery) {
  auto q = parse_query(query_packet());
  ASSERT_TRUE(q) << q.error().reason;
  EXPECT_EQ(q->id, 0x1234);
  EXPECT_TRUE(q->recursion_desired());
  EXPECT_EQ(q->question.name, "example.com");
  EXPECT_EQ(q->question.qtype, kTypeA);
  EXPECT_EQ(q->question.qclass, kClassIn);
  EXPECT_EQ(q->question_wire, kQuestion);
  EXPECT_FALSE(q->edns_udp_size);
}

TEST(DnsMessage, AnswerHasExactBytes) {
  auto q = parse_query(query_packet());
  ASSERT_TRUE(q);
  std::vector<Record> answers = {{"example.com", kTypeA, kClassIn, 300, "93.184.216.34", {}}};
  auto r = build_response(*q, Rcode::kNoError, answers);
  ASSERT_TRUE(r) << r.error().message;
  Bytes expected = concat(
      {{0x12, 0x34, 0x81, 0x80, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00},
       kQuestion,  // echoed as received, case included
       {0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x01, 0x2c, 0x00, 0x04, 93, 184, 216, 34}});
  EXPECT_EQ(*r, expected);
}

TEST(DnsMessage, NxDomainAndRefusedHaveExactBytes) {
  auto q = parse_query(query_packet());
  ASSERT_TRUE(q);
  auto nx = build_response(*q, Rcode::kNxDomain, {});
  ASSERT_TRUE(nx);
  EXPECT_EQ(*nx, concat({{0x12, 0x34, 0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 0}, kQuestion}));
  auto refused = build_response(*q, Rcode::kRefused, {});
  ASSERT_TRUE(refused);
  EXPECT_EQ(*refused, concat({{0x12, 0x34, 0x81, 0x85, 0, 1, 0, 0, 0, 0, 0, 0}, kQuestion}));
  auto servfail = build_response(*q, Rcode::kServFail, {});
  ASSERT_TRUE(servfail);
  EXPECT_EQ((*servfail)[3], 0x82);
}

TEST(DnsMessage, EdnsQueryGetsAnOptRecordBack) {
  auto q = parse_query(edns_query_packet());
  ASSERT_TRUE(q) << q.error().reason;
  ASSERT_TRUE(q->edns_udp_size);
  EXPECT_EQ(*q->edns_udp_size, 4096);
  auto r = build_response(*q, Rcode::kNoError, {});
  ASSERT_TRUE(r);
  Bytes expected = concat({{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 1},
                           kQuestion,
                           {0x00, 0x00, 0x29, 0x04, 0xd0, 0, 0, 0, 0, 0, 0}});
  EXPECT_EQ(*r, expected);
}

TEST(DnsMessage, CnameChainIsCompressed) {
  Bytes question =
      concat({{3}, text("www"), {7}, text("example"), {3}, text("com"), {0, 0, 1, 0, 1}});
  auto q = parse_query(concat({kHeader, question}));
  ASSERT_TRUE(q) << q.error().reason;
  std::vector<Record> answers = {
      {"www.example.com", kTypeCname, kClassIn, 60, "cdn.example.net", {}},
      {"cdn.example.net", kTypeA, kClassIn, 20, "1.2.3.4", {}},
  };
  auto r = build_response(*q, Rcode::kNoError, answers);
  ASSERT_TRUE(r);
  // The question is at 12 and 21 bytes long: the CNAME starts at 33, its
  // target at 45.
  Bytes expected = concat({{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0},
                           question,
                           {0xc0, 0x0c, 0, 5, 0, 1, 0, 0, 0, 60, 0, 17},
                           {3},
                           text("cdn"),
                           {7},
                           text("example"),
                           {3},
                           text("net"),
                           {0},
                           {0xc0, 45, 0, 1, 0, 1, 0, 0, 0, 20, 0, 4, 1, 2, 3, 4}});
  EXPECT_EQ(*r, expected);
  auto back = parse_response(*r);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->answers, answers);
  ASSERT_TRUE(back->question);
  EXPECT_EQ(back->question->name, "www.example.com");
}

TEST(DnsMessage, ErrorReplyKeepsIdOpcodeAndRd) {
  Bytes junk = {0xab, 0xcd, 0x01, 0x00, 0, 5, 0, 0, 0, 0, 0, 0, 0xff};
  auto r = build_error_reply(junk, Rcode::kFormErr);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (Bytes{0xab, 0xcd, 0x81, 0x81, 0, 0, 0, 0, 0, 0, 0, 0}));
  Bytes notify = {0, 1, 0x20, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};  // opcode 4
  auto r2 = build_error_reply(notify, Rcode::kNotImp);
  ASSERT_TRUE(r2);
  EXPECT_EQ(*r2, (Bytes{0, 1, 0xa0, 0x84, 0, 0, 0, 0, 0, 0, 0, 0}));
  // Too short, or a response: no reply at all.
  EXPECT_FALSE(build_error_reply(Bytes{1, 2, 3}, Rcode::kFormErr));
  Bytes response = {0, 1, 0x80, 0x00, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_FALSE(build_error_reply(response, Rcode::kFormErr));
}

TEST(DnsMessage, BuildsUpstreamQuery) {
  auto b = build_query(0x0102, "a.b", kTypeAaaa);
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, (Bytes{0x01, 0x02, 0x01, 0x00, 0, 1, 0, 0,    0,    0,    0, 1, 1, 'a', 1, 'b',
                       0,    0,    28,   0,    1, 0, 0, 0x29, 0x04, 0xd0, 0, 0, 0, 0,   0, 0}));
  auto plain = build_query(7, "a.b", kTypeA, 0);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->size(), 12u + 5 + 4);
  auto parsed = parse_query(*plain);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->question.name, "a.b");
  EXPECT_FALSE(build_query(1, "a..b", kTypeA));
  EXPECT_FALSE(build_query(1, std::string(64, 'a') + ".com", kTypeA));
}

TEST(DnsMessage, RandomIdsVary) {
  std::set<std::uint16_t> ids;
  for (int i = 0; i < 64; ++i) ids.insert(random_query_id());
  EXPECT_GT(ids.size(), 32u);
}

struct BadQuery {
  const char* what;
  Bytes packet;
  Rcode rcode;
};

TEST(DnsMessage, RefusesMalformedQueries) {
  auto with = [](Bytes header, Bytes rest) { return concat({header, rest}); };
  Bytes h = kHeader;
  Bytes two_questions = h;
  two_questions[5] = 2;
  Bytes with_answer = h;
  with_answer[7] = 1;
  Bytes response = h;
  response[2] |= 0x80;
  Bytes notify = h;
  notify[2] = 0x20;
  Bytes two_opts = concat({h, kQuestion, kOpt, kOpt});
  two_opts[11] = 2;
  Bytes opt_not_root = concat({h, kQuestion, {1, 'x'}, Bytes(kOpt.begin() + 1, kOpt.end())});
  opt_not_root[11] = 1;
  Bytes missing_additional = concat({h, kQuestion});
  missing_additional[11] = 1;
  std::vector<BadQuery> cases = {
      {"empty", {}, Rcode::kFormErr},
      {"short header", Bytes(h.begin(), h.begin() + 11), Rcode::kFormErr},
      {"no question", h, Rcode::kFormErr},
      {"two questions", with(two_questions, kQuestion), Rcode::kFormErr},
      {"answer record", with(with_answer, kQuestion), Rcode::kFormErr},
      {"a response", with(response, kQuestion), Rcode::kFormErr},
      {"NOTIFY", with(notify, kQuestion), Rcode::kNotImp},
      {"truncated name", with(h, {7, 'e', 'x'}), Rcode::kFormErr},
      {"no type", with(h, {1, 'a', 0, 0}), Rcode::kFormErr},
      {"trailing byte", with(h, concat({kQuestion, {0}})), Rcode::kFormErr},
      {"compressed", with(h, {1, 'a', 0xc0, 12, 0, 1, 0, 1}), Rcode::kFormErr},
      {"label type 01", with(h, {0x40, 'a', 0, 0, 1, 0, 1}), Rcode::kFormErr},
      {"dot in label", with(h, {3, 'a', '.', 'b', 0, 0, 1, 0, 1}), Rcode::kFormErr},
      {"NUL in label", with(h, {3, 'a', 0, 'b', 0, 0, 1, 0, 1}), Rcode::kFormErr},
      {"space in label", with(h, {3, 'a', ' ', 'b', 0, 0, 1, 0, 1}), Rcode::kFormErr},
      {"two OPT", two_opts, Rcode::kFormErr},
      {"OPT not at root", opt_not_root, Rcode::kFormErr},
      {"missing additional", missing_additional, Rcode::kFormErr},
  };
  for (const auto& c : cases) {
    auto q = parse_query(c.packet);
    ASSERT_FALSE(q) << c.what;
    EXPECT_EQ(q.error().rcode, c.rcode) << c.what;
    EXPECT_FALSE(q.error().reason.empty()) << c.what;
  }
}

Bytes name_wire(const std::vector<std::size_t>& label_sizes) {
  Bytes out;
  for (auto n : label_sizes) {
    out.push_back(static_cast<std::uint8_t>(n));
    out.insert(out.end(), n, 'a');
  }
  out.push_back(0);
  return out;
}

TEST(DnsMessage, NameLengthLimits) {
  // 63+63+63+61 characters and 3 dots: 253, the longest name.
  auto longest = concat({kHeader, name_wire({63, 63, 63, 61}), {0, 1, 0, 1}});
  auto q = parse_query(longest);
  ASSERT_TRUE(q) << q.error().reason;
  EXPECT_EQ(q->question.name.size(), 253u);
  auto too_long = concat({kHeader, name_wire({63, 63, 63, 62}), {0, 1, 0, 1}});
  EXPECT_FALSE(parse_query(too_long));
  auto root = parse_query(concat({kHeader, {0, 0, 1, 0, 1}}));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->question.name, ".");
}

// A response header with QR, RD, RA, one question and `an` answers.
Bytes response_header(std::uint8_t an) { return {0x12, 0x34, 0x81, 0x80, 0, 1, 0, an, 0, 0, 0, 0}; }

TEST(DnsMessage, ResponseParserRefusesPointerLoops) {
  // Question "a" A IN; the answer's name points at itself.
  Bytes q = {1, 'a', 0, 0, 1, 0, 1};
  Bytes self =
      concat({response_header(1), q, {0xc0, 19, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4}});
  EXPECT_FALSE(parse_response(self));
  // Two names pointing at each other: 19 -> 21 (forward) is refused.
  Bytes pair = concat(
      {response_header(1), q, {0xc0, 21, 0xc0, 19, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4}});
  EXPECT_FALSE(parse_response(pair));
  // A pointer past the end.
  Bytes far =
      concat({response_header(1), q, {0xc0, 200, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4}});
  EXPECT_FALSE(parse_response(far));
  // Valid: a pointer to the question.
  Bytes good =
      concat({response_header(1), q, {0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4}});
  auto r = parse_response(good);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->answers.size(), 1u);
  EXPECT_EQ(r->answers[0].name, "a");
  EXPECT_EQ(r->answers[0].data, "1.2.3.4");
}

TEST(DnsMessage, ResponseParserRefusesPointersIntoTheHeader) {
  // Question "a" A IN; the answer's owner (or a CNAME's target) points into
  // the 12-byte header, whose bytes would read as labels.
  Bytes q = {1, 'a', 0, 0, 1, 0, 1};
  for (std::uint8_t at = 0; at < kHeaderSize; ++at) {
    Bytes owner =
        concat({response_header(1), q, {0xc0, at, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4}});
    EXPECT_FALSE(parse_response(owner)) << "owner pointer to " << int{at};
    Bytes target =
        concat({response_header(1), q, {0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 1, 0, 2, 0xc0, at}});
    EXPECT_FALSE(parse_response(target)) << "CNAME target pointer to " << int{at};
  }
}

// Two records: a TXT owned by the root whose RDATA holds four runs of one
// 63-byte label, each run ending in a pointer to the previous run (the
// first in the root), then an A record owned by a pointer to run `owner`.
// Run k spells a name of (k + 1) labels: (k + 1) * 64 + 1 wire bytes.
Bytes chained_runs_packet(std::size_t owner) {
  Bytes p = {0x12, 0x34, 0x81, 0x80, 0, 0, 0, 2, 0, 0, 0, 0};
  p.insert(p.end(), {0, 0, 16, 0, 1, 0, 0, 0, 1, 0, 0});  // RDLENGTH patched below
  std::size_t rdata_at = p.size();
  std::vector<std::size_t> runs;
  for (int k = 0; k < 4; ++k) {
    runs.push_back(p.size());
    p.push_back(63);
    p.insert(p.end(), 63, 'x');
    if (k == 0) {
      p.push_back(0);
    } else {
      p.push_back(static_cast<std::uint8_t>(0xc0 | (runs[k - 1] >> 8)));
      p.push_back(static_cast<std::uint8_t>(runs[k - 1]));
    }
  }
  std::size_t rdlen = p.size() - rdata_at;
  p[rdata_at - 2] = static_cast<std::uint8_t>(rdlen >> 8);
  p[rdata_at - 1] = static_cast<std::uint8_t>(rdlen);
  p.push_back(static_cast<std::uint8_t>(0xc0 | (runs[owner] >> 8)));
  p.push_back(static_cast<std::uint8_t>(runs[owner]));
  p.insert(p.end(), {0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4});
  return p;
}

TEST(DnsMessage, ResponseParserRefusesNamesOver255BytesThroughPointers) {
  auto r = parse_response(chained_runs_packet(3));  // 257 bytes
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("255"), std::string::npos) << r.error().message;
  auto ok = parse_response(chained_runs_packet(2));  // 193 bytes
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(ok->answers.size(), 2u);
  EXPECT_EQ(ok->answers[1].name.size(), 3u * 64 - 1);
  EXPECT_EQ(ok->answers[1].data, "1.2.3.4");
}

TEST(DnsMessage, ResponseParserChecksRecordData) {
  Bytes q = {1, 'a', 0, 0, 1, 0, 1};
  Bytes short_a =
      concat({response_header(1), q, {0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 1, 0, 3, 1, 2, 3}});
  EXPECT_FALSE(parse_response(short_a));
  Bytes long_aaaa =
      concat({response_header(1), q, {0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4}});
  EXPECT_FALSE(parse_response(long_aaaa));
  // A CNAME whose RDATA is longer than its target name.
  Bytes cname_slack =
      concat({response_header(1), q, {0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 1, 0, 4, 1, 'b', 0, 0xff}});
  EXPECT_FALSE(parse_response(cname_slack));
  // RDLENGTH beyond the packet.
  Bytes overrun = concat({response_header(1), q, {0xc0, 12, 0, 16, 0, 1, 0, 0, 0, 1, 0, 200, 1}});
  EXPECT_FALSE(parse_response(overrun));
  // Not a response.
  Bytes query = concat({kHeader, kQuestion});
  EXPECT_FALSE(parse_response(query));
  // Every prefix of a good response fails cleanly.
  Bytes good = concat(
      {response_header(1), q, {0xc0, 12, 0, 5, 0, 1, 0x80, 0, 0, 1, 0, 4, 1, 'b', 0xc0, 12}});
  auto r = parse_response(good);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->answers[0].data, "b.a");
  EXPECT_EQ(r->answers[0].ttl, 0u);  // top bit set: 0 (RFC 2181)
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(parse_response(Bytes(good.begin(), good.begin() + static_cast<long>(n)))) << n;
  }
}

TEST(DnsMessage, ResponseNamesEscapeOddBytes) {
  // An upstream name "a.b" as ONE label must not read as two labels.
  Bytes q = {3, 'a', '.', 'B', 0, 0, 16, 0, 1};
  Bytes p = concat({response_header(1), q, {0xc0, 12, 0, 16, 0, 1, 0, 0, 0, 9, 0, 2, 1, 'x'}});
  auto r = parse_response(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->question->name, "a\\046b");
  EXPECT_EQ(r->answers[0].rdata, (Bytes{1, 'x'}));
  // And the escaped form encodes back to the same label.
  auto back = build_query(1, r->question->name, kTypeTxt, 0);
  ASSERT_TRUE(back);
  EXPECT_EQ(Bytes(back->begin() + 12, back->begin() + 17), (Bytes{3, 'a', '.', 'b', 0}));
}

TEST(DnsMessage, ResponseMatching) {
  auto q = parse_query(query_packet());
  ASSERT_TRUE(q);
  auto bytes = build_response(*q, Rcode::kNoError, {});
  ASSERT_TRUE(bytes);
  auto r = parse_response(*bytes);
  ASSERT_TRUE(r);
  EXPECT_TRUE(response_matches(*r, 0x1234, {"example.com", kTypeA, kClassIn}));
  EXPECT_FALSE(response_matches(*r, 0x1235, {"example.com", kTypeA, kClassIn}));
  EXPECT_FALSE(response_matches(*r, 0x1234, {"example.org", kTypeA, kClassIn}));
  EXPECT_FALSE(response_matches(*r, 0x1234, {"example.com", kTypeAaaa, kClassIn}));
}

TEST(DnsMessage, AddressChainKeepsOnlyWhatLeadsToTheAnswer) {
  std::vector<Record> answers = {
      {"www.x.com", kTypeCname, kClassIn, 300, "edge.cdn.net", {}},
      {"edge.cdn.net", kTypeA, kClassIn, 30, "1.1.1.1", {}},
      {"edge.cdn.net", kTypeA, kClassIn, 40, "1.1.1.2", {}},
      {"www.x.com", kTypeA, kClassIn, 30, "6.6.6.6", {}},      // not the chain's end
      {"other.net", kTypeA, kClassIn, 30, "7.7.7.7", {}},      // unrelated
      {"edge.cdn.net", kTypeTxt, kClassIn, 30, {}, {1, 'x'}},  // another type
      {"edge.cdn.net", kTypeAaaa, kClassIn, 30, "2001:db8::1", {}},
  };
  auto c = follow_address_chain(answers, "www.x.com", kTypeA);
  ASSERT_EQ(c.records.size(), 3u);
  EXPECT_EQ(c.records[0].type, kTypeCname);
  EXPECT_EQ(c.addresses, (std::vector<std::string>{"1.1.1.1", "1.1.1.2"}));
  EXPECT_EQ(c.min_ttl, 30u);

  std::vector<Record> loop = {
      {"a.x", kTypeCname, kClassIn, 300, "b.x", {}},
      {"b.x", kTypeCname, kClassIn, 300, "a.x", {}},
      {"a.x", kTypeA, kClassIn, 300, "1.2.3.4", {}},
  };
  auto l = follow_address_chain(loop, "a.x", kTypeA);
  EXPECT_EQ(l.records.size(), 1u);  // a.x -> b.x, then the loop stops it
  EXPECT_TRUE(l.addresses.empty());
}

TEST(DnsMessage, LargeAnswersAreCutToTheLimit) {
  auto q = parse_query(query_packet());
  ASSERT_TRUE(q);
  std::vector<Record> many;
  for (int i = 0; i < 60; ++i) {
    many.push_back({"example.com", kTypeA, kClassIn, 60, "10.0.0." + std::to_string(i), {}});
  }
  auto r = build_response(*q, Rcode::kNoError, many);
  ASSERT_TRUE(r);
  EXPECT_LE(r->size(), 512u);
  auto back = parse_response(*r);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->answers.size(), (512u - 12 - kQuestion.size()) / 16);
  EXPECT_FALSE(back->truncated());
  // With EDNS the client's 4096 is capped at 1232.
  auto eq = parse_query(edns_query_packet());
  ASSERT_TRUE(eq);
  auto big = build_response(*eq, Rcode::kNoError, many);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->size(), 12 + kQuestion.size() + 60 * 16 + 11);
  // Bad data is an error, not a silent skip.
  std::vector<Record> bad = {{"example.com", kTypeA, kClassIn, 60, "2001:db8::1", {}}};
  EXPECT_FALSE(build_response(*q, Rcode::kNoError, bad));
}

TEST(DnsMessage, Names) {
  EXPECT_EQ(type_name(kTypeAaaa), "AAAA");
  EXPECT_EQ(type_name(99), "TYPE99");
  EXPECT_EQ(rcode_name(3), "NXDOMAIN");
  EXPECT_EQ(rcode_name(11), "RCODE11");
}

}  // namespace
}  // namespace corral::net::dns
