// multipart/form-data reader and writer (multipart.h).
#include "http/multipart.h"

#include <string.h>

#include <algorithm>
#include <cstdio>

#include "base/random.h"
#include "http/char_class.h"

namespace corral::http {

namespace {

using chars::quote;
using chars::trim_ows;

tl::unexpected<Error> bad(std::string message, std::string hint = {}) {
  return make_error(ErrorCode::kInvalidArgument, std::move(message), std::move(hint));
}

std::string part_label(std::size_t index) { return "part " + std::to_string(index + 1); }

// RFC 2046 bcharsnospace, and the space allowed inside a boundary.
bool is_bchar(unsigned char c) {
  return chars::is_alnum(c) || c == ' ' ||
         std::string_view("'()+_,-./:=?").find(static_cast<char>(c)) != std::string_view::npos;
}

// A header parameter list "; a=b; c="d"" (RFC 9110 5.6.6) after the
// leading value, as name (lowercased) / value pairs; a quoted-string is
// unquoted (quoted-pair escapes resolved).
struct Param {
  std::string name;
  std::string value;
};

Result<std::vector<Param>> read_params(std::string_view s, std::string_view what) {
  std::vector<Param> params;
  std::size_t i = 0;
  auto skip_ows = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  };
  for (;;) {
    skip_ows();
    if (i == s.size()) return params;
    if (s[i] != ';') return bad(std::string(what) + ": expected ';' before a parameter");
    ++i;
    skip_ows();
    std::size_t start = i;
    while (i < s.size() && chars::is_tchar(static_cast<unsigned char>(s[i]))) ++i;
    if (i == start || i == s.size() || s[i] != '=')
      return bad(std::string(what) + ": a parameter is not name=value");
    Param p{ascii_lower(s.substr(start, i - start)), {}};
    ++i;
    if (i < s.size() && s[i] == '"') {
      ++i;
      for (;;) {
        if (i == s.size()) return bad(std::string(what) + ": a quoted value is not closed");
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"') break;
        if (c == '\\') {
          if (++i == s.size()) return bad(std::string(what) + ": a quoted value is not closed");
          c = static_cast<unsigned char>(s[i]);
          if (c != '\t' && (c < 0x20 || c == 0x7f))
            return bad(std::string(what) + ": a control byte in a quoted value");
        } else if (c != '\t' && (c < 0x20 || c == 0x7f)) {
          return bad(std::string(what) + ": a control byte in a quoted value");
        }
        p.value.push_back(static_cast<char>(c));
        ++i;
      }
      ++i;
    } else {
      start = i;
      while (i < s.size() && chars::is_tchar(static_cast<unsigned char>(s[i]))) ++i;
      if (i == start) return bad(std::string(what) + ": parameter " + p.name + " has no value");
      p.value = std::string(s.substr(start, i - start));
    }
    for (const Param& q : params)
      if (q.name == p.name) return bad(std::string(what) + ": parameter " + p.name + " twice");
    params.push_back(std::move(p));
  }
}

// "type/subtype" before any parameter, and the rest.
std::pair<std::string_view, std::string_view> split_media_type(std::string_view v) {
  v = trim_ows(v);
  std::size_t semi = v.find(';');
  return {trim_ows(v.substr(0, semi)),
          semi == std::string_view::npos ? std::string_view() : v.substr(semi)};
}

// One part's header section (without its closing blank line).
Status read_part_head(std::string_view head, std::size_t index, FormPart& part) {
  const std::string label = part_label(index);
  bool disposition = false, content_type = false, encoding = false;
  while (!head.empty()) {
    std::size_t eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    head = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
    if (line.empty() || line.front() == ' ' || line.front() == '\t')
      return bad(label + ": a header line is empty or folded (obs-fold is not accepted)");
    std::size_t colon = line.find(':');
    std::string_view name = line.substr(0, colon);
    if (colon == std::string_view::npos || !chars::is_token(name))
      return bad(label + ": a header line is not \"Name: value\"");
    std::string_view value = trim_ows(line.substr(colon + 1));
    if (!chars::is_field_value(value))
      return bad(label + ": header " + quote(name) + " holds a control byte");
    if (iequals(name, "content-disposition")) {
      if (disposition) return bad(label + ": Content-Disposition twice");
      disposition = true;
      auto [type, rest] = split_media_type(value);
      if (!iequals(type, "form-data"))
        return bad(label + ": Content-Disposition is " + quote(type) + ", not form-data");
      auto params = read_params(rest, label + ": Content-Disposition");
      if (!params) return tl::unexpected(params.error());
      bool named = false;
      for (Param& p : *params) {
        if (p.name == "name") {
          named = true;
          part.name = std::move(p.value);
        } else if (p.name == "filename") {
          part.filename = std::move(p.value);
        } else {
          // filename* (RFC 7578 4.2 forbids it) and anything unknown.
          return bad(
              label + ": Content-Disposition parameter " + quote(p.name) + " is not accepted",
              "send name=\"...\" and, optionally, filename=\"...\"");
        }
      }
      if (!named || part.name.empty())
        return bad(label + ": Content-Disposition has no name=\"...\"");
    } else if (iequals(name, "content-type")) {
      if (content_type) return bad(label + ": Content-Type twice");
      content_type = true;
      part.content_type = std::string(value);
    } else if (iequals(name, "content-transfer-encoding")) {
      if (encoding) return bad(label + ": Content-Transfer-Encoding twice");
      encoding = true;
      if (!iequals(value, "binary") && !iequals(value, "8bit") && !iequals(value, "7bit"))
        return bad(label + ": Content-Transfer-Encoding " + quote(value) + " is not accepted",
                   "send the part's bytes as they are (RFC 7578 4.7), without an encoding");
    }
    // Any other field: ignored (RFC 7578 4.8), its syntax checked above.
  }
  if (!disposition)
    return bad(label + ": no Content-Disposition",
               "each part needs Content-Disposition: form-data; name=\"...\"");
  return ok();
}

}  // namespace

bool is_form_data(std::string_view content_type) {
  return iequals(split_media_type(content_type).first, "multipart/form-data");
}

Result<std::string> form_data_boundary(std::string_view content_type) {
  auto [type, rest] = split_media_type(content_type);
  if (!iequals(type, "multipart/form-data"))
    return bad("Content-Type " + quote(type) + " is not multipart/form-data");
  auto params = read_params(rest, "Content-Type");
  if (!params) return tl::unexpected(params.error());
  for (const Param& p : *params) {
    if (p.name != "boundary") continue;
    const std::string& b = p.value;
    bool fine = !b.empty() && b.size() <= 70 && b.back() != ' ';
    for (char c : b) fine = fine && is_bchar(static_cast<unsigned char>(c));
    if (!fine)
      return bad("Content-Type: the boundary is not 1-70 of RFC 2046's characters",
                 "use letters, digits and '()+_,-./:=? (quoted if it has any but - and _)");
    return b;
  }
  return bad("Content-Type: multipart/form-data without a boundary parameter");
}

FormDataReader::FormDataReader(std::string_view boundary, FormLimits limits)
    : dash_("--" + std::string(boundary)), delimiter_("\r\n" + dash_), limits_(limits) {
  if (boundary.empty())
    error_ = Error{ErrorCode::kInvalidArgument, "the multipart boundary is empty"};
}

Result<std::size_t> FormDataReader::step(std::string_view s, bool end, FormDataSink& sink) {
  switch (state_) {
    case State::kFirstBoundary: {
      const bool whole = s.size() >= dash_.size();
      if (!(whole ? s.starts_with(dash_) : std::string_view(dash_).starts_with(s)) ||
          (!whole && end))
        return bad("the body does not start with its boundary line (--boundary CRLF)",
                   "send no preamble before the first part");
      if (!whole) return 0;
      state_ = State::kAfterBoundary;
      return dash_.size();
    }
    case State::kAfterBoundary: {
      if (s.starts_with("--")) {
        if (parts_ == 0) return bad("the body has no part");
        state_ = State::kEpilogue;
        return 2;
      }
      if (s.starts_with("\r\n")) {
        if (parts_ == limits_.max_parts)
          return make_error(ErrorCode::kResourceExhausted,
                            "more than " + std::to_string(limits_.max_parts) + " parts");
        state_ = State::kHead;
        return 2;
      }
      if (!end && (s.empty() || (s.size() == 1 && (s[0] == '-' || s[0] == '\r')))) return 0;
      return bad(part_label(parts_) +
                     ": its boundary line does not end with CRLF (or the boundary occurs inside "
                     "the part before it)",
                 "choose a boundary that occurs in no part's bytes");
    }
    case State::kHead: {
      // The header section ends at the first empty line (it may be the
      // first line: a part without headers, refused by read_part_head).
      std::size_t blank = 0, start = 2;
      if (!s.starts_with("\r\n")) {
        blank = s.find("\r\n\r\n");
        start = blank + 4;
      }
      const std::size_t max = limits_.max_part_head_bytes;
      if (blank == std::string_view::npos) {
        // A blank line found later starts at s.size() - 3 or after.
        if (s.size() >= max + 4 || (end && s.size() > max))
          return make_error(ErrorCode::kResourceExhausted,
                            part_label(parts_) + ": its header section is longer than " +
                                std::to_string(max) + " bytes");
        if (end)
          return bad(part_label(parts_) + ": its header section is not closed by an empty line");
        return 0;
      }
      if (blank > max)
        return make_error(ErrorCode::kResourceExhausted,
                          part_label(parts_) + ": its header section is longer than " +
                              std::to_string(max) + " bytes");
      FormPart part;
      CORRAL_TRY(read_part_head(s.substr(0, blank), parts_, part));
      ++parts_;
      CORRAL_TRY(sink.part(part));
      state_ = State::kBody;
      return start;
    }
    case State::kBody: {
      const void* hit = memmem(s.data(), s.size(), delimiter_.data(), delimiter_.size());
      if (hit != nullptr) {
        const std::size_t at = static_cast<const char*>(hit) - s.data();
        CORRAL_TRY(sink.data(s.substr(0, at)));  // may be empty: where the part ends
        CORRAL_TRY(sink.part_end());
        state_ = State::kAfterBoundary;
        return at + delimiter_.size();
      }
      if (end)
        return bad(part_label(parts_ - 1) + ": no boundary line ends it (the body is cut short?)");
      // The last bytes may be the start of the delimiter: they wait.
      const std::size_t ready = s.size() - std::min(s.size(), delimiter_.size() - 1);
      if (ready > 0) CORRAL_TRY(sink.data(s.substr(0, ready)));
      return ready;
    }
    case State::kEpilogue:
      if (s.empty()) return 0;
      if (s.size() > 2 || !std::string_view("\r\n").starts_with(s) || (end && s.size() < 2))
        return bad("bytes follow the closing boundary line", "end the body after --boundary--");
      if (s.size() < 2) return 0;
      state_ = State::kDone;
      return 2;
    case State::kDone:
      if (s.empty()) return 0;
      return bad("bytes follow the closing boundary line", "end the body after --boundary--");
  }
  return 0;
}

Status FormDataReader::run(std::string_view s, bool end, FormDataSink& sink,
                           std::size_t& consumed) {
  consumed = 0;
  for (;;) {
    auto n = step(s.substr(consumed), end, sink);
    if (!n) {
      error_ = n.error();
      return tl::unexpected(n.error());
    }
    if (*n == 0) return ok();
    consumed += *n;
  }
}

Status FormDataReader::feed(std::string_view bytes, FormDataSink& sink) {
  if (error_) return tl::unexpected(*error_);
  std::size_t consumed = 0;
  if (held_.empty()) {
    // Read straight from the caller's bytes; keep only what is left.
    CORRAL_TRY(run(bytes, false, sink, consumed));
    held_.assign(bytes.substr(consumed));
    return ok();
  }
  held_.append(bytes);
  CORRAL_TRY(run(held_, false, sink, consumed));
  held_.erase(0, consumed);
  return ok();
}

Status FormDataReader::finish(FormDataSink& sink) {
  if (error_) return tl::unexpected(*error_);
  std::size_t consumed = 0;
  CORRAL_TRY(run(held_, true, sink, consumed));
  held_.erase(0, consumed);
  if (state_ != State::kDone && state_ != State::kEpilogue) {
    error_ = Error{ErrorCode::kInvalidArgument, "the multipart body is cut short"};
    return tl::unexpected(*error_);
  }
  return ok();
}

namespace {

// Gathers the parts of a body fed in one piece: their bytes are views into it.
class PartCollector : public FormDataSink {
 public:
  std::vector<FormPart> parts;
  Status part(const FormPart& head) override {
    parts.push_back(head);
    return ok();
  }
  Status data(std::string_view bytes) override {
    std::string_view& body = parts.back().body;
    // One feed: each piece follows the last in the same buffer.
    body =
        body.data() == nullptr ? bytes : std::string_view(body.data(), body.size() + bytes.size());
    return ok();
  }
  Status part_end() override { return ok(); }
};

}  // namespace

Result<std::vector<FormPart>> parse_form_data(std::string_view body, std::string_view boundary,
                                              const FormLimits& limits) {
  FormDataReader reader(boundary, limits);
  PartCollector collector;
  CORRAL_TRY(reader.feed(body, collector));
  CORRAL_TRY(reader.finish(collector));
  return std::move(collector.parts);
}

std::string new_form_boundary(const std::vector<std::string_view>& bodies) {
  for (;;) {
    unsigned char raw[16];
    fill_random(raw, sizeof raw);
    std::string b = "corral-";
    char hex[3];
    for (unsigned char c : raw) {
      std::snprintf(hex, sizeof hex, "%02x", c);
      b += hex;
    }
    const std::string delimiter = "\r\n--" + b;
    bool clear = true;
    for (std::string_view body : bodies)
      clear = clear &&
              memmem(body.data(), body.size(), delimiter.data(), delimiter.size()) == nullptr &&
              !body.starts_with("--" + b);
    if (clear) return b;
  }
}

std::string write_form_data(const std::vector<FormPart>& parts, std::string_view boundary) {
  std::size_t size = 0;
  for (const FormPart& p : parts) size += p.body.size() + p.name.size() + 128 + boundary.size();
  std::string out;
  out.reserve(size + boundary.size() + 8);
  for (const FormPart& p : parts) {
    out += "--";
    out += boundary;
    out += "\r\nContent-Disposition: form-data; name=\"";
    out += p.name;
    out += '"';
    if (p.filename) {
      out += "; filename=\"";
      out += *p.filename;
      out += '"';
    }
    out += "\r\n";
    if (!p.content_type.empty()) {
      out += "Content-Type: ";
      out += p.content_type;
      out += "\r\n";
    }
    out += "\r\n";
    out += p.body;
    out += "\r\n";
  }
  out += "--";
  out += boundary;
  out += "--\r\n";
  return out;
}

}  // namespace corral::http
