// Differential fuzz target: our DNS codec (src/egress/dns_message.cc) against
// ldns (a test-only dependency). The first input byte picks the direction
// (its value modulo 2: '0' a query from a sandbox, parse_query; '1' an
// upstream response, parse_response); the rest is the packet.
//
// ldns reads the packet record by record (ldns_wire2rr, as ldns_wire2pkt
// does). Both accept: they must agree on the header, the question and every
// record's owner, type, class and TTL, and on the data of the records we
// decode (A, AAAA, CNAME). One accepts and the other refuses: the packet
// must show one of the intended differences listed in tests/fuzz/README.md
// ("DNS: where we differ from ldns on purpose"), each checked here from the
// packet's bytes; any other disagreement traps.
#include <arpa/inet.h>
// ldns/common.h defines bool, true and false as macros unless this is set
// (C++ has them; g++'s <stdbool.h> no longer sets it in C++20).
#ifndef __bool_true_false_are_defined
#define __bool_true_false_are_defined 1
#endif
#include <ldns/ldns.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "egress/dns_message.h"
#include "fuzz_checks.h"

namespace {

namespace dns = corral::net::dns;
using corral::fuzz::require;

std::uint16_t u16(const std::uint8_t* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }

// A name in our text form (dns_message.h): lower case, bytes other than
// letters, digits, '-' and '_' as \DDD, no trailing dot, the root ".".
std::string text_of(const ldns_rdf* name) {
  const std::uint8_t* d = ldns_rdf_data(name);
  std::size_t n = ldns_rdf_size(name);
  std::string out;
  for (std::size_t p = 0; p < n && d[p] != 0; p += 1 + d[p]) {
    if (!out.empty()) out += '.';
    for (std::size_t i = 1; i <= d[p] && p + i < n; ++i) {
      std::uint8_t c = d[p + i];
      if (c >= 'A' && c <= 'Z') c = static_cast<std::uint8_t>(c + 32);
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
        out += static_cast<char>(c);
      } else {
        out += '\\';
        out += static_cast<char>('0' + c / 100);
        out += static_cast<char>('0' + (c / 10) % 10);
        out += static_cast<char>('0' + c % 10);
      }
    }
  }
  return out.empty() ? "." : out;
}

// Facts about one wire name, read without decoding it (ldns parsed it).
struct NameFacts {
  std::size_t end = 0;           // where the record continues
  bool compressed = false;       // holds a pointer
  bool forward_pointer = false;  // a pointer not strictly before its label run
  bool header_pointer = false;   // a pointer into the 12-byte header
  bool odd_bytes = false;        // a byte other than letters, digits, '-', '_'
  std::size_t text_size = 0;     // of the first run only (uncompressed names)
  std::size_t reach = 0;         // one past the furthest byte read, pointers followed
};

NameFacts name_facts(std::span<const std::uint8_t> w, std::size_t p) {
  NameFacts f;
  std::size_t run_start = p;
  bool jumped = false;
  for (int guard = 0; guard < 512 && p < w.size(); ++guard) {
    std::uint8_t len = w[p];
    f.reach = std::max(f.reach, p + 1);
    if (len == 0) {
      if (!jumped) f.end = p + 1;
      return f;
    }
    if ((len & 0xc0) == 0xc0) {
      if (p + 1 >= w.size()) return f;
      f.reach = std::max(f.reach, p + 2);
      std::size_t target = (std::size_t{len & 0x3fu} << 8) | w[p + 1];
      f.compressed = true;
      f.forward_pointer |= target >= run_start;
      f.header_pointer |= target < dns::kHeaderSize;
      if (!jumped) f.end = p + 2;
      jumped = true;
      p = run_start = target;
      continue;
    }
    for (std::size_t i = 1; i <= len && p + i < w.size(); ++i) {
      std::uint8_t c = w[p + i];
      if (c >= 'A' && c <= 'Z') c = static_cast<std::uint8_t>(c + 32);
      f.odd_bytes |= !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
    }
    if (!jumped) f.text_size += (f.text_size ? 1 : 0) + len;
    p += 1 + len;
    f.reach = std::max(f.reach, std::min(p, w.size()));
  }
  return f;
}

struct LRecord {
  std::size_t start = 0;
  NameFacts owner;
  std::uint16_t type = 0, rclass = 0, rdlength = 0;
  std::uint32_t ttl = 0;
  std::string name;
  std::string data;  // A/AAAA address, CNAME target (our form)
  NameFacts target;  // CNAME
  bool raw = false;  // ldns refused the data of a type we keep raw (README D-L1)
};

// The packet as ldns reads it.
struct LPacket {
  bool ok = false;
  std::uint16_t id = 0, flags = 0;
  std::uint16_t counts[4] = {};
  std::vector<LRecord> sections[4];
  std::size_t end = 0;
};

bool we_decode(std::uint16_t type) {
  return type == dns::kTypeA || type == dns::kTypeAaaa || type == dns::kTypeCname;
}

LPacket ldns_read(std::span<const std::uint8_t> w) {
  LPacket pkt;
  if (w.size() < dns::kHeaderSize) return pkt;
  pkt.id = u16(&w[0]);
  pkt.flags = u16(&w[2]);
  for (int s = 0; s < 4; ++s) pkt.counts[s] = u16(&w[4 + 2 * s]);
  std::size_t pos = dns::kHeaderSize;
  for (int s = 0; s < 4; ++s) {
    for (std::uint16_t i = 0; i < pkt.counts[s]; ++i) {
      LRecord rec;
      rec.start = pos;
      ldns_rr* rr = nullptr;
      std::size_t p = pos;
      ldns_status st = ldns_wire2rr(&rr, w.data(), w.size(), &p, static_cast<ldns_pkt_section>(s));
      rec.owner = name_facts(w, pos);
      if (st == LDNS_STATUS_OK) {
        rec.name = text_of(ldns_rr_owner(rr));
        rec.type = static_cast<std::uint16_t>(ldns_rr_get_type(rr));
        rec.rclass = static_cast<std::uint16_t>(ldns_rr_get_class(rr));
        rec.ttl = ldns_rr_ttl(rr);
        if (s > 0) rec.rdlength = u16(&w[rec.owner.end + 8]);
        if (s > 0 && (rec.type == dns::kTypeA || rec.type == dns::kTypeAaaa) &&
            ldns_rr_rd_count(rr) == 1) {
          const ldns_rdf* a = ldns_rr_rdf(rr, 0);
          char text[INET6_ADDRSTRLEN] = {};
          if (ldns_rdf_size(a) == (rec.type == dns::kTypeA ? 4u : 16u)) {
            inet_ntop(rec.type == dns::kTypeA ? AF_INET : AF_INET6, ldns_rdf_data(a), text,
                      sizeof text);
          }
          rec.data = text;
        } else if (s > 0 && rec.type == dns::kTypeCname && ldns_rr_rd_count(rr) == 1) {
          rec.data = text_of(ldns_rr_rdf(rr, 0));
          rec.target = name_facts(w, rec.owner.end + 10);
        }
        ldns_rr_free(rr);
        pos = p;
        // ldns reads some types field by field and may stop short of
        // RDLENGTH (it would then read the next record from inside this
        // one); for the types we keep raw, step by RDLENGTH, as we do.
        std::size_t data_end = rec.owner.end + 10 + rec.rdlength;
        if (s > 0 && p != data_end && !we_decode(rec.type) && data_end <= w.size()) {
          rec.raw = true;
          pos = data_end;
        }
      } else {
        // Data ldns cannot read, of a type we keep raw: step over it.
        ldns_rdf* owner = nullptr;
        std::size_t q = pos;
        if (s == 0 || ldns_wire2dname(&owner, w.data(), w.size(), &q) != LDNS_STATUS_OK) return pkt;
        rec.name = text_of(owner);
        ldns_rdf_deep_free(owner);
        if (q + 10 > w.size()) return pkt;
        rec.type = u16(&w[q]);
        rec.rclass = u16(&w[q + 2]);
        rec.ttl = (std::uint32_t{u16(&w[q + 4])} << 16) | u16(&w[q + 6]);
        rec.rdlength = u16(&w[q + 8]);
        if (we_decode(rec.type) || q + 10 + rec.rdlength > w.size()) return pkt;
        rec.raw = true;
        pos = q + 10 + rec.rdlength;
      }
      pkt.sections[s].push_back(std::move(rec));
    }
  }
  pkt.ok = true;
  pkt.end = pos;
  return pkt;
}

bool any_record(const LPacket& l, bool (*pred)(const LRecord&), int from_section = 0) {
  for (int s = from_section; s < 4; ++s) {
    for (const auto& r : l.sections[s]) {
      if (pred(r)) return true;
    }
  }
  return false;
}

// Where we refuse a response ldns reads (README: D1-D6), or null.
const char* stricter_response(const LPacket& l) {
  if (!(l.flags & dns::kFlagQr)) return "D1 QR not set";
  if (l.counts[0] > 1) return "D2 more than one question";
  if (any_record(
          l, [](const LRecord& r) { return r.owner.forward_pointer || r.target.forward_pointer; }))
    return "D3 a compression pointer that does not point backward";
  if (any_record(
          l, [](const LRecord& r) { return r.owner.header_pointer || r.target.header_pointer; }))
    return "D6 a compression pointer into the header";
  if (any_record(
          l,
          [](const LRecord& r) {
            return (r.type == dns::kTypeA && r.rdlength != 4) ||
                   (r.type == dns::kTypeAaaa && r.rdlength != 16);
          },
          1))
    return "D4 A or AAAA data of the wrong size";
  if (any_record(
          l,
          [](const LRecord& r) {
            return r.type == dns::kTypeCname && r.target.end != r.owner.end + 10 + r.rdlength;
          },
          1))
    return "D5 CNAME data longer than its target";
  if (any_record(
          l,
          [](const LRecord& r) {
            return r.type == dns::kTypeCname && r.target.reach > r.owner.end + 10 + r.rdlength;
          },
          1))
    return "D7 a CNAME target whose pointed-to labels run past its RDATA";
  return nullptr;
}

// Where we refuse a query ldns reads (README: Q1-Q8 and D3-D5), or null.
const char* stricter_query(const LPacket& l) {
  if (l.flags & dns::kFlagQr) return "Q1 QR set";
  if (dns::opcode_of(l.flags) != 0) return "Q2 opcode other than QUERY";
  if (l.counts[0] != 1) return "Q3 not exactly one question";
  if (l.counts[1] != 0 || l.counts[2] != 0) return "Q4 answer or authority records";
  const LRecord& q = l.sections[0][0];
  if (q.owner.compressed) return "Q5 compressed question name";
  if (q.owner.odd_bytes) return "Q6 question name with other bytes";
  if (q.owner.text_size > dns::kMaxNameText) return "Q7 question name over 253 characters";
  std::size_t opts = 0;
  for (const auto& r : l.sections[3]) {
    if (r.type != dns::kTypeOpt) continue;
    if (++opts > 1 || r.name != ".") return "Q8 OPT record repeated or not owned by the root";
  }
  LPacket only_additional = l;
  only_additional.flags |= dns::kFlagQr;
  only_additional.counts[0] = 1;
  if (const char* why = stricter_response(only_additional)) return why;
  return nullptr;
}

// The intended difference that explains a disagreement (traps on none);
// CORRAL_FUZZ_VERBOSE=1 prints it, to see which ones a corpus exercises.
void expect_known(const char* why) {
  if (std::getenv("CORRAL_FUZZ_VERBOSE")) std::fprintf(stderr, "known: %s\n", why ? why : "NONE");
  require(why != nullptr);
}

void same_record(const dns::Record& ours, const LRecord& l) {
  if (std::getenv("CORRAL_FUZZ_VERBOSE")) {
    std::fprintf(stderr, "ours [%s] %u %u %u [%s]\nldns [%s] %u %u %u [%s]\n", ours.name.c_str(),
                 ours.type, ours.rclass, ours.ttl, ours.data.c_str(), l.name.c_str(), l.type,
                 l.rclass, l.ttl, l.data.c_str());
  }
  require(ours.name == l.name && ours.type == l.type && ours.rclass == l.rclass);
  require(ours.ttl == ((l.ttl & 0x80000000u) ? 0 : l.ttl));
  if (we_decode(ours.type)) require(ours.data == l.data);
}

void diff_query(std::span<const std::uint8_t> w) {
  auto ours = dns::parse_query(w);
  LPacket l = ldns_read(w);
  // Every packet we accept is one ldns reads.
  require(!ours || l.ok);
  if (!ours && l.ok) {
    // Trailing bytes (Q9) are not a record ldns reads.
    expect_known(l.end != w.size() ? "Q9 bytes after the last record" : stricter_query(l));
    return;
  }
  if (!ours) return;
  require(l.end == w.size());
  require(ours->id == l.id && ours->flags == l.flags);
  const LRecord& q = l.sections[0][0];
  require(ours->question.name == q.name && ours->question.qtype == q.type &&
          ours->question.qclass == q.rclass);
  require(ours->question_wire.size() == l.sections[0][0].owner.end + 4 - dns::kHeaderSize);
  std::optional<std::uint16_t> udp;
  for (const auto& r : l.sections[3]) {
    if (r.type == dns::kTypeOpt) udp = r.rclass;
  }
  require(ours->edns_udp_size == udp);
}

void diff_response(std::span<const std::uint8_t> w) {
  auto ours = dns::parse_response(w);
  LPacket l = ldns_read(w);
  require(!ours || l.ok);
  if (!ours && l.ok) {
    expect_known(stricter_response(l));
    return;
  }
  if (!ours) return;
  require(ours->id == l.id && ours->flags == l.flags);
  require(ours->question.has_value() == (l.counts[0] == 1));
  if (ours->question) {
    const LRecord& q = l.sections[0][0];
    require(ours->question->name == q.name && ours->question->qtype == q.type &&
            ours->question->qclass == q.rclass);
  }
  const std::vector<dns::Record>* mine[] = {nullptr, &ours->answers, &ours->authority,
                                            &ours->additional};
  for (int s = 1; s < 4; ++s) {
    require(mine[s]->size() == l.sections[s].size());
    for (std::size_t i = 0; i < l.sections[s].size(); ++i)
      same_record((*mine[s])[i], l.sections[s][i]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::span<const std::uint8_t> in(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    diff_query(in);
  } else {
    diff_response(in);
  }
  return 0;
}
