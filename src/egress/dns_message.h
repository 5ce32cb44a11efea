// DNS wire codec (RFC 1035, plus the EDNS0 OPT record of RFC 6891) for
// corral's filtering resolver: parses the queries of sandboxes and the
// responses of upstream servers, and builds the answers. It trusts nothing:
// every read is bounds-checked, compression pointers must point backward
// (no loops, no recursion), names are limited to 255 wire bytes, and a
// query is refused as malformed unless it is exactly one well-formed
// question. Names are handed out in one text form: lower-case, without the
// trailing dot, the root as ".".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "base/result.h"

namespace corral::net::dns {

inline constexpr std::uint16_t kTypeA = 1;
inline constexpr std::uint16_t kTypeNs = 2;
inline constexpr std::uint16_t kTypeCname = 5;
inline constexpr std::uint16_t kTypeSoa = 6;
inline constexpr std::uint16_t kTypeNull = 10;
inline constexpr std::uint16_t kTypePtr = 12;
inline constexpr std::uint16_t kTypeMx = 15;
inline constexpr std::uint16_t kTypeTxt = 16;
inline constexpr std::uint16_t kTypeAaaa = 28;
inline constexpr std::uint16_t kTypeSrv = 33;
inline constexpr std::uint16_t kTypeOpt = 41;
inline constexpr std::uint16_t kTypeAny = 255;
inline constexpr std::uint16_t kClassIn = 1;

inline constexpr std::size_t kHeaderSize = 12;
inline constexpr std::size_t kMaxNameWire = 255;  // RFC 1035 2.3.4
inline constexpr std::size_t kMaxNameText = 253;  // without the trailing dot
inline constexpr std::size_t kMaxLabel = 63;
inline constexpr std::size_t kClassicUdpSize = 512;  // without EDNS
inline constexpr std::uint16_t kEdnsUdpSize = 1232;  // what we offer and accept

enum class Rcode : std::uint8_t {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
};

// "NOERROR", "NXDOMAIN", ...; "RCODE<n>" for the others.
std::string rcode_name(unsigned rcode);
// "A", "AAAA", "TXT", ...; "TYPE<n>" (RFC 3597) for the others.
std::string type_name(std::uint16_t type);

// Header flag bits (RFC 1035 4.1.1).
inline constexpr std::uint16_t kFlagQr = 0x8000;
inline constexpr std::uint16_t kFlagAa = 0x0400;
inline constexpr std::uint16_t kFlagTc = 0x0200;
inline constexpr std::uint16_t kFlagRd = 0x0100;
inline constexpr std::uint16_t kFlagRa = 0x0080;
inline constexpr unsigned opcode_of(std::uint16_t flags) { return (flags >> 11) & 0xf; }
inline constexpr unsigned rcode_of(std::uint16_t flags) { return flags & 0xf; }

struct Question {
  std::string name;  // text form (see above)
  std::uint16_t qtype = 0;
  std::uint16_t qclass = kClassIn;
};

struct Query {
  std::uint16_t id = 0;
  std::uint16_t flags = 0;
  Question question;
  // The question section exactly as received (the name keeps its case);
  // replies echo it.
  std::vector<std::uint8_t> question_wire;
  // The UDP payload size of the client's OPT record, if it sent one.
  std::optional<std::uint16_t> edns_udp_size;

  bool recursion_desired() const { return (flags & kFlagRd) != 0; }
};

struct QueryError {
  // What to answer (build_error_reply): FORMERR, or NOTIMP for an opcode
  // other than QUERY.
  Rcode rcode = Rcode::kFormErr;
  std::string reason;  // printable ASCII
};

// Parses a query from a client. A query is exactly: a header with QR=0 and
// opcode QUERY, one question whose name is valid (labels of letters,
// digits, '-' and '_', at most 63 bytes each, at most 253 characters in
// all, no compression, no empty label but the root), no answer or
// authority record, and additional records only if well-formed (at most
// one OPT, owned by the root). No byte may follow.
tl::expected<Query, QueryError> parse_query(std::span<const std::uint8_t> packet);

// A reply carrying only `rcode`, the id, opcode and RD of `packet`, and no
// question, for a query that parse_query refused. Empty when `packet`
// cannot be answered: shorter than a header, or a response (QR=1), which
// must never be answered (no reflection loops).
std::optional<std::vector<std::uint8_t>> build_error_reply(std::span<const std::uint8_t> packet,
                                                           Rcode rcode);

// A resource record. `data` holds the decoded RDATA of the types we read:
// the address (inet_ntop form) for A and AAAA, the target name for CNAME.
// For every other type, `rdata` holds the raw bytes (parse) or the bytes to
// write (build).
struct Record {
  std::string name;
  std::uint16_t type = 0;
  std::uint16_t rclass = kClassIn;
  std::uint32_t ttl = 0;
  std::string data;
  std::vector<std::uint8_t> rdata;

  bool operator==(const Record&) const = default;
};

struct ResponseOptions {
  bool authoritative = false;
  bool recursion_available = true;
  // 0: the query's limit, 512 bytes without EDNS, else its payload size
  // within [512, 1232]. Answers that do not fit are left out (whole
  // records, from the end); TC is never set, because a client that retries
  // over TCP reaches the proxy, not a resolver.
  std::size_t max_size = 0;
  // Records of the authority section (an SOA for negative answers); left
  // out, like answers, when they do not fit.
  std::vector<Record> authority;
};

// A response to `query`: its id, opcode and RD, RA, `rcode`, its question
// as received, then `answers` and options.authority (names compressed). An OPT record is added
// when the query had one. Records whose data cannot be encoded (an A
// record whose address is not IPv4, ...) are an error.
Result<std::vector<std::uint8_t>> build_response(const Query& query, Rcode rcode,
                                                 std::span<const Record> answers,
                                                 const ResponseOptions& options = {});

// A recursive query (RD=1) for `name`, with an OPT record offering
// `edns_udp_size` (0: no OPT).
Result<std::vector<std::uint8_t>> build_query(std::uint16_t id, std::string_view name,
                                              std::uint16_t qtype,
                                              std::uint16_t edns_udp_size = kEdnsUdpSize);

// An id from the kernel's CSPRNG (getrandom), for queries sent upstream.
std::uint16_t random_query_id();

struct Response {
  std::uint16_t id = 0;
  std::uint16_t flags = 0;
  std::optional<Question> question;  // absent when QDCOUNT is 0
  std::vector<Record> answers;
  std::vector<Record> authority;
  std::vector<Record> additional;

  unsigned rcode() const { return rcode_of(flags); }
  bool truncated() const { return (flags & kFlagTc) != 0; }
};

// Parses an upstream response completely: QR must be set, at most one
// question, every record of every section well-formed (A RDATA 4 bytes,
// AAAA 16, a CNAME target a valid name ending exactly at the end of its
// RDATA). Names may be compressed. Bytes outside letters, digits, '-' and
// '_' in names come out as \DDD escapes (so a '.' inside a label never
// passes for a separator), upper case as lower case. TTLs with the top bit
// set read as 0 (RFC 2181 8). Errors are kInvalidArgument.
Result<Response> parse_response(std::span<const std::uint8_t> packet);

// True when `response` answers the question we asked with `id`: same id,
// QR set, opcode QUERY, and the same name, type and class.
bool response_matches(const Response& response, std::uint16_t id, const Question& question);

// What a resolver may hand on from an answer section: the CNAME chain that
// starts at `name` (at most 8 links, no loops) and the records of type
// `qtype` (A or AAAA) owned by the last name of the chain. Everything else
// is dropped.
struct AddressAnswer {
  std::vector<Record> records;         // the CNAMEs in chain order, then the addresses
  std::vector<std::string> addresses;  // the addresses, in answer order
  std::uint32_t min_ttl = 0;           // the smallest TTL of `records` (0 if none)
};
AddressAnswer follow_address_chain(std::span<const Record> answers, std::string_view name,
                                   std::uint16_t qtype);

}  // namespace corral::net::dns
