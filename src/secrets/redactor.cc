#include "secrets/redactor.h"

#include <hs/hs.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "secrets/key_formats.h"
#include "secrets/secret_encodings.h"

namespace corral::secrets {

// Vectorscan looks for the first kPrefixLength bytes of each literal (or
// the whole literal, if shorter); a longer literal is then compared byte by
// byte as the stream brings its rest. This also bounds the window that the
// hold-back scan of process() has to look at: a partial match of
// kPrefixLength bytes or more is a candidate already.
constexpr std::size_t kPrefixLength = 16;
constexpr std::string_view kUnavailable = "[REDACTED:unavailable]";

struct RedactionSet::Literal {
  enum Kind : std::uint8_t { kValue, kAnchor };
  Kind kind;
  std::uint32_t ref;  // value: name index; anchor: format index
};

struct RedactionSet::Prefix {
  std::uint32_t lo;  // the sorted literals that have this prefix
  std::uint32_t hi;
  std::uint32_t length;  // of the prefix
};

namespace {

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (c <= ' ' || c > '~' || c == '[' || c == ']') return false;
  }
  return true;
}

// Whether the window starts with `text` (the window holds at least as many
// bytes).
bool window_starts_with(const ByteWindow& w, std::string_view text) {
  const std::size_t a = std::min(text.size(), w.first.size());
  if (a > 0 && std::memcmp(w.first.data(), text.data(), a) != 0) return false;
  return text.size() == a || std::memcmp(w.second.data(), text.data() + a, text.size() - a) == 0;
}

}  // namespace

struct RedactionSet::BuildLiteral {
  std::string bytes;
  std::uint8_t kind = 0;
  std::uint32_t ref = 0;
};

// Wipes every literal of a build's pool when the build returns, however it
// returns: the pool holds secret values in the clear.
struct RedactionSet::WipeLiterals {
  std::vector<BuildLiteral>& pool;
  ~WipeLiterals() {
    for (auto& l : pool) wipe(l.bytes);
  }
};

std::string_view RedactionSet::literal(std::uint32_t index) const {
  const std::string_view all = sorted_.view();
  return all.substr(offsets_[index], offsets_[index + 1] - offsets_[index]);
}

bool RedactionSet::prefix_of_literal(const unsigned char* s, std::size_t m, std::uint32_t lo,
                                     std::uint32_t hi) const {
  // The first literal greater than s; if any literal has s as a proper
  // prefix, this one does (sorted order keeps them together, after s).
  const std::string_view key(reinterpret_cast<const char*>(s), m);
  const std::uint32_t limit = hi;
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (literal(mid) <= key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo >= limit) return false;
  const std::string_view next = literal(lo);
  return next.size() > m && next.substr(0, m) == key;
}

Result<std::shared_ptr<const RedactionSet>> RedactionSet::build(std::vector<NamedValue> secrets,
                                                                RedactorOptions options) {
  if (!sodium_ready()) {
    return make_error(ErrorCode::kUnavailable, "libsodium cannot start");
  }
  for (const auto& s : secrets) {
    if (!valid_name(s.name)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "invalid secret name (1 to 128 printable ASCII "
                        "characters, no space, '[' or ']')");
    }
    if (s.value.size() < kMinRedactedValue) {
      return make_error(ErrorCode::kInvalidArgument,
                        "secret '" + s.name + "' is " + std::to_string(s.value.size()) +
                            " bytes; redaction needs at least " + std::to_string(kMinRedactedValue),
                        "a value this short cannot be redacted without destroying ordinary "
                        "output: use a longer secret");
    }
    if (s.value.size() > kMaxRedactedValue) {
      return make_error(ErrorCode::kInvalidArgument,
                        "secret '" + s.name + "' is " + std::to_string(s.value.size()) +
                            " bytes; at most " + std::to_string(kMaxRedactedValue) +
                            " can be redacted");
    }
  }

  std::shared_ptr<RedactionSet> set(new RedactionSet());
  set->secret_count_ = secrets.size();
  for (const auto& s : secrets) set->placeholders_.push_back("[REDACTED:" + s.name + "]");
  const auto& formats = key_formats();
  for (const auto& f : formats)
    set->placeholders_.push_back("[REDACTED:" + std::string(f.name) + "]");

  // Every literal as a temporary string, wiped before returning. Reserved
  // up front (at most 30 forms a value), and sorted through pointers, so
  // that no copy is left behind by a reallocation or a swap.
  std::vector<BuildLiteral> pool;
  WipeLiterals wipe_literals{pool};
  std::size_t anchor_count = 0;
  for (const auto& f : formats) anchor_count += f.anchors.size();
  pool.reserve(secrets.size() * 30 + anchor_count);
  for (std::size_t i = 0; i < secrets.size(); ++i) {
    std::vector<std::string> forms;
    if (options.encoded_forms) {
      forms = redaction_forms(secrets[i].value);
    } else {
      forms.emplace_back(secrets[i].value);
    }
    for (auto& form : forms) {
      auto& l = pool.emplace_back();
      l.bytes = std::move(form);  // `form` is wiped below
      l.kind = Literal::kValue;
      l.ref = static_cast<std::uint32_t>(i);
    }
    wipe_all(forms);
  }
  std::size_t max_format = 0;
  if (options.key_formats) {
    for (std::size_t f = 0; f < formats.size(); ++f) {
      max_format = std::max(max_format, formats[f].max_length);
      for (auto anchor : formats[f].anchors) {
        pool.push_back({std::string(anchor), Literal::kAnchor, static_cast<std::uint32_t>(f)});
      }
    }
  }
  return compile(std::move(set), pool, max_format);
}

Result<std::shared_ptr<const RedactionSet>> RedactionSet::build_replacements(
    const std::vector<Replacement>& pairs) {
  if (!sodium_ready()) {
    return make_error(ErrorCode::kUnavailable, "libsodium cannot start");
  }
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    // The message says which pair, never its bytes.
    if (pairs[i].from.size() < kMinRedactedValue || pairs[i].from.size() > 4 * kMaxRedactedValue) {
      return make_error(ErrorCode::kInvalidArgument,
                        "replacement " + std::to_string(i) + " is " +
                            std::to_string(pairs[i].from.size()) + " bytes; it must be " +
                            std::to_string(kMinRedactedValue) + " to " +
                            std::to_string(4 * kMaxRedactedValue));
    }
  }
  std::shared_ptr<RedactionSet> set(new RedactionSet());
  set->secret_count_ = pairs.size();
  std::vector<BuildLiteral> pool;
  WipeLiterals wipe_literals{pool};
  pool.reserve(pairs.size());  // never reallocated: a move would leave copies
  set->placeholders_.reserve(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    set->placeholders_.emplace_back(pairs[i].to);
    auto& l = pool.emplace_back();
    l.bytes.assign(pairs[i].from);
    l.kind = Literal::kValue;
    l.ref = static_cast<std::uint32_t>(i);
  }
  return compile(std::move(set), pool, 0);
}

Result<std::shared_ptr<const RedactionSet>> RedactionSet::compile(std::shared_ptr<RedactionSet> set,
                                                                  std::vector<BuildLiteral>& pool,
                                                                  std::size_t max_format) {
  if (pool.empty()) return std::shared_ptr<const RedactionSet>(std::move(set));

  std::vector<const BuildLiteral*> lits;
  lits.reserve(pool.size());
  for (const auto& l : pool) lits.push_back(&l);
  std::sort(lits.begin(), lits.end(), [](const BuildLiteral* a, const BuildLiteral* b) {
    if (a->bytes != b->bytes) return a->bytes < b->bytes;
    if (a->kind != b->kind) return a->kind < b->kind;
    return a->ref < b->ref;
  });
  // One literal per (bytes, kind): the first secret listed names a value
  // that two secrets share.
  lits.erase(std::unique(lits.begin(), lits.end(),
                         [](const BuildLiteral* a, const BuildLiteral* b) {
                           return a->kind == b->kind && a->bytes == b->bytes;
                         }),
             lits.end());

  // The sorted literals, back to back, into guarded memory.
  std::string blob;
  std::size_t total = 0;
  std::size_t longest = 0;
  for (const auto& l : lits) {
    total += l->bytes.size();
    longest = std::max(longest, l->bytes.size());
  }
  blob.reserve(total);
  set->offsets_.reserve(lits.size() + 1);
  for (const auto& l : lits) {
    set->offsets_.push_back(static_cast<std::uint32_t>(blob.size()));
    blob += l->bytes;
  }
  set->offsets_.push_back(static_cast<std::uint32_t>(blob.size()));
  try {
    set->sorted_ = SecretValue(blob);
  } catch (const std::bad_alloc&) {
    wipe(blob);
    return make_error(ErrorCode::kResourceExhausted,
                      "no locked memory for " + std::to_string(total) + " bytes of patterns",
                      "raise RLIMIT_MEMLOCK of the daemon");
  }
  wipe(blob);

  // Literals starting with each byte pair are contiguous in sorted order.
  set->pair_start_.assign(65537, 0);
  for (const auto& l : lits) {
    const auto p =
        (static_cast<unsigned char>(l->bytes[0]) << 8) | static_cast<unsigned char>(l->bytes[1]);
    set->pair_start_[p + 1]++;
  }
  for (std::size_t p = 1; p < set->pair_start_.size(); ++p) {
    set->pair_start_[p] += set->pair_start_[p - 1];
  }

  for (const auto& l : lits) {
    set->literals_.push_back({static_cast<Literal::Kind>(l->kind), l->ref});
  }
  // One Vectorscan pattern per distinct prefix. The literals sharing one
  // are contiguous in sorted order (a shorter literal between two that
  // share kPrefixLength bytes would share them too).
  std::vector<std::size_t> starts;  // in `escaped`, per pattern
  std::string escaped;              // every byte as \xHH, patterns NUL-separated; wiped below
  escaped.reserve(lits.size() * (4 * kPrefixLength + 1));  // never reallocated
  for (std::uint32_t i = 0; i < lits.size(); ++i) {
    const std::size_t k = std::min(lits[i]->bytes.size(), kPrefixLength);
    const std::string_view head = std::string_view(lits[i]->bytes).substr(0, k);
    if (!set->prefixes_.empty()) {
      auto& last = set->prefixes_.back();
      if (last.length == k && std::string_view(lits[last.lo]->bytes).substr(0, k) == head) {
        last.hi = i + 1;
        continue;
      }
    }
    set->prefixes_.push_back({i, i + 1, static_cast<std::uint32_t>(k)});
    starts.push_back(escaped.size());
    for (char c : head) {
      static constexpr char kHex[] = "0123456789abcdef";
      const auto u = static_cast<unsigned char>(c);
      escaped += {'\\', 'x', kHex[u >> 4], kHex[u & 15]};
    }
    escaped.push_back('\0');
  }
  // The regex API with every byte escaped, not hs_compile_lit_multi: the
  // literal API of Vectorscan 5.4.9 refuses a literal that starts with a
  // NUL byte and expects NUL-terminated expressions (intel/hyperscan #386,
  // #388); these patterns are pure literals all the same.
  std::vector<const char*> exprs;
  std::vector<unsigned> ids;
  for (std::size_t p = 0; p < starts.size(); ++p) {
    exprs.push_back(escaped.data() + starts[p]);
    ids.push_back(static_cast<unsigned>(p));
  }
  hs_compile_error_t* error = nullptr;
  hs_database_t* db = nullptr;
  const hs_error_t compiled =
      hs_compile_multi(exprs.data(), nullptr, ids.data(), static_cast<unsigned>(exprs.size()),
                       HS_MODE_STREAM, nullptr, &db, &error);
  wipe(escaped);
  if (compiled != HS_SUCCESS) {
    // The message names a pattern by index at most, never its bytes.
    std::string why = error && error->message ? error->message : "unknown error";
    hs_free_compile_error(error);
    return make_error(ErrorCode::kInternal,
                      "hs_compile_multi(" + std::to_string(exprs.size()) + " literals): " + why);
  }
  set->database_ = db;
  if (hs_alloc_scratch(db, &set->scratch_) != HS_SUCCESS) {
    return make_error(ErrorCode::kResourceExhausted, "hs_alloc_scratch");
  }
  std::size_t stream_size = 0;
  if (hs_stream_size(db, &stream_size) == HS_SUCCESS) set->stream_size_ = stream_size;
  set->pattern_count_ = exprs.size();
  set->max_hold_ = std::max({kMaxHeldRun, longest > 0 ? longest - 1 : 0, max_format});
  return std::shared_ptr<const RedactionSet>(std::move(set));
}

RedactionSet::~RedactionSet() {
  for (auto& p : placeholders_) wipe(p);
  if (scratch_) hs_free_scratch(scratch_);
  if (database_) hs_free_database(database_);
}

RedactStream::RedactStream(std::shared_ptr<const RedactionSet> set)
    : owner_(std::move(set)), set_(owner_.get()) {
  open();
}

RedactStream::RedactStream(const RedactionSet* set) : set_(set) { open(); }

void RedactStream::open() {
  if (!set_ || set_->empty()) return;
  if (hs_clone_scratch(set_->scratch_, &scratch_) != HS_SUCCESS ||
      hs_open_stream(set_->database_, 0, &stream_) != HS_SUCCESS) {
    broken_ = true;
  }
}

RedactStream::~RedactStream() {
  if (stream_) hs_close_stream(stream_, nullptr, nullptr, nullptr);
  if (scratch_) hs_free_scratch(scratch_);
  wipe(held_);
}

int RedactStream::on_match(unsigned int id, unsigned long long /*from*/, unsigned long long to,
                           unsigned int /*flags*/, void* context) {
  auto* self = static_cast<RedactStream*>(context);
  const auto& prefix = self->set_->prefixes_[id];
  const std::uint64_t start = to - prefix.length;
  bool longer = false;
  for (std::uint32_t x = prefix.lo; x < prefix.hi; ++x) {
    if (self->set_->offsets_[x + 1] - self->set_->offsets_[x] == prefix.length) {
      self->found(x, start);
    } else {
      longer = true;
    }
  }
  if (longer) self->candidates_.push_back({start, id, to});
  return 0;
}

void RedactStream::found(std::uint32_t literal, std::uint64_t start) {
  const auto& lit = set_->literals_[literal];
  const std::uint64_t end = start + (set_->offsets_[literal + 1] - set_->offsets_[literal]);
  if (lit.kind == RedactionSet::Literal::kValue) {
    hits_.push_back({start, end, lit.ref, 0});
  } else {
    anchors_.push_back({start, lit.ref});
  }
}

void RedactStream::feed(std::string_view in, std::string& out) {
  if (!set_ || set_->empty()) {
    out.append(in);
    return;
  }
  if (broken_) {
    if (!reported_broken_) out.append(kUnavailable);
    reported_broken_ = true;
    return;
  }
  // hs_scan_stream takes an unsigned length.
  constexpr std::size_t kMaxPiece = std::size_t{1} << 30;
  while (in.size() > kMaxPiece) {
    feed(in.substr(0, kMaxPiece), out);
    in.remove_prefix(kMaxPiece);
  }
  if (in.empty() || broken_) return;
  if (hs_scan_stream(stream_, in.data(), static_cast<unsigned>(in.size()), 0, scratch_, on_match,
                     this) != HS_SUCCESS) {
    // Fail closed: nothing more of this stream comes out.
    broken_ = true;
    wipe(held_);
    if (!reported_broken_) out.append(kUnavailable);
    reported_broken_ = true;
    return;
  }
  process(in, false, out);
}

void RedactStream::finish(std::string& out) {
  if (!set_ || set_->empty()) return;
  if (broken_) return;
  if (hs_reset_stream(stream_, 0, scratch_, on_match, this) != HS_SUCCESS) {
    broken_ = true;
    wipe(held_);
    if (!reported_broken_) out.append(kUnavailable);
    reported_broken_ = true;
    return;
  }
  process({}, true, out);
  wipe(held_);
  base_ = 0;
  prev_byte_ = -1;
  scan_from_ = 0;
  hits_.clear();
  anchors_.clear();
  candidates_.clear();
}

// One round after new bytes (or at the end of the stream): decide the
// anchors, find the earliest offset where a match may still be under way
// (`hold`), then write out everything before it, each run of overlapping
// matches as one placeholder. The three phases stay in one function: they
// share the round's hold offset, anchors and candidate runs, and this is
// the per-chunk hot path of every redacted stream (docs/performance.md).
void RedactStream::process(std::string_view in, bool at_end, std::string& out) {
  const RedactionSet& set = *set_;
  const std::uint64_t mid = base_ + held_.size();  // offset of in[0]
  const std::uint64_t end = mid + in.size();
  auto at = [&](std::uint64_t pos) -> unsigned char {
    return static_cast<unsigned char>(pos < mid ? held_[pos - base_] : in[pos - mid]);
  };
  auto window = [&](std::uint64_t from) -> ByteWindow {
    if (from < mid) return {std::string_view(held_).substr(from - base_), in};
    return {in.substr(from - mid), {}};
  };
  auto append = [&](std::uint64_t from, std::uint64_t to) {
    if (from >= to) return;
    if (from < mid) {
      const std::uint64_t stop = std::min(to, mid);
      out.append(held_, from - base_, stop - from);
      from = stop;
    }
    if (from < to) out.append(in.substr(from - mid, to - from));
  };

  std::uint64_t hold = end;

  // Literals longer than their prefix: compare the bytes after it. A
  // candidate lives while the stream so far is a prefix of one of its
  // literals; each literal is decided once, in the round it can be.
  for (std::size_t k = 0; k < candidates_.size();) {
    Pending& c = candidates_[k];
    const auto& prefix = set.prefixes_[c.ref];
    const ByteWindow w = c.pos >= base_ ? window(c.pos) : ByteWindow{};
    bool alive = false;
    for (std::uint32_t x = prefix.lo; x < prefix.hi && c.pos >= base_; ++x) {
      const std::string_view lit = set.literal(x);
      if (lit.size() == prefix.length || c.pos + lit.size() <= c.seen) continue;
      const std::size_t have = std::min<std::size_t>(lit.size(), w.size());
      if (!window_starts_with(w, lit.substr(0, have))) continue;
      if (have == lit.size()) {
        found(x, c.pos);
      } else if (!at_end) {
        alive = true;
      }
    }
    c.seen = end;
    if (alive) {
      hold = std::min(hold, c.pos);
      ++k;
    } else {
      candidates_[k] = candidates_.back();
      candidates_.pop_back();
    }
  }

  // Key-format anchors: a match, no match, or wait for more bytes.
  for (std::size_t k = 0; k < anchors_.size();) {
    const Pending a = anchors_[k];
    bool keep = false;
    if (a.pos >= base_) {
      const KeyFormat& format = key_formats()[a.ref];
      const int prev = a.pos == 0 ? -1 : (a.pos > base_ ? at(a.pos - 1) : prev_byte_);
      const FormatResult r = format.match(window(a.pos), prev, at_end);
      if (r.verdict == FormatVerdict::kNeedMore) {
        keep = true;
        hold = std::min(hold, a.pos);
      } else if (r.verdict == FormatVerdict::kMatch) {
        hits_.push_back(
            {a.pos, a.pos + r.length, static_cast<std::uint32_t>(set.secret_count_ + a.ref), 1});
      }
    }
    if (keep) {
      ++k;
    } else {
      anchors_[k] = anchors_.back();
      anchors_.pop_back();
    }
  }

  if (!at_end) {
    // The longest suffix (within the last kPrefixLength - 1 bytes) that is a
    // proper prefix of a literal. Offsets before scan_from_ were ruled out
    // by an earlier round: more bytes cannot make them a prefix again.
    std::uint64_t from = std::max(scan_from_, base_);
    if (end > kPrefixLength - 1) from = std::max<std::uint64_t>(from, end - (kPrefixLength - 1));
    std::uint64_t partial = end;
    if (from < end) {
      unsigned char tail[kPrefixLength];
      const std::size_t n = end - from;
      for (std::size_t i = 0; i < n; ++i) tail[i] = at(from + i);
      const auto& pairs = set.pair_start_;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t m = n - i;
        const unsigned b0 = tail[i];
        std::uint32_t lo, hi;
        if (m >= 2) {
          const unsigned p = (b0 << 8) | tail[i + 1];
          lo = pairs[p];
          hi = pairs[p + 1];
        } else {
          lo = pairs[b0 << 8];
          hi = pairs[(b0 << 8) + 256];
        }
        if (lo == hi) continue;
        if (set.prefix_of_literal(tail + i, m, lo, hi)) {
          partial = from + i;
          break;
        }
      }
      wipe(tail, n);
    }
    scan_from_ = partial;
    hold = std::min(hold, partial);
  }

  // Write out up to `emit`: raw bytes, and each run of overlapping matches
  // that no later match can reach (it ends at or before `hold`).
  std::sort(hits_.begin(), hits_.end(), [](const Hit& a, const Hit& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    return a.rank < b.rank;
  });
  std::uint64_t cursor = base_;
  std::uint64_t emit = hold;
  for (std::size_t i = 0; i < hits_.size();) {
    const std::uint64_t start = std::max(hits_[i].start, cursor);
    std::uint64_t stop = hits_[i].end;
    const std::uint32_t name = hits_[i].name;
    std::size_t j = i + 1;
    while (j < hits_.size() && hits_[j].start < stop) stop = std::max(stop, hits_[j++].end);
    if (stop <= start) {  // already written (inside an earlier run)
      i = j;
      continue;
    }
    if (start >= hold) break;
    if (stop <= hold) {
      append(cursor, start);
      out.append(set.placeholders_[name]);
      ++redactions_;
      cursor = stop;
      i = j;
      continue;
    }
    // The run reaches past `hold`: a later match may extend it. Wait,
    // unless the run is already too long to keep: then write what cannot
    // change (up to `hold`) as one placeholder now, the rest later.
    if (end - start > kMaxHeldRun && start < hold) {
      append(cursor, start);
      out.append(set.placeholders_[name]);
      ++redactions_;
      cursor = hold;
    } else {
      emit = start;
    }
    // The run stays one hit (its union, under its first name), so a long
    // run costs one entry, not one per match.
    hits_[i] = {start, stop, name, hits_[i].rank};
    hits_.erase(hits_.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                hits_.begin() + static_cast<std::ptrdiff_t>(j));
    break;
  }
  emit = std::max(emit, cursor);
  append(cursor, emit);

  std::size_t live = 0;
  for (const Hit& h : hits_) {
    if (h.end <= emit) continue;
    hits_[live] = h;
    hits_[live].start = std::max(h.start, emit);
    ++live;
  }
  hits_.resize(live);

  if (emit > base_) prev_byte_ = at(emit - 1);
  if (emit <= mid) {
    held_.erase(0, emit - base_);
    held_.append(in);
  } else {
    held_.assign(in.substr(emit - mid));
  }
  base_ = emit;
}

std::string redact(const RedactionSet& set, std::string_view text) {
  std::string out;
  RedactStream stream(&set);
  out.reserve(text.size());
  stream.feed(text, out);
  stream.finish(out);
  return out;
}

}  // namespace corral::secrets
