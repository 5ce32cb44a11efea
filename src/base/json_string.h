// A JSON string literal written straight from bytes. It is the one JSON
// string escaper of corral: the API's hot path (every chunk of a streamed
// exec's output becomes one ndjson line, api::exec_output_json) and the
// layers that must not link the JSON library (http's error bodies) use it.
// Building a json value and dumping it walks each byte through the JSON
// library's UTF-8 state machine (about 6 s of CPU per GiB); this scans
// sixteen bytes at a time (SSE2) for the few that need escaping and copies
// the runs between them.
#pragma once

#include <string>
#include <string_view>

namespace corral {

// Appends `utf8` (valid UTF-8: see is_valid_utf8 in base/utf8.h) to `out`
// as a JSON string, quotes included, escaped exactly as the API's JSON
// library writes it (no ensure_ascii): `"` and `\` escaped, \b \f \n \r
// \t, other bytes below 0x20 as \u00xx, everything else as is.
void append_json_string(std::string& out, std::string_view utf8);

// The same for bytes that may not be UTF-8 (messages that quote what a
// client or a sandbox sent): valid UTF-8 as above; otherwise every byte
// above 0x7f becomes U+FFFD, as in every other JSON text of corral
// (base/json_text.h), never Latin-1 characters.
void append_json_string_lossy(std::string& out, std::string_view bytes);

}  // namespace corral
