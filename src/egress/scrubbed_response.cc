#include "egress/scrubbed_response.h"

#include <algorithm>
#include <vector>

#include "egress/proxy_request.h"
#include "base/strings.h"
#include "secrets/secret_value.h"

namespace corral::net {

namespace {

constexpr std::size_t kMaxHead = 64 * 1024;
constexpr std::size_t kChunk = 16 * 1024;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The first content coding of a Content-Encoding list that is not
// identity, if any.
std::optional<std::string> compressed(const http::Headers& headers) {
  for (const auto& h : headers) {
    if (h.name != "content-encoding") continue;
    std::string_view rest = h.value;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string_view item = trim(rest.substr(0, comma));
      if (!item.empty() && ascii_lower(item) != "identity") return std::string(item);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return std::nullopt;
}

}  // namespace

ScrubbedResponse::ScrubbedResponse(std::shared_ptr<const secrets::RedactionSet> set,
                                   ScrubOptions options)
    : set_(std::move(set)), options_(options), body_(set_) {}

std::uint64_t ScrubbedResponse::replaced() const {
  return head_replacements_ + body_.redactions();
}

ScrubbedResponse::State ScrubbedResponse::fail(std::string why) {
  failed_ = true;
  error_ = std::move(why);
  return State::kFailed;
}

void ScrubbedResponse::put(std::string& out, std::string_view bytes) {
  if (bytes.empty()) return;
  started_ = true;
  out.append(bytes);
}

void ScrubbedResponse::emit_body(std::string_view scrubbed, std::string& out) {
  if (scrubbed.empty()) return;
  if (chunked_out_) {
    static constexpr char kHex[] = "0123456789abcdef";
    char size[20];
    std::size_t n = 0;
    for (std::size_t v = scrubbed.size(); v > 0; v >>= 4) size[n++] = kHex[v & 15];
    std::reverse(size, size + n);
    put(out, std::string_view(size, n));
    put(out, "\r\n");
    put(out, scrubbed);
    put(out, "\r\n");
  } else {
    put(out, scrubbed);
  }
}

ScrubbedResponse::State ScrubbedResponse::finish_body(std::string& out) {
  scratch_.clear();
  body_.finish(scratch_);
  emit_body(scratch_, out);
  secrets::wipe(scratch_);
  if (chunked_out_) put(out, "0\r\n\r\n");
  state_ = Body::kDone;
  return State::kDone;
}

ScrubbedResponse::State ScrubbedResponse::on_head(std::string_view head, std::string& out,
                                                  bool& final) {
  final = false;
  http::HeadLimits limits;
  limits.max_head_bytes = kMaxHead;
  limits.max_headers = 256;
  auto parsed = http::parse_response_head(head, limits);
  // The parser's message quotes the head, which may hold the value (cut
  // anywhere): not shown, to the sandbox or the audit record.
  if (!parsed) return fail("malformed response head (its text is not shown)");
  status_ = parsed->status;
  secrets::RedactStream scrub(set_);
  std::string text;
  if (parsed->status >= 100 && parsed->status < 200) {
    if (parsed->status == 101) {
      return fail("the upstream switched protocols (101) in answer to a request that carried a "
                  "secret; corral does not relay that");
    }
    scrub.feed(head, text);
    scrub.finish(text);
    head_replacements_ += scrub.redactions();
    put(out, text);
    secrets::wipe(text);
    return State::kMore;
  }
  if (auto coding = compressed(parsed->headers)) {
    // The coding is named only when it looks like one (a reflecting host
    // could put anything there).
    const bool token_like =
        coding->size() <= 20 && std::all_of(coding->begin(), coding->end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '.';
        });
    return fail("the answer is compressed (Content-Encoding: " +
                (token_like ? *coding : std::string("not shown")) +
                ") although the request, which carried a secret, asked for identity; corral "
                "cannot check it for the secret, so it is not relayed");
  }
  const bool no_body = options_.head_request || parsed->status == 204 || parsed->status == 304;
  const std::vector<std::string> listed = connection_options(parsed->headers);
  std::string rewritten;
  rewritten.reserve(head.size() + 64);
  const std::size_t eol = head.find("\r\n");
  rewritten.append(head.substr(0, eol + 2));
  for (std::size_t at = eol + 2; at < head.size();) {
    const std::size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos || end == at) break;
    const std::string_view line = head.substr(at, end - at);
    at = end + 2;
    std::string name = ascii_lower(line.substr(0, line.find(':')));
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    const bool framing = name == "content-length" || name == "transfer-encoding";
    if (name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
        (framing && !no_body) ||
        (!framing && std::find(listed.begin(), listed.end(), name) != listed.end()))
      continue;
    rewritten.append(line).append("\r\n");
  }
  chunked_out_ = !no_body && options_.chunked_ok;
  if (chunked_out_) rewritten.append("Transfer-Encoding: chunked\r\n");
  rewritten.append("Connection: close\r\n\r\n");
  scrub.feed(rewritten, text);
  scrub.finish(text);
  head_replacements_ += scrub.redactions();
  secrets::wipe(rewritten);
  put(out, text);
  secrets::wipe(text);
  final = true;
  if (no_body) {
    state_ = Body::kDone;
    return State::kDone;
  }
  if (parsed->chunked) {
    state_ = Body::kChunked;
  } else if (parsed->content_length) {
    state_ = Body::kLength;
    left_ = *parsed->content_length;
    if (left_ == 0) return finish_body(out);
  } else {
    state_ = Body::kClose;
  }
  return State::kMore;
}

ScrubbedResponse::State ScrubbedResponse::feed(std::string_view in, std::string& out) {
  if (failed_) return State::kFailed;
  if (state_ == Body::kDone) return State::kDone;  // bytes after the response: dropped
  if (state_ == Body::kHead) {
    auto complete = head_.feed(in);
    if (!complete) return fail("response head larger than 64 KiB");
    while (*complete) {
      std::string head(head_.head());
      std::string rest(head_.leftover());
      head_.clear();
      bool final = false;
      const State s = on_head(head, out, final);
      secrets::wipe(head);
      if (s != State::kMore || final) {
        if (s != State::kMore) {
          secrets::wipe(rest);
          return s;
        }
        const State b = feed(rest, out);
        secrets::wipe(rest);
        return b;
      }
      complete = head_.feed(rest);
      secrets::wipe(rest);
      if (!complete) return fail("response head larger than 64 KiB");
    }
    return State::kMore;
  }
  scratch_.clear();
  switch (state_) {
    case Body::kLength: {
      const std::string_view piece =
          in.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(left_, in.size())));
      left_ -= piece.size();
      body_.feed(piece, scratch_);
      emit_body(scratch_, out);
      secrets::wipe(scratch_);
      if (left_ == 0) return finish_body(out);
      return State::kMore;
    }
    case Body::kChunked: {
      std::string data;
      std::size_t used = 0;
      while (used < in.size() && !chunks_.done()) {
        auto n = chunks_.decode(in.substr(used), data, kChunk);
        if (!n) {
          secrets::wipe(data);
          return fail("malformed chunked response body");
        }
        used += *n;
        if (!data.empty()) {
          body_.feed(data, scratch_);
          secrets::wipe(data);
          data.clear();
        } else if (*n == 0) {
          break;
        }
      }
      emit_body(scratch_, out);
      secrets::wipe(scratch_);
      if (chunks_.done()) return finish_body(out);
      return State::kMore;
    }
    case Body::kClose:
      body_.feed(in, scratch_);
      emit_body(scratch_, out);
      secrets::wipe(scratch_);
      return State::kMore;
    case Body::kHead:
    case Body::kDone:
      break;
  }
  return State::kDone;
}

ScrubbedResponse::State ScrubbedResponse::end_of_stream(std::string& out) {
  if (failed_) return State::kFailed;
  switch (state_) {
    case Body::kDone:
      return State::kDone;
    case Body::kClose:
      return finish_body(out);
    case Body::kHead:
      return fail(status_ == 0 ? "the upstream closed without an answer"
                               : "the upstream ended inside a response head");
    case Body::kLength:
    case Body::kChunked:
      // What is held back (perhaps the start of a value) stays held: the
      // client sees a cut answer (no last chunk).
      return fail("the upstream ended inside the response body");
  }
  return State::kFailed;
}

ScrubRelayResult relay_scrubbed(ScrubbedResponse& response, const ScrubIo& io,
                                std::string_view first) {
  ScrubRelayResult r;
  std::string out;
  std::string buf(kChunk, '\0');
  using State = ScrubbedResponse::State;
  State s = first.empty() ? State::kMore : response.feed(first, out);
  for (;;) {
    if (!out.empty()) {
      const std::size_t size = out.size();
      const bool written = io.write(out);
      secrets::wipe(out);
      out.clear();
      if (!written) {
        r.end = "the client stopped reading";
        break;
      }
      r.bytes_down += size;
    }
    if (s == State::kDone) {
      r.end = "closed";
      break;
    }
    if (s == State::kFailed) {
      r.refused = true;
      r.end = response.error();
      break;
    }
    const long n = io.read(buf.data(), buf.size());
    if (n > 0) {
      s = response.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)), out);
    } else if (n == 0) {
      s = response.end_of_stream(out);
    } else {
      r.end = n == -2 ? "idle timeout" : "the upstream failed or the client went away";
      break;
    }
  }
  secrets::wipe(buf);
  r.answered = response.started();
  r.status = response.status();
  r.replaced = response.replaced();
  return r;
}

}  // namespace corral::net
