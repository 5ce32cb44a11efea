// The data phase of a plain HTTP request through the egress proxy whose
// head carried a swapped-in secret (issue 12, point 7 "responses"). Such a
// request does not take the splice relay (splice_relay.h), which moves
// bytes without looking at them: its head goes up (then is wiped), its
// body follows (Content-Length or chunked, up to its end and no further),
// and the answer comes back through a ScrubbedResponse
// (scrubbed_response.h), which writes whatever the swap put in back as the
// token. Every other connection keeps the splice relay.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "egress/scrubbed_response.h"
#include "egress/splice_relay.h"
#include "secrets/redactor.h"

namespace corral::net {

struct SwappedRelaySpec {
  int client = -1;  // non-blocking sockets, connected; not closed here
  int upstream = -1;
  std::string head;  // holds values: sent first, then wiped
  std::string body;  // the start of the request body, already read
  RequestFraming framing = RequestFraming::kLength;
  std::uint64_t length = 0;
  std::chrono::milliseconds idle_timeout{10'000};
  std::shared_ptr<const secrets::RedactionSet> reflection;
  ScrubOptions scrub;
  // The request asked `Expect: 100-continue` and has a body: the client is
  // told to go on at once (as TLS interception does), since its body is
  // forwarded before the answer is read.
  bool expect_continue = false;
};

struct SwappedRelayResult {
  RelayResult relay;      // bytes each way and how it ended
  bool refused = false;   // the answer was refused (compressed, ...): relay.end says why
  bool answered = false;  // something reached the client
  int status = 0;
  std::uint64_t replaced = 0;  // texts written back as their token
};

// Blocks, bounded by the idle timeout. Shuts the client's side down at
// the end, except after a refused answer of which the client has had
// nothing (the caller answers it).
SwappedRelayResult relay_swapped(SwappedRelaySpec spec);

}  // namespace corral::net
