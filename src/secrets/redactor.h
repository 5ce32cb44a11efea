// The streaming multi-pattern redactor (issue 5, S3): in front of every
// byte that leaves a sandbox (exec output, background-process output,
// daemon logs, audit records). User guide: docs/secrets.md, "Redaction".
//
// A RedactionSet is compiled once from the injected secrets: every value,
// its base64 (standard and URL-safe alphabets, all three alignments), its
// percent-encodings and its hex (secret_encodings.h), plus the anchors of
// the known key formats (key_formats.h). It is immutable and may be shared
// by any number of threads. A RedactStream is one output stream: cheap to
// make, used by one thread at a time. Each match becomes
// "[REDACTED:<name>]": the secret's name, or the key format's name.
//
// Streaming: feed() appends to `out` every byte that is known to be safe,
// and holds back only a tail that could still be the start of a match:
//   - the longest suffix that is a proper prefix of some literal (a value, an
//     encoded form or an anchor), so "$ " or "Enter value: " comes out at
//     once unless a secret starts with it;
//   - from an anchor on, until its key format's matcher decides (bounded by
//     the format's max_length: 21 bytes for an AWS key id, 32 KiB for a PEM
//     block);
//   - a redacted run that a later match could still overlap.
// At most max_hold() bytes are held (64 KiB: kMaxHeldRun, more than the
// longest form of a kMaxRedactedValue value, 48 KiB percent-encoded);
// finish() flushes the rest at the end of the stream.
//
// How: Vectorscan (stream mode, no start-of-match tracking) looks for the
// first 16 bytes of every literal; a longer literal is compared here as its
// bytes arrive. After each chunk, the last 15 bytes are checked against a
// sorted table of the literals (in guarded memory) for the longest suffix
// that begins one.
//
// Overlapping matches: the union of the overlapping matches is replaced by
// one placeholder named after the leftmost (then longest) of them, so no
// byte of any secret comes out, even when one value contains another.
// Touching matches keep one placeholder each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "secrets/secret_value.h"

struct hs_database;
struct hs_scratch;
struct hs_stream;

namespace corral::secrets {

// Values shorter than this are refused by build(): replacing every
// occurrence of a 4-byte string would destroy ordinary output, and such a
// value is no secret worth the name. Longer than the maximum is refused too.
inline constexpr std::size_t kMinRedactedValue = 8;
inline constexpr std::size_t kMaxRedactedValue = 16 * 1024;
// A redacted run that a later match could still overlap is emitted (as one
// placeholder, then another for the rest) once it is this long.
inline constexpr std::size_t kMaxHeldRun = 64 * 1024;

struct NamedValue {
  std::string name;        // 1 to 128 printable ASCII bytes, no '[', ']' or space
  std::string_view value;  // read during build() only
};

// A literal and the text written in its place, for a set that maps rather
// than redacts (reflection_guard.h: what a broker swap sent, back to what
// the sandbox had). Read during build_replacements() only.
struct Replacement {
  std::string_view from;  // at least kMinRedactedValue bytes
  std::string_view to;
};

struct RedactorOptions {
  // Find the known key formats (key_formats.h) even when not injected.
  bool key_formats = true;
  // Find the base64, percent-encoded and hex forms of each value.
  bool encoded_forms = true;
};

class RedactStream;

class RedactionSet {
 public:
  // Compiles the set. Errors (kInvalidArgument) name the secret, never
  // show its value. An empty list with key formats off gives a set that
  // streams pass through at the cost of a copy.
  static Result<std::shared_ptr<const RedactionSet>> build(std::vector<NamedValue> secrets,
                                                           RedactorOptions options = {});

  // A set that writes each `from` as its `to`: no encoded forms are added
  // and no key format is looked for. Overlapping matches become the `to`
  // of the leftmost (then longest); of two equal `from`s the first wins.
  // The `to` texts are wiped when the set goes.
  static Result<std::shared_ptr<const RedactionSet>> build_replacements(
      const std::vector<Replacement>& pairs);

  RedactionSet(const RedactionSet&) = delete;
  RedactionSet& operator=(const RedactionSet&) = delete;
  ~RedactionSet();

  bool empty() const { return database_ == nullptr; }
  std::size_t secret_count() const { return secret_count_; }
  // Literals in Vectorscan's database: the distinct prefixes (up to 16
  // bytes) of the values, their encoded forms and the anchors.
  std::size_t pattern_count() const { return pattern_count_; }
  // Values, encoded forms and anchors (no duplicates).
  std::size_t literal_count() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  // The most bytes a stream of this set holds back.
  std::size_t max_hold() const { return max_hold_; }
  // Bytes of Vectorscan stream state per RedactStream.
  std::size_t stream_state_size() const { return stream_size_; }

 private:
  friend class RedactStream;
  struct Literal;
  struct Prefix;
  struct BuildLiteral;
  struct WipeLiterals;
  RedactionSet() = default;
  // Sorts, stores and compiles the literals of `pool` into `set`.
  static Result<std::shared_ptr<const RedactionSet>> compile(std::shared_ptr<RedactionSet> set,
                                                             std::vector<BuildLiteral>& pool,
                                                             std::size_t max_format);

  // The proper-prefix test behind the hold-back: is s a proper prefix of
  // some literal in sorted positions [lo, hi)?
  bool prefix_of_literal(const unsigned char* s, std::size_t m, std::uint32_t lo,
                         std::uint32_t hi) const;
  std::string_view literal(std::uint32_t index) const;

  hs_database* database_ = nullptr;
  hs_scratch* scratch_ = nullptr;  // prototype, cloned per stream
  std::size_t secret_count_ = 0;
  std::size_t pattern_count_ = 0;
  std::size_t max_hold_ = 0;
  std::size_t stream_size_ = 0;
  // The literals (values, encoded forms, anchors), sorted, back to back,
  // in guarded memory: offsets_[i]..offsets_[i+1] is literal i, and
  // literals_[i] says what it is.
  SecretValue sorted_;
  std::vector<std::uint32_t> offsets_;
  std::vector<Literal> literals_;
  // Vectorscan id -> the literals whose first kPrefixLength bytes (or whole
  // self, if shorter) it is. Vectorscan looks for these prefixes only; the
  // rest of a longer literal is compared here.
  std::vector<Prefix> prefixes_;
  std::vector<std::string> placeholders_;  // "[REDACTED:<name>]" per name index
  // pair_start_[(b0 << 8) | b1] = first sorted literal starting with b0 b1
  // (65537 entries): the literals starting with a pair are contiguous.
  std::vector<std::uint32_t> pair_start_;
};

class RedactStream {
 public:
  // A null set passes everything through, like an empty one.
  explicit RedactStream(std::shared_ptr<const RedactionSet> set);
  RedactStream(const RedactStream&) = delete;
  RedactStream& operator=(const RedactStream&) = delete;
  ~RedactStream();

  // Appends to `out` the safe part of what has been fed so far.
  void feed(std::string_view in, std::string& out);
  // End of stream: appends everything still held (redacted), then resets,
  // so the object can take a new stream.
  void finish(std::string& out);

  // Bytes fed but not yet written out.
  std::size_t held() const { return held_.size(); }
  // Placeholders written so far.
  std::uint64_t redactions() const { return redactions_; }
  // False if Vectorscan could not give this stream its memory: the stream
  // then writes "[REDACTED:unavailable]" once, and nothing of its input.
  bool ok() const { return broken_ == false; }

 private:
  friend std::string redact(const RedactionSet& set, std::string_view text);
  struct Hit {
    std::uint64_t start;
    std::uint64_t end;
    std::uint32_t name;  // placeholder index
    std::uint32_t rank;  // 0 for a value, 1 for a key format: the value's name wins a tie
  };
  struct Pending {
    std::uint64_t pos;
    std::uint32_t ref;       // format index (anchors) or prefix index (candidates)
    std::uint64_t seen = 0;  // candidates: literals ending by here are decided
  };

  explicit RedactStream(const RedactionSet* set);
  void open();
  static int on_match(unsigned int id, unsigned long long from, unsigned long long to,
                      unsigned int flags, void* context);
  void process(std::string_view in, bool at_end, std::string& out);
  void found(std::uint32_t literal, std::uint64_t start);

  std::shared_ptr<const RedactionSet> owner_;
  const RedactionSet* set_ = nullptr;
  hs_stream* stream_ = nullptr;
  hs_scratch* scratch_ = nullptr;
  bool broken_ = false;
  bool reported_broken_ = false;

  // Bytes [base_, base_ + held_.size()) of the stream, not written yet.
  std::string held_;
  std::uint64_t base_ = 0;
  int prev_byte_ = -1;  // the stream's byte at base_ - 1 (-1: none)
  // No literal can start before this offset (positions already ruled out).
  std::uint64_t scan_from_ = 0;
  std::vector<Hit> hits_;            // complete matches not yet written
  std::vector<Pending> anchors_;     // key-format anchors not yet decided
  std::vector<Pending> candidates_;  // longer literals whose prefix was seen
  std::uint64_t redactions_ = 0;
};

// The whole of `text`, redacted (one stream, fed once, finished).
std::string redact(const RedactionSet& set, std::string_view text);

}  // namespace corral::secrets
