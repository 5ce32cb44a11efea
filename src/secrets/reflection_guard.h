// The response side of broker mode (issue 12, point 7 "responses";
// docs/secrets.md "Responses to a swapped request"). A swap puts a
// secret's value into a request toward one of its hosts; a host that
// reflects the request (an echo service, an error page quoting the
// Authorization field, httpbin's /anything) would send the value back into
// the sandbox, and from there any transform of it could leave. So the
// response to a swapped request is streamed through a RedactStream of a
// set that maps each text the swap sent back to what the sandbox had:
//
//   - the value itself, and its encoded forms the redactor knows (base64 in
//     both alphabets at the three alignments, inside a blob and at its end;
//     percent-encodings; hex in both cases), each back to the same form of
//     the token;
//   - a whole `Authorization: Basic` credential as sent (base64 of
//     user:value), back to the one the sandbox sent (base64 of
//     user:token). A host that decodes it and echoes the password gives
//     the raw value, which the first rule catches.
//
// A base64 form inside a larger blob keeps the one character at each edge
// that mixes the value's bits with a neighbour's (as the redactor does):
// those few bits of the value's first and last byte can come back.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "secrets/redactor.h"
#include "secrets/token_swapper.h"

namespace corral::secrets {

// The set for the response to a request whose swap gave `swapped`. Null
// (no error) when `swapped` is empty. An error (a value shorter than
// kMinRedactedValue, no locked memory) means the response cannot be
// checked: the caller must not relay it.
Result<std::shared_ptr<const RedactionSet>> reflection_set(
    const std::vector<SwappedText>& swapped);

// Sets `Accept-Encoding: identity` in a swapped request head (replacing
// any Accept-Encoding field), so that the response comes uncompressed and
// can be scanned. The old head is wiped (it holds values); the new one is
// built at its final size, so no copy of a value is left behind.
void ask_identity_encoding(std::string& head);

}  // namespace corral::secrets
