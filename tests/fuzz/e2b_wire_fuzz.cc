// Fuzz target for the E2B facade's wire parsers (src/e2b): every byte of
// an envd request and every control-plane body comes from any client that
// holds a token or a key. The first input byte picks the mode (modulo 4):
//   0  the rest is a stream cut into pieces (each piece's length is its
//      first byte): EnvelopeReader gives envelopes that, written back, are
//      exactly the bytes it consumed, or stops with a named error
//   1  single_envelope: an error, or the one message whose envelope is the
//      input
//   2  the rest is an envd request message: each parser takes it or gives
//      a printable error; what it takes holds its promises
//   3  the rest is a control-plane body or a metadata filter: the same
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "e2b/connect_protocol.h"
#include "e2b/control_messages.h"
#include "e2b/envd_messages.h"
#include "fuzz_checks.h"

namespace {

using corral::fuzz::require;
namespace e2b = corral::e2b;

void fuzz_reader(std::string_view in) {
  e2b::EnvelopeReader reader;
  std::string consumed_again;
  std::size_t fed = 0;
  while (!in.empty()) {
    std::size_t n = static_cast<unsigned char>(in[0]);
    in.remove_prefix(1);
    n = std::min(n, in.size());
    auto st = reader.feed(in.substr(0, n));
    fed += n;
    in.remove_prefix(n);
    while (auto env = reader.next()) {
      require((env->flags & e2b::kEnvelopeCompressed) == 0);
      require(env->message.size() <= e2b::kMaxEnvelope);
      consumed_again += e2b::envelope(env->flags, env->message);
    }
    if (!st) {
      require(!st.error().message.empty());
      return;
    }
  }
  require(consumed_again.size() <= fed);
}

void fuzz_single(std::string_view in) {
  auto msg = e2b::single_envelope(in);
  if (!msg) {
    require(!msg.error().message.empty());
    return;
  }
  require(e2b::envelope(0, *msg) == in);
}

void fuzz_envd(std::string_view in) {
  if (auto r = e2b::parse_start_request(in)) require(!r->process.cmd.empty());
  if (auto r = e2b::parse_selector_request(in)) require(r->pid.has_value() != r->tag.has_value());
  if (auto r = e2b::parse_send_input(in)) require(r->process.pid || r->process.tag);
  if (auto r = e2b::parse_stream_input_event(in)) {
    using Kind = e2b::StreamInputEvent::Kind;
    if (r->kind == Kind::kStart) require(r->process.pid.has_value() != r->process.tag.has_value());
    if (r->kind != Kind::kData) require(r->data.empty() && !r->pty);
  }
  if (auto r = e2b::parse_update(in)) {
    require(r->process.pid.has_value() != r->process.tag.has_value());
    if (r->pty) require(r->pty->cols >= 1 && r->pty->rows >= 1);
  }
  if (auto r = e2b::parse_send_signal(in)) require(r->signal == 9 || r->signal == 15);
  if (auto r = e2b::parse_path_request(in)) require(!r->empty());
  if (auto r = e2b::parse_list_dir(in)) require(r->depth >= 1 && !r->path.empty());
  if (auto r = e2b::parse_move(in)) require(!r->source.empty() && !r->destination.empty());
  (void)e2b::parse_watch_dir(in);
  if (auto r = e2b::parse_watcher_id(in)) require(!r->empty());
  (void)e2b::parse_connect_error(in);
}

void fuzz_control(std::string_view in) {
  if (auto r = e2b::parse_create_request(in)) {
    require(!r->template_id.empty());
    require(!r->timeout_s || *r->timeout_s >= 0);
  } else {
    require(!r.error().message.empty());
  }
  (void)e2b::parse_timeout_body(in, true);
  if (auto m = e2b::parse_metadata_filter(in)) {
    for (const auto& [k, v] : *m) require(!k.empty());
  }
  if (auto d = e2b::percent_decode(in)) require(d->size() <= in.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      fuzz_reader(in);
      break;
    case 1:
      fuzz_single(in);
      break;
    case 2:
      fuzz_envd(in);
      break;
    default:
      fuzz_control(in);
      break;
  }
  return 0;
}
