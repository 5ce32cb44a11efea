#include "secrets/broker.h"

#include <sodium.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <new>
#include <utility>

#include "base/base64_digits.h"
#include "base/random.h"

namespace corral::secrets {

namespace {

constexpr std::string_view kBase62 =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

bool base62(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

std::string hex_prefix(std::string_view hash) {
  char hex[13];
  ::sodium_bin2hex(hex, sizeof hex, reinterpret_cast<const unsigned char*>(hash.data()),
                   std::min<std::size_t>(6, hash.size()));
  return hex;
}

std::string host_port(std::string_view host, std::uint16_t port) {
  return std::string(host) + ":" + std::to_string(port);
}

bool host_allowed(const std::vector<SecretHost>& hosts, std::string_view host, std::uint16_t port) {
  return std::any_of(hosts.begin(), hosts.end(), [&](const SecretHost& h) {
    return h.port == port && host_matches(h.host, host);
  });
}

// A std::string zeroed when it goes: buffers that hold values on the way.
struct WipedString {
  std::string s;
  WipedString() = default;
  explicit WipedString(std::size_t n) : s(n, '\0') {}
  WipedString(WipedString&& o) noexcept : s(std::move(o.s)) {}
  WipedString& operator=(WipedString&& o) noexcept {
    wipe(s);
    s = std::move(o.s);
    return *this;
  }
  WipedString(const WipedString&) = delete;
  WipedString& operator=(const WipedString&) = delete;
  ~WipedString() { wipe(s); }
};

struct Span {
  std::size_t pos;
  std::size_t len;
};

// Every `corral_tok_` in `text`, with the base62 run after it (of any
// length: a malformed token is still a token that may not go out).
std::vector<Span> find_tokens(std::string_view text) {
  std::vector<Span> spans;
  for (std::size_t pos = text.find(kTokenPrefix); pos != std::string_view::npos;) {
    std::size_t end = pos + kTokenPrefix.size();
    while (end < text.size() && base62(text[end])) ++end;
    spans.push_back({pos, end - pos});
    pos = text.find(kTokenPrefix, end);
  }
  return spans;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The base64 credentials of an `Authorization: Basic` field whose decoded
// text holds a token: the blob's place in the head, the decoded text and
// the tokens in it.
struct BasicCredential {
  std::size_t pos = 0;
  std::size_t len = 0;
  WipedString decoded;
  std::vector<Span> spans;
  WipedString encoded;  // the replacement, once built
};

std::vector<BasicCredential> find_basic_credentials(std::string_view head) {
  std::vector<BasicCredential> out;
  std::size_t line_start = head.find('\n');  // skip the request line
  while (line_start != std::string_view::npos && line_start + 1 < head.size()) {
    std::size_t begin = line_start + 1;
    std::size_t end = head.find('\n', begin);
    std::string_view line =
        head.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    line_start = end;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || !iequals(line.substr(0, colon), "authorization")) {
      continue;
    }
    std::size_t v = line.find_first_not_of(" \t", colon + 1);
    if (v == std::string_view::npos || line.size() - v < 6 ||
        !iequals(line.substr(v, 5), "basic") || (line[v + 5] != ' ' && line[v + 5] != '\t')) {
      continue;
    }
    std::size_t b = line.find_first_not_of(" \t", v + 5);
    if (b == std::string_view::npos) continue;
    std::size_t e = line.find_last_not_of(" \t");
    std::string_view blob = line.substr(b, e + 1 - b);
    // Decoded only as a strict server would: libsodium alone takes bytes
    // above 0x7f as digits (base/base64_digits.h).
    if (!only_base64_digits_and_padding(blob, Base64Alphabet::kStandard)) continue;
    BasicCredential cred;
    cred.decoded = WipedString(blob.size() / 4 * 3 + 3);
    std::size_t n = 0;
    const char* stop = nullptr;
    if (::sodium_base642bin(reinterpret_cast<unsigned char*>(cred.decoded.s.data()),
                            cred.decoded.s.size(), blob.data(), blob.size(), nullptr, &n, &stop,
                            sodium_base64_VARIANT_ORIGINAL) != 0 ||
        stop != blob.data() + blob.size()) {
      continue;  // not base64: left as it is (a plain token in it is still found)
    }
    cred.decoded.s.resize(n);
    cred.spans = find_tokens(cred.decoded.s);
    if (cred.spans.empty()) continue;
    cred.pos = begin + b;
    cred.len = blob.size();
    out.push_back(std::move(cred));
  }
  return out;
}

std::size_t replaced_size(std::string_view text, const std::vector<Span>& spans,
                          const std::vector<std::string_view>& with) {
  std::size_t n = text.size();
  for (std::size_t i = 0; i < spans.size(); ++i) n = n - spans[i].len + with[i].size();
  return n;
}

// Writes `text` with spans[i] replaced by with[i] into `out`, which has
// exactly the final size (no reallocation leaves a copy of a value behind).
void replace_into(std::string& out, std::string_view text, const std::vector<Span>& spans,
                  const std::vector<std::string_view>& with) {
  std::size_t at = 0;
  std::size_t w = 0;
  auto put = [&](std::string_view piece) {
    std::memcpy(out.data() + w, piece.data(), piece.size());
    w += piece.size();
  };
  for (std::size_t i = 0; i < spans.size(); ++i) {
    put(text.substr(at, spans[i].pos - at));
    put(with[i]);
    at = spans[i].pos + spans[i].len;
  }
  put(text.substr(at));
}

}  // namespace

bool looks_like_token(std::string_view text) {
  return text.size() == kTokenLength && text.substr(0, kTokenPrefix.size()) == kTokenPrefix &&
         std::all_of(text.begin() + kTokenPrefix.size(), text.end(), base62);
}

SecretBroker::SecretBroker(BrokerAuditSink sink, BrokerClock clock, BrokerOptions options)
    : sink_(std::move(sink)), clock_(std::move(clock)), options_(options) {
  // Without libsodium, issue() refuses (a token's lookup hash needs it),
  // and the hash key stays zero: no token is ever issued to look up.
  if (sodium_ready()) {
    fill_random(hash_key_, sizeof hash_key_);
  } else {
    wipe(hash_key_, sizeof hash_key_);
  }
}

SecretBroker::~SecretBroker() { wipe(hash_key_, sizeof hash_key_); }

std::chrono::system_clock::time_point SecretBroker::now() const {
  return clock_ ? clock_() : std::chrono::system_clock::now();
}

std::string SecretBroker::hash_token(std::string_view token) const {
  std::string out(crypto_generichash_BYTES, '\0');
  ::crypto_generichash(reinterpret_cast<unsigned char*>(out.data()), out.size(),
                       reinterpret_cast<const unsigned char*>(token.data()), token.size(),
                       hash_key_, sizeof hash_key_);
  return out;
}

void SecretBroker::emit(std::vector<BrokerEvent>& events) const {
  if (sink_) {
    for (const auto& e : events) sink_(e);
  }
  events.clear();
}

void SecretBroker::refuse_locked(std::string_view reason) {
  ++counters_.refusals;
  ++counters_.refusals_by_reason[std::string(reason)];
}

void SecretBroker::mark_ended_locked(Entry& e, State state,
                                     std::chrono::system_clock::time_point now) {
  e.state = state;
  e.ended = now;
  e.value.reset();  // the last reference frees (and zeroes) the copy
  if (state == State::kRevoked) ++counters_.revoked;
  if (state == State::kExpired) ++counters_.expired;
}

SecretBroker::Check SecretBroker::check_locked(std::string_view token, std::string_view sandbox,
                                               std::chrono::system_clock::time_point now,
                                               std::vector<BrokerEvent>& events) {
  if (!looks_like_token(token)) return {nullptr, kReasonUnknown};
  const std::string hash = hash_token(token);
  auto it = tokens_.find(hash);
  if (it == tokens_.end()) return {nullptr, kReasonUnknown};
  Entry& e = it->second;
  // The map found it by hash; the comparison that decides is constant-time.
  if (::sodium_memcmp(e.hash.data(), hash.data(), hash.size()) != 0) {
    return {nullptr, kReasonUnknown};
  }
  if (e.state == State::kActive && now >= e.expiry) {
    mark_ended_locked(e, State::kExpired, now);
    events.push_back({e.sandbox, e.secret, "expired", "", "", "", hex_prefix(e.hash), now});
  }
  if (e.sandbox != sandbox) return {&e, kReasonOtherSandbox};
  if (e.state == State::kRevoked) return {&e, kReasonRevoked};
  if (e.state == State::kExpired) return {&e, kReasonExpired};
  return {&e, {}};
}

bool SecretBroker::issued_to(std::string_view token, std::string_view sandbox_id,
                             std::string_view secret) const {
  if (!looks_like_token(token)) return false;
  const std::string hash = hash_token(token);
  const auto t = now();
  std::lock_guard lock(mu_);
  auto it = tokens_.find(hash);
  if (it == tokens_.end()) return false;
  const Entry& e = it->second;
  if (::sodium_memcmp(e.hash.data(), hash.data(), hash.size()) != 0) return false;
  if (e.sandbox != sandbox_id || e.secret != secret) return false;
  const bool expired = e.state == State::kExpired || (e.state == State::kActive && t >= e.expiry);
  if (expired) return true;
  return e.state == State::kActive && e.value != nullptr && e.value->size() > 0;
}

void SecretBroker::sweep_locked(std::chrono::system_clock::time_point now,
                                std::vector<BrokerEvent>& events) {
  last_sweep_ = now;
  for (auto it = tokens_.begin(); it != tokens_.end();) {
    Entry& e = it->second;
    if (e.state == State::kActive && now >= e.expiry) {
      mark_ended_locked(e, State::kExpired, now);
      events.push_back({e.sandbox, e.secret, "expired", "", "", "", hex_prefix(e.hash), now});
    }
    if (e.state != State::kActive && now - e.ended >= options_.tombstone_retention) {
      it = tokens_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = by_sandbox_.begin(); it != by_sandbox_.end();) {
    auto& hashes = it->second;
    hashes.erase(std::remove_if(hashes.begin(), hashes.end(),
                                [this](const std::string& h) { return !tokens_.count(h); }),
                 hashes.end());
    it = hashes.empty() ? by_sandbox_.erase(it) : std::next(it);
  }
}

void SecretBroker::sweep() {
  std::vector<BrokerEvent> events;
  {
    std::lock_guard lock(mu_);
    sweep_locked(now(), events);
  }
  emit(events);
}

Result<std::string> SecretBroker::issue(std::string_view sandbox_id, const ResolvedSecret& secret) {
  return issue(sandbox_id, secret, now() + secret.ttl);
}

Result<std::string> SecretBroker::issue(std::string_view sandbox_id, const ResolvedSecret& secret,
                                        std::chrono::system_clock::time_point expiry) {
  if (!sodium_ready()) return make_error(ErrorCode::kUnavailable, "libsodium cannot initialise");
  const std::string what = "issuing a token for secret '" + secret.name + "'";
  if (sandbox_id.empty()) return make_error(ErrorCode::kInternal, what + ": no sandbox id");
  if (secret.mode != SecretMode::kBroker) {
    return make_error(ErrorCode::kInvalidArgument, what + ": it is mode " +
                                                       std::string(secret_mode_name(secret.mode)) +
                                                       "; only broker secrets get tokens");
  }
  if (secret.hosts.empty()) {
    return make_error(ErrorCode::kInvalidArgument, what + ": it names no host");
  }
  if (secret.value.empty()) return make_error(ErrorCode::kInvalidArgument, what + ": no value");
  const auto t = now();
  if (expiry <= t) {
    return make_error(ErrorCode::kInvalidArgument, what + ": the expiry is not in the future");
  }

  std::shared_ptr<const SecretValue> value;
  try {
    value = std::make_shared<const SecretValue>(secret.value);
  } catch (const std::bad_alloc&) {
    return locked_memory_error(what);
  }
  std::string token;
  std::string hash;
  std::vector<BrokerEvent> events;
  {
    std::lock_guard lock(mu_);
    if (t - last_sweep_ >= std::chrono::seconds(30)) sweep_locked(t, events);
    do {
      token.assign(kTokenPrefix);
      for (std::size_t i = 0; i < kTokenRandomChars; ++i) {
        token.push_back(kBase62[::randombytes_uniform(static_cast<std::uint32_t>(kBase62.size()))]);
      }
      hash = hash_token(token);
    } while (tokens_.count(hash) != 0);  // 2^-256: never, but cheap to be sure
    Entry e;
    e.hash = hash;
    e.sandbox = std::string(sandbox_id);
    e.secret = secret.name;
    e.tier = secret.tier;
    e.hosts = secret.hosts;
    e.value = std::move(value);
    e.expiry = expiry;
    tokens_.emplace(hash, std::move(e));
    by_sandbox_[std::string(sandbox_id)].push_back(hash);
    ++counters_.issued;
    std::string hosts;
    for (const auto& h : secret.hosts) {
      if (!hosts.empty()) hosts += ",";
      hosts += host_port(h.host, h.port);
    }
    events.push_back(
        {std::string(sandbox_id), secret.name, "issued", hosts, "", "", hex_prefix(hash), t});
  }
  emit(events);
  return token;
}

std::size_t SecretBroker::revoke_sandbox(std::string_view sandbox_id) {
  std::vector<BrokerEvent> events;
  std::size_t n = 0;
  {
    std::lock_guard lock(mu_);
    const auto t = now();
    auto it = by_sandbox_.find(std::string(sandbox_id));
    if (it != by_sandbox_.end()) {
      for (const std::string& h : it->second) {
        auto e = tokens_.find(h);
        if (e == tokens_.end() || e->second.state != State::kActive) continue;
        mark_ended_locked(e->second, State::kRevoked, t);
        events.push_back(
            {e->second.sandbox, e->second.secret, "revoked", "", "", "", hex_prefix(h), t});
        ++n;
      }
    }
    if (t - last_sweep_ >= std::chrono::seconds(30)) sweep_locked(t, events);
  }
  emit(events);
  return n;
}

std::size_t SecretBroker::limit_sandbox(std::string_view sandbox_id,
                                        std::chrono::system_clock::time_point deadline) {
  std::vector<BrokerEvent> events;
  std::size_t n = 0;
  {
    std::lock_guard lock(mu_);
    const auto t = now();
    auto it = by_sandbox_.find(std::string(sandbox_id));
    if (it != by_sandbox_.end()) {
      for (const std::string& h : it->second) {
        auto e = tokens_.find(h);
        if (e == tokens_.end() || e->second.state != State::kActive) continue;
        Entry& entry = e->second;
        if (deadline < entry.expiry) {
          entry.expiry = deadline;
          ++n;
        }
        if (t >= entry.expiry) {
          mark_ended_locked(entry, State::kExpired, t);
          events.push_back({entry.sandbox, entry.secret, "expired", "", "", "", hex_prefix(h), t});
        }
      }
    }
  }
  emit(events);
  return n;
}

bool SecretBroker::revoke(std::string_view token) {
  if (!looks_like_token(token)) return false;
  std::vector<BrokerEvent> events;
  bool done = false;
  {
    std::lock_guard lock(mu_);
    auto it = tokens_.find(hash_token(token));
    if (it != tokens_.end() && it->second.state == State::kActive) {
      const auto t = now();
      mark_ended_locked(it->second, State::kRevoked, t);
      events.push_back(
          {it->second.sandbox, it->second.secret, "revoked", "", "", "", hex_prefix(it->first), t});
      done = true;
    }
  }
  emit(events);
  return done;
}

SwapResult SecretBroker::swap(const OutboundRequest& request, std::string& head) {
  // Where tokens are: plain in the head (request line or any field), or
  // inside the base64 credentials of `Authorization: Basic` (user:token,
  // as git and curl send a token given in a URL).
  std::vector<Span> spans = find_tokens(head);
  std::vector<BasicCredential> basics = find_basic_credentials(head);
  if (spans.empty() && basics.empty()) return {};
  std::vector<std::string_view> tokens;
  for (const Span& s : spans) tokens.push_back(std::string_view(head).substr(s.pos, s.len));
  for (const BasicCredential& b : basics) {
    for (const Span& s : b.spans)
      tokens.push_back(std::string_view(b.decoded.s).substr(s.pos, s.len));
  }

  SwapResult result;
  const std::string dest = host_port(request.host, request.port);
  const std::string via(request.via);
  std::vector<BrokerEvent> events;
  std::vector<std::shared_ptr<const SecretValue>> values;
  std::vector<std::string> swapped_names;
  std::vector<std::string> refused_names;
  std::string_view first_reason;
  {
    std::lock_guard lock(mu_);
    const auto t = now();
    for (std::string_view token : tokens) {
      Check c = check_locked(token, request.sandbox, t, events);
      std::string_view reason = c.reason;
      if (reason.empty() && !host_allowed(c.entry->hosts, request.host, request.port)) {
        reason = kReasonHost;
      }
      const std::string name = c.entry != nullptr ? c.entry->secret : std::string();
      const std::string hash =
          c.entry != nullptr ? hex_prefix(c.entry->hash) : hex_prefix(hash_token(token));
      if (!reason.empty()) {
        if (first_reason.empty()) first_reason = reason;
        refuse_locked(reason);
        if (!name.empty() &&
            std::find(refused_names.begin(), refused_names.end(), name) == refused_names.end()) {
          refused_names.push_back(name);
        }
        events.push_back({std::string(request.sandbox), name, "refused", dest, via,
                          std::string(reason), hash, t});
      } else {
        values.push_back(c.entry->value);
        swapped_names.push_back(name);
        events.push_back({std::string(request.sandbox), name, "swapped", dest, via, "", hash, t});
      }
    }
    if (first_reason.empty()) {
      counters_.swaps += values.size();
      ++counters_.swapped_requests;
    }
  }
  if (!first_reason.empty()) {
    // Nothing is swapped when one token may not go there; the swaps planned
    // for the others did not happen.
    events.erase(std::remove_if(events.begin(), events.end(),
                                [](const BrokerEvent& e) { return e.kind == "swapped"; }),
                 events.end());
    emit(events);
    result.outcome = SwapOutcome::kRefused;
    result.secrets = std::move(refused_names);
    result.reason = std::string(first_reason);
    return result;
  }

  // The edits, in head order: each plain token by its value, each Basic
  // credential by the base64 of its text with the tokens replaced.
  struct Edit {
    std::size_t pos;
    std::size_t len;
    std::string_view with;
  };
  std::vector<Edit> edits;
  std::size_t v = 0;
  // What went in, for the response scan: each value (with its forms) back
  // to its token, each Basic credential as sent back to the one received.
  result.swapped.reserve(tokens.size() + basics.size());
  for (const Span& s : spans) {
    result.swapped.push_back({values[v], std::string(tokens[v]), true});
    edits.push_back({s.pos, s.len, values[v++]->view()});
  }
  for (BasicCredential& b : basics) {
    std::vector<std::string_view> with;
    for (std::size_t i = 0; i < b.spans.size(); ++i) {
      result.swapped.push_back({values[v], std::string(tokens[v]), true});
      with.push_back(values[v++]->view());
    }
    WipedString plain(replaced_size(b.decoded.s, b.spans, with));
    replace_into(plain.s, b.decoded.s, b.spans, with);
    b.encoded.s.assign(sodium_base64_ENCODED_LEN(plain.s.size(), sodium_base64_VARIANT_ORIGINAL),
                       '\0');
    ::sodium_bin2base64(b.encoded.s.data(), b.encoded.s.size(),
                        reinterpret_cast<const unsigned char*>(plain.s.data()), plain.s.size(),
                        sodium_base64_VARIANT_ORIGINAL);
    edits.push_back({b.pos, b.len, std::string_view(b.encoded.s.c_str())});
    try {
      result.swapped.push_back(
          {std::make_shared<const SecretValue>(std::string_view(b.encoded.s.c_str())),
           std::string(std::string_view(head).substr(b.pos, b.len)), false});
    } catch (const std::bad_alloc&) {
      // Without locked memory the whole credential is not looked for; its
      // value's base64 forms still are.
    }
  }
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.pos < b.pos; });
  std::vector<Span> edit_spans;
  std::vector<std::string_view> edit_with;
  for (const Edit& e : edits) {
    edit_spans.push_back({e.pos, e.len});
    edit_with.push_back(e.with);
  }
  std::string out(replaced_size(head, edit_spans, edit_with), '\0');
  replace_into(out, head, edit_spans, edit_with);
  wipe(head);
  head = std::move(out);
  emit(events);
  std::sort(swapped_names.begin(), swapped_names.end());
  swapped_names.erase(std::unique(swapped_names.begin(), swapped_names.end()), swapped_names.end());
  result.outcome = SwapOutcome::kSwapped;
  result.secrets = std::move(swapped_names);
  return result;
}

bool SecretBroker::intercepts(std::string_view sandbox, std::string_view host,
                              std::uint16_t port) const {
  std::lock_guard lock(mu_);
  auto it = by_sandbox_.find(std::string(sandbox));
  if (it == by_sandbox_.end()) return false;
  // An expired or revoked token's hosts stay intercepted (until its
  // tombstone goes): the request is then seen and refused as "expired" or
  // "revoked", and audited, rather than carried in a blind tunnel to the
  // real server. A sandbox kept after its task (issue 15, S4) still runs
  // and may still send its revoked token.
  for (const std::string& h : it->second) {
    auto e = tokens_.find(h);
    if (e == tokens_.end()) continue;
    for (const SecretHost& sh : e->second.hosts) {
      if (sh.intercept && sh.port == port && host_matches(sh.host, host)) return true;
    }
  }
  return false;
}

Result<SecretValue> SecretBroker::read_value(std::string_view token, std::string_view sandbox_id) {
  std::vector<BrokerEvent> events;
  std::shared_ptr<const SecretValue> value;
  std::string_view reason;
  std::string name;
  {
    std::lock_guard lock(mu_);
    const auto t = now();
    Check c = check_locked(token, sandbox_id, t, events);
    reason = c.reason;
    if (reason.empty() && c.entry->tier == SecretTier::kHigh) reason = kReasonTierHigh;
    name = c.entry != nullptr ? c.entry->secret : std::string();
    const std::string hash =
        c.entry != nullptr ? hex_prefix(c.entry->hash) : hex_prefix(hash_token(token));
    if (reason.empty()) {
      value = c.entry->value;
      ++counters_.reads;
      events.push_back({std::string(sandbox_id), name, "read", "", "runtime-api", "", hash, t});
    } else {
      refuse_locked(reason);
      events.push_back({std::string(sandbox_id), name, "refused", "", "runtime-api",
                        std::string(reason), hash, t});
    }
  }
  emit(events);
  if (!value) {
    return make_error(ErrorCode::kPermissionDenied,
                      "runtime secret read refused: " + std::string(reason) +
                          (name.empty() ? std::string() : " (secret '" + name + "')"),
                      reason == kReasonTierHigh
                          ? "a tier high secret is only swapped toward its hosts"
                          : "use this sandbox's own, current token");
  }
  try {
    return SecretValue(*value);
  } catch (const std::bad_alloc&) {
    return locked_memory_error("runtime secret read");
  }
}

BrokerCounters SecretBroker::counters() const {
  std::lock_guard lock(mu_);
  BrokerCounters c = counters_;
  c.active_tokens =
      static_cast<std::size_t>(std::count_if(tokens_.begin(), tokens_.end(), [](const auto& kv) {
        return kv.second.state == State::kActive;
      }));
  return c;
}

}  // namespace corral::secrets
