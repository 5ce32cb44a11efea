// Fuzz target for the multipart/form-data reader (src/http/multipart.h):
// a task submit's raw input bytes come through it from any API client.
// The first input byte picks the mode (its value modulo 2):
//   0  the rest is a body under the boundary "b": a read either fails with
//      a printable, named error, or gives parts whose bodies lie inside the
//      input in order, each with a name; writing them back under "b" and
//      reading again gives the same parts (the reader and writer agree).
//      The same body fed to the streaming FormDataReader in pieces cut
//      where the input's own bytes say gives the same parts, or the same
//      error code.
//   1  the rest is cut into parts at 0xff bytes (name, then body): written
//      under a boundary none of them holds, they read back exactly.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_checks.h"
#include "http/multipart.h"

namespace {

using corral::fuzz::printable;
using corral::fuzz::require;
namespace http = corral::http;

bool writable_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e || c == '"' || c == '\\') return false;
  }
  return true;
}

void same_parts(const std::vector<http::FormPart>& a, const std::vector<http::FormPart>& b) {
  require(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    require(a[i].name == b[i].name);
    require(a[i].filename == b[i].filename);
    require(a[i].content_type == b[i].content_type);
    require(a[i].body == b[i].body);
  }
}

struct Gathered : http::FormDataSink {
  std::vector<http::FormPart> heads;
  std::vector<std::string> bodies;
  corral::Status part(const http::FormPart& head) override {
    heads.push_back(head);
    bodies.emplace_back();
    return corral::ok();
  }
  corral::Status data(std::string_view bytes) override {
    require(!bodies.empty());
    bodies.back().append(bytes);
    return corral::ok();
  }
  corral::Status part_end() override { return corral::ok(); }
};

// `in` fed in pieces whose sizes come from its bytes (1-64).
void same_when_streamed(std::string_view in, const http::FormLimits& limits,
                        const corral::Result<std::vector<http::FormPart>>& whole) {
  http::FormDataReader reader("b", limits);
  Gathered got;
  corral::Status st = corral::ok();
  std::size_t pos = 0, salt = in.size();
  while (st && pos < in.size()) {
    salt = salt * 31 + static_cast<unsigned char>(in[pos]);
    const std::size_t n = std::min<std::size_t>(in.size() - pos, 1 + salt % 64);
    st = reader.feed(in.substr(pos, n), got);
    pos += n;
  }
  if (st) st = reader.finish(got);
  require(st.has_value() == whole.has_value());
  if (!st) {
    require(st.error().code == whole.error().code);
    return;
  }
  require(got.heads.size() == whole->size());
  for (std::size_t i = 0; i < whole->size(); ++i) {
    require(got.heads[i].name == (*whole)[i].name);
    require(got.heads[i].filename == (*whole)[i].filename);
    require(got.heads[i].content_type == (*whole)[i].content_type);
    require(got.bodies[i] == (*whole)[i].body);
  }
}

void fuzz_read(std::string_view in) {
  http::FormLimits limits;
  limits.max_parts = 16;
  limits.max_part_head_bytes = 256;
  auto parts = http::parse_form_data(in, "b", limits);
  same_when_streamed(in, limits, parts);
  if (!parts) {
    require(parts.error().code == corral::ErrorCode::kInvalidArgument ||
            parts.error().code == corral::ErrorCode::kResourceExhausted);
    require(!parts.error().message.empty() && printable(parts.error().message) &&
            printable(parts.error().hint));
    return;
  }
  require(!parts->empty() && parts->size() <= limits.max_parts);
  const char* last = in.data();
  for (const auto& p : *parts) {
    require(!p.name.empty());
    require(p.body.data() >= last && p.body.data() + p.body.size() <= in.data() + in.size());
    // A part's bytes never hold the delimiter that would have ended it.
    require(p.body.find("\r\n--b") == std::string_view::npos);
    last = p.body.data() + p.body.size();
  }
  for (const auto& p : *parts) {
    if (!writable_name(p.name) || (p.filename && !writable_name(*p.filename)) ||
        p.content_type.find_first_of("\r\n") != std::string::npos)
      return;
  }
  const std::string again = http::write_form_data(*parts, "b");
  // The writer's heads are canonical ("; name=", its own Content-Type
  // line), so a head the reader took at the limit may come back a few
  // bytes longer: the property is the round trip, not the head's size.
  http::FormLimits relaxed = limits;
  relaxed.max_part_head_bytes = limits.max_part_head_bytes + 128;
  auto back = http::parse_form_data(again, "b", relaxed);
  require(back.has_value());
  same_parts(*parts, *back);
}

void fuzz_write(std::string_view in) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    std::size_t cut = in.find('\xff', start);
    fields.emplace_back(in.substr(start, cut == std::string_view::npos ? cut : cut - start));
    if (cut == std::string_view::npos) break;
    start = cut + 1;
  }
  std::vector<http::FormPart> parts;
  std::vector<std::string_view> bodies;
  for (std::size_t i = 0; i + 1 < fields.size() && parts.size() < 16; i += 2) {
    if (!writable_name(fields[i])) return;
    parts.push_back({fields[i], std::nullopt, "", fields[i + 1]});
    bodies.push_back(fields[i + 1]);
  }
  if (parts.empty()) return;
  const std::string boundary = http::new_form_boundary(bodies);
  const std::string written = http::write_form_data(parts, boundary);
  auto back = http::parse_form_data(written, boundary);
  require(back.has_value());
  same_parts(parts, *back);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0)
    fuzz_read(in);
  else
    fuzz_write(in);
  return 0;
}
