#include "egress/dns_message.h"

#include "base/random.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

namespace corral::net::dns {
namespace {

constexpr std::size_t kRecordFixed = 10;                  // type, class, ttl, rdlength
constexpr std::size_t kOptRecordSize = 1 + kRecordFixed;  // root name + fixed part
constexpr int kMaxPointerJumps = 64;                      // more than a 255-byte name can need
constexpr std::size_t kMaxChainLinks = 8;

// Bounds-checked big-endian reads.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> data) : data_(data) {}

  std::size_t pos() const { return pos_; }
  std::size_t remaining() const { return data_.size() - pos_; }
  void seek(std::size_t pos) { pos_ = pos; }
  std::span<const std::uint8_t> data() const { return data_; }

  bool u8(std::uint8_t& v) {
    if (remaining() < 1) return false;
    v = data_[pos_++];
    return true;
  }
  bool u16(std::uint16_t& v) {
    if (remaining() < 2) return false;
    v = static_cast<std::uint16_t>((data_[pos_] << 8) | data_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  bool u32(std::uint32_t& v) {
    if (remaining() < 4) return false;
    v = (std::uint32_t{data_[pos_]} << 24) | (std::uint32_t{data_[pos_ + 1]} << 16) |
        (std::uint32_t{data_[pos_ + 2]} << 8) | std::uint32_t{data_[pos_ + 3]};
    pos_ += 4;
    return true;
  }
  bool skip(std::size_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }

 private:
  std::span<const std::uint8_t> data_;
  std::size_t pos_ = 0;
};

bool plain_label_byte(std::uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::uint8_t lower(std::uint8_t c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<std::uint8_t>(c - 'A' + 'a') : c;
}

void append_escaped(std::string& out, std::uint8_t c) {
  out.push_back('\\');
  out.push_back(static_cast<char>('0' + c / 100));
  out.push_back(static_cast<char>('0' + (c / 10) % 10));
  out.push_back(static_cast<char>('0' + c % 10));
}

enum class NameMode {
  kQuery,     // strict: no compression, only letters, digits, '-', '_'
  kResponse,  // compression allowed, other bytes escaped
};

// Reads a name at the reader's position; leaves the reader after the name
// (after the first pointer if compressed). Iterative: every pointer must
// point before the start of the label run that contains it, so the jumps
// strictly decrease and end.
bool read_name(Reader& r, NameMode mode, std::string& out, std::string& why) {
  auto data = r.data();
  std::size_t p = r.pos();
  std::size_t run_start = p;
  std::size_t resume = 0;  // where the reader continues; 0 until known
  std::size_t wire = 0;
  int jumps = 0;
  out.clear();
  while (true) {
    if (p >= data.size()) {
      why = "name runs past the end of the packet";
      return false;
    }
    std::uint8_t len = data[p];
    if (len == 0) {
      wire += 1;
      if (resume == 0) resume = p + 1;
      break;
    }
    if ((len & 0xc0) == 0xc0) {
      if (mode == NameMode::kQuery) {
        why = "compressed name in a query";
        return false;
      }
      if (p + 1 >= data.size()) {
        why = "compression pointer runs past the end of the packet";
        return false;
      }
      std::size_t target = (std::size_t{len & 0x3fu} << 8) | data[p + 1];
      if (target >= run_start || ++jumps > kMaxPointerJumps) {
        why = "compression pointer does not point backward";
        return false;
      }
      // The header holds no name: a pointer into it would spell one out of
      // the id, flags and counts (found by fuzzing against ldns).
      if (target < kHeaderSize) {
        why = "compression pointer into the header";
        return false;
      }
      if (resume == 0) resume = p + 2;
      p = target;
      run_start = target;
      continue;
    }
    if ((len & 0xc0) != 0) {
      why = "unknown label type";
      return false;
    }
    // len <= 63 here: the two top bits are clear.
    if (p + 1 + len > data.size()) {
      why = "label runs past the end of the packet";
      return false;
    }
    wire += 1 + len;
    if (wire + 1 > kMaxNameWire) {
      why = "name longer than 255 bytes";
      return false;
    }
    if (!out.empty()) out.push_back('.');
    for (std::size_t i = 0; i < len; ++i) {
      std::uint8_t c = lower(data[p + 1 + i]);
      if (plain_label_byte(c)) {
        out.push_back(static_cast<char>(c));
      } else if (mode == NameMode::kQuery) {
        why = "name has a byte other than letters, digits, '-' and '_'";
        return false;
      } else {
        append_escaped(out, c);
      }
    }
    p += 1 + len;
  }
  if (out.empty()) out = ".";
  if (mode == NameMode::kQuery && out.size() > kMaxNameText) {
    why = "name longer than 253 characters";
    return false;
  }
  r.seek(resume);
  return true;
}

// Splits a text name into raw labels, undoing \DDD and \c escapes.
// "." is the root (no label).
Result<std::vector<std::string>> split_name(std::string_view name) {
  std::vector<std::string> labels;
  if (name == "." || name.empty()) return labels;
  if (name.back() == '.') name.remove_suffix(1);
  std::string label;
  std::size_t wire = 1;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      if (label.empty() || label.size() > kMaxLabel) {
        return make_error(ErrorCode::kInvalidArgument,
                          "name has an empty label or a label longer than 63 bytes");
      }
      wire += 1 + label.size();
      labels.push_back(std::move(label));
      label.clear();
      continue;
    }
    char c = name[i];
    if (c == '\\') {
      if (i + 3 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 1])) &&
          std::isdigit(static_cast<unsigned char>(name[i + 2])) &&
          std::isdigit(static_cast<unsigned char>(name[i + 3]))) {
        int v = (name[i + 1] - '0') * 100 + (name[i + 2] - '0') * 10 + (name[i + 3] - '0');
        if (v > 255) return make_error(ErrorCode::kInvalidArgument, "bad \\DDD escape in name");
        label.push_back(static_cast<char>(v));
        i += 3;
      } else if (i + 1 < name.size()) {
        label.push_back(name[++i]);
      } else {
        return make_error(ErrorCode::kInvalidArgument, "name ends with a backslash");
      }
      continue;
    }
    label.push_back(c);
  }
  if (wire > kMaxNameWire) {
    return make_error(ErrorCode::kInvalidArgument, "name longer than 255 bytes");
  }
  return labels;
}

std::string lower_key(std::string_view s) {
  std::string k(s);
  for (auto& c : k) c = static_cast<char>(lower(static_cast<std::uint8_t>(c)));
  return k;
}

// Appends big-endian values and names (with compression) to a packet.
class Writer {
 public:
  std::vector<std::uint8_t>& bytes() { return out_; }
  std::size_t size() const { return out_.size(); }

  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) {
    out_.push_back(static_cast<std::uint8_t>(v >> 8));
    out_.push_back(static_cast<std::uint8_t>(v));
  }
  void u32(std::uint32_t v) {
    u16(static_cast<std::uint16_t>(v >> 16));
    u16(static_cast<std::uint16_t>(v));
  }
  void raw(std::span<const std::uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void put16(std::size_t at, std::uint16_t v) {
    out_[at] = static_cast<std::uint8_t>(v >> 8);
    out_[at + 1] = static_cast<std::uint8_t>(v);
  }

  // Remembers the suffixes of an uncompressed name already written at
  // `at` (the question), so later names can point to it.
  void note_name_at(std::size_t at) {
    std::vector<std::pair<std::size_t, std::size_t>> labels;  // offset, length
    std::size_t p = at;
    while (p < out_.size() && out_[p] != 0 && (out_[p] & 0xc0) == 0) {
      labels.emplace_back(p, out_[p]);
      p += 1 + out_[p];
    }
    for (std::size_t i = 0; i < labels.size(); ++i) {
      std::string key;
      for (std::size_t j = i; j < labels.size(); ++j) {
        key.push_back(static_cast<char>(labels[j].second));
        key.append(reinterpret_cast<const char*>(&out_[labels[j].first + 1]), labels[j].second);
      }
      remember(lower_key(key), labels[i].first);
    }
  }

  Status name(std::string_view text) {
    auto labels = split_name(text);
    if (!labels) return tl::unexpected(labels.error());
    for (std::size_t i = 0; i < labels->size(); ++i) {
      std::string key;
      for (std::size_t j = i; j < labels->size(); ++j) {
        key.push_back(static_cast<char>((*labels)[j].size()));
        key.append((*labels)[j]);
      }
      key = lower_key(key);
      auto it =
          std::find_if(table_.begin(), table_.end(), [&](const auto& e) { return e.first == key; });
      if (it != table_.end()) {
        u16(static_cast<std::uint16_t>(0xc000 | it->second));
        return ok();
      }
      remember(std::move(key), out_.size());
      u8(static_cast<std::uint8_t>((*labels)[i].size()));
      raw({reinterpret_cast<const std::uint8_t*>((*labels)[i].data()), (*labels)[i].size()});
    }
    u8(0);
    return ok();
  }

  // Undoes everything written from `size` on (a record that did not fit).
  void truncate(std::size_t size) {
    out_.resize(size);
    std::erase_if(table_, [&](const auto& e) { return e.second >= size; });
  }

 private:
  void remember(std::string key, std::size_t at) {
    if (at < 0x4000) table_.emplace_back(std::move(key), at);
  }

  std::vector<std::uint8_t> out_;
  std::vector<std::pair<std::string, std::size_t>> table_;  // lower-case wire suffix -> offset
};

Status write_record(Writer& w, const Record& rec) {
  CORRAL_TRY(w.name(rec.name));
  w.u16(rec.type);
  w.u16(rec.rclass);
  w.u32(rec.ttl);
  std::size_t len_at = w.size();
  w.u16(0);
  if (rec.type == kTypeA || rec.type == kTypeAaaa) {
    bool v4 = rec.type == kTypeA;
    std::uint8_t addr[16];
    if (::inet_pton(v4 ? AF_INET : AF_INET6, rec.data.c_str(), addr) != 1) {
      return make_error(ErrorCode::kInvalidArgument, type_name(rec.type) + " record for " +
                                                         rec.name + " has an invalid address \"" +
                                                         rec.data + "\"");
    }
    w.raw({addr, v4 ? 4u : 16u});
  } else if (rec.type == kTypeCname) {
    CORRAL_TRY_CTX(w.name(rec.data), "CNAME target");
  } else {
    w.raw(rec.rdata);
  }
  std::size_t rdlen = w.size() - len_at - 2;
  if (rdlen > 0xffff) return make_error(ErrorCode::kInvalidArgument, "RDATA longer than 65535");
  w.put16(len_at, static_cast<std::uint16_t>(rdlen));
  return ok();
}

void write_opt(Writer& w, std::uint16_t udp_size) {
  w.u8(0);  // root
  w.u16(kTypeOpt);
  w.u16(udp_size);
  w.u32(0);  // extended rcode 0, version 0, no flags
  w.u16(0);  // no options
}

bool read_record(Reader& r, Record& rec, std::string& why) {
  if (!read_name(r, NameMode::kResponse, rec.name, why)) return false;
  std::uint16_t rdlen = 0;
  if (!r.u16(rec.type) || !r.u16(rec.rclass) || !r.u32(rec.ttl) || !r.u16(rdlen)) {
    why = "record header runs past the end of the packet";
    return false;
  }
  if (rec.ttl & 0x80000000u) rec.ttl = 0;
  if (r.remaining() < rdlen) {
    why = "record data runs past the end of the packet";
    return false;
  }
  std::size_t start = r.pos();
  auto rdata = r.data().subspan(start, rdlen);
  rec.data.clear();
  rec.rdata.clear();
  if (rec.type == kTypeA || rec.type == kTypeAaaa) {
    bool v4 = rec.type == kTypeA;
    if (rdlen != (v4 ? 4 : 16)) {
      why = type_name(rec.type) + " record with " + std::to_string(rdlen) + " bytes of data";
      return false;
    }
    char text[INET6_ADDRSTRLEN];
    ::inet_ntop(v4 ? AF_INET : AF_INET6, rdata.data(), text, sizeof text);
    rec.data = text;
  } else if (rec.type == kTypeCname) {
    // The target may point back into the packet, but must end exactly at
    // the end of the RDATA.
    Reader sub(r.data().first(start + rdlen));
    sub.seek(start);
    if (!read_name(sub, NameMode::kResponse, rec.data, why)) {
      why = "CNAME target: " + why;
      return false;
    }
    if (sub.pos() != start + rdlen) {
      why = "CNAME data longer than its target name";
      return false;
    }
  } else {
    rec.rdata.assign(rdata.begin(), rdata.end());
  }
  r.seek(start + rdlen);
  return true;
}

QueryError formerr(std::string reason) { return QueryError{Rcode::kFormErr, std::move(reason)}; }

}  // namespace

std::string rcode_name(unsigned rcode) {
  switch (rcode) {
    case 0:
      return "NOERROR";
    case 1:
      return "FORMERR";
    case 2:
      return "SERVFAIL";
    case 3:
      return "NXDOMAIN";
    case 4:
      return "NOTIMP";
    case 5:
      return "REFUSED";
  }
  return "RCODE" + std::to_string(rcode);
}

std::string type_name(std::uint16_t type) {
  switch (type) {
    case kTypeA:
      return "A";
    case kTypeNs:
      return "NS";
    case kTypeCname:
      return "CNAME";
    case kTypeSoa:
      return "SOA";
    case kTypeNull:
      return "NULL";
    case kTypePtr:
      return "PTR";
    case kTypeMx:
      return "MX";
    case kTypeTxt:
      return "TXT";
    case kTypeAaaa:
      return "AAAA";
    case kTypeSrv:
      return "SRV";
    case kTypeOpt:
      return "OPT";
    case kTypeAny:
      return "ANY";
  }
  return "TYPE" + std::to_string(type);
}

tl::expected<Query, QueryError> parse_query(std::span<const std::uint8_t> packet) {
  Reader r(packet);
  Query q;
  std::uint16_t qd = 0, an = 0, ns = 0, ar = 0;
  if (!r.u16(q.id) || !r.u16(q.flags) || !r.u16(qd) || !r.u16(an) || !r.u16(ns) || !r.u16(ar)) {
    return tl::unexpected(formerr("packet shorter than a DNS header"));
  }
  if (q.flags & kFlagQr) return tl::unexpected(formerr("packet is a response, not a query"));
  if (opcode_of(q.flags) != 0) {
    return tl::unexpected(QueryError{
        Rcode::kNotImp, "opcode " + std::to_string(opcode_of(q.flags)) + " is not supported"});
  }
  if (qd != 1) {
    return tl::unexpected(formerr("query has " + std::to_string(qd) + " questions, not 1"));
  }
  if (an != 0 || ns != 0)
    return tl::unexpected(formerr("query carries answer or authority records"));
  std::size_t question_at = r.pos();
  std::string why;
  if (!read_name(r, NameMode::kQuery, q.question.name, why)) return tl::unexpected(formerr(why));
  if (!r.u16(q.question.qtype) || !r.u16(q.question.qclass)) {
    return tl::unexpected(formerr("question runs past the end of the packet"));
  }
  q.question_wire.assign(packet.begin() + static_cast<std::ptrdiff_t>(question_at),
                         packet.begin() + static_cast<std::ptrdiff_t>(r.pos()));
  for (std::uint16_t i = 0; i < ar; ++i) {
    Record rec;
    if (!read_record(r, rec, why)) return tl::unexpected(formerr("additional record: " + why));
    if (rec.type == kTypeOpt) {
      if (q.edns_udp_size || rec.name != ".") {
        return tl::unexpected(formerr("more than one OPT record, or one not owned by the root"));
      }
      q.edns_udp_size = rec.rclass;
    }
  }
  if (r.remaining() != 0) return tl::unexpected(formerr("bytes after the last record"));
  return q;
}

std::optional<std::vector<std::uint8_t>> build_error_reply(std::span<const std::uint8_t> packet,
                                                           Rcode rcode) {
  if (packet.size() < kHeaderSize) return std::nullopt;
  std::uint16_t flags = static_cast<std::uint16_t>((packet[2] << 8) | packet[3]);
  if (flags & kFlagQr) return std::nullopt;
  std::uint16_t out_flags = static_cast<std::uint16_t>(
      kFlagQr | (flags & (0xf << 11)) | (flags & kFlagRd) | kFlagRa | static_cast<unsigned>(rcode));
  Writer w;
  w.u8(packet[0]);
  w.u8(packet[1]);
  w.u16(out_flags);
  for (int i = 0; i < 4; ++i) w.u16(0);
  return std::move(w.bytes());
}

Result<std::vector<std::uint8_t>> build_response(const Query& query, Rcode rcode,
                                                 std::span<const Record> answers,
                                                 const ResponseOptions& options) {
  std::size_t limit = options.max_size;
  if (limit == 0) {
    limit = kClassicUdpSize;
    if (query.edns_udp_size) {
      limit = std::clamp<std::size_t>(*query.edns_udp_size, kClassicUdpSize, kEdnsUdpSize);
    }
  }
  std::size_t reserve = query.edns_udp_size ? kOptRecordSize : 0;

  Writer w;
  w.u16(query.id);
  std::uint16_t flags =
      static_cast<std::uint16_t>(kFlagQr | (query.flags & kFlagRd) | static_cast<unsigned>(rcode));
  if (options.authoritative) flags |= kFlagAa;
  if (options.recursion_available) flags |= kFlagRa;
  w.u16(flags);
  w.u16(query.question_wire.empty() ? 0 : 1);
  w.u16(0);  // answers, patched below
  w.u16(0);
  w.u16(query.edns_udp_size ? 1 : 0);
  if (!query.question_wire.empty()) {
    std::size_t at = w.size();
    w.raw(query.question_wire);
    w.note_name_at(at);
  }
  if (w.size() + reserve > limit) {
    return make_error(ErrorCode::kInvalidArgument, "the question alone exceeds the response size");
  }
  bool full = false;
  auto write_section = [&](std::span<const Record> records, std::size_t count_at) -> Status {
    std::uint16_t written = 0;
    for (const auto& rec : records) {
      if (full) break;
      std::size_t before = w.size();
      CORRAL_TRY(write_record(w, rec));
      if (w.size() + reserve > limit || written == 0xffff) {
        w.truncate(before);
        full = true;
        break;
      }
      ++written;
    }
    w.put16(count_at, written);
    return ok();
  };
  CORRAL_TRY(write_section(answers, 6));
  CORRAL_TRY(write_section(options.authority, 8));
  if (query.edns_udp_size) write_opt(w, kEdnsUdpSize);
  return std::move(w.bytes());
}

Result<std::vector<std::uint8_t>> build_query(std::uint16_t id, std::string_view name,
                                              std::uint16_t qtype, std::uint16_t edns_udp_size) {
  Writer w;
  w.u16(id);
  w.u16(kFlagRd);
  w.u16(1);
  w.u16(0);
  w.u16(0);
  w.u16(edns_udp_size ? 1 : 0);
  CORRAL_TRY_CTX(w.name(name), "query name");
  w.u16(qtype);
  w.u16(kClassIn);
  if (edns_udp_size) write_opt(w, edns_udp_size);
  return std::move(w.bytes());
}

std::uint16_t random_query_id() {
  std::uint16_t id = 0;
  fill_random(&id, sizeof id);
  return id;
}

Result<Response> parse_response(std::span<const std::uint8_t> packet) {
  Reader r(packet);
  Response resp;
  std::uint16_t qd = 0, an = 0, ns = 0, ar = 0;
  auto fail = [](std::string why) {
    return make_error(ErrorCode::kInvalidArgument, "malformed DNS response: " + why);
  };
  if (!r.u16(resp.id) || !r.u16(resp.flags) || !r.u16(qd) || !r.u16(an) || !r.u16(ns) ||
      !r.u16(ar)) {
    return fail("shorter than a DNS header");
  }
  if (!(resp.flags & kFlagQr)) return fail("QR is not set");
  if (qd > 1) return fail(std::to_string(qd) + " questions");
  std::string why;
  if (qd == 1) {
    Question q;
    if (!read_name(r, NameMode::kResponse, q.name, why)) return fail("question: " + why);
    if (!r.u16(q.qtype) || !r.u16(q.qclass)) return fail("question runs past the end");
    resp.question = std::move(q);
  }
  struct Section {
    std::uint16_t count;
    std::vector<Record>* out;
    const char* name;
  };
  for (const Section& s :
       {Section{an, &resp.answers, "answer"}, Section{ns, &resp.authority, "authority"},
        Section{ar, &resp.additional, "additional"}}) {
    for (std::uint16_t i = 0; i < s.count; ++i) {
      // Each record takes at least 11 bytes, so a lying count fails here
      // long before it costs anything.
      if (r.remaining() < kOptRecordSize) return fail(std::string(s.name) + " section is short");
      Record rec;
      if (!read_record(r, rec, why)) return fail(std::string(s.name) + " record: " + why);
      s.out->push_back(std::move(rec));
    }
  }
  return resp;
}

bool response_matches(const Response& response, std::uint16_t id, const Question& question) {
  return response.id == id && (response.flags & kFlagQr) && opcode_of(response.flags) == 0 &&
         response.question && response.question->name == question.name &&
         response.question->qtype == question.qtype && response.question->qclass == question.qclass;
}

AddressAnswer follow_address_chain(std::span<const Record> answers, std::string_view name,
                                   std::uint16_t qtype) {
  AddressAnswer out;
  std::string current(name);
  std::vector<std::string> seen{current};
  for (std::size_t link = 0; link < kMaxChainLinks; ++link) {
    auto it = std::find_if(answers.begin(), answers.end(), [&](const Record& r) {
      return r.type == kTypeCname && r.rclass == kClassIn && r.name == current;
    });
    if (it == answers.end()) break;
    if (std::find(seen.begin(), seen.end(), it->data) != seen.end()) break;  // a loop
    out.records.push_back(*it);
    current = it->data;
    seen.push_back(current);
  }
  if (qtype == kTypeA || qtype == kTypeAaaa) {
    for (const auto& r : answers) {
      if (r.type == qtype && r.rclass == kClassIn && r.name == current) {
        out.records.push_back(r);
        out.addresses.push_back(r.data);
      }
    }
  }
  bool first = true;
  for (const auto& r : out.records) {
    out.min_ttl = first ? r.ttl : std::min(out.min_ttl, r.ttl);
    first = false;
  }
  return out;
}

}  // namespace corral::net::dns
