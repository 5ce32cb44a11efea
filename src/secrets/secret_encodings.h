// The encoded forms of a secret value that the redactor looks for
// (issue 5, S3): a value printed as base64 (inside a larger blob, at any
// alignment), percent-encoded, or as hex must be redacted like the value.
//
// Every function returns the forms as std::string temporaries: the caller
// wipes them (wipe_all) once they are compiled into the redactor.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace corral::secrets {

enum class Base64Alphabet { kStandard, kUrlSafe };

// The characters of base64(P + value + S) that depend only on `value`, for
// any prefix P with P.size() % 3 == alignment (0, 1 or 2) and any suffix
// S: the characters at the edges, which mix bits of the value with bits of
// its neighbours (or padding), are left out. No '=' padding. For an
// 8-byte value this is 8 to 10 characters.
std::string base64_aligned(std::string_view value, int alignment, Base64Alphabet alphabet);

// The value, then `suffix`, at the end of a base64 blob (prefix P as
// above): base64_aligned's characters plus the last ones and the '='
// padding, which depend on nothing else there. With suffix "\n" this is
// what `echo "$KEY" | base64` prints.
std::string base64_ending(std::string_view value, int alignment, Base64Alphabet alphabet,
                          std::string_view suffix);

// The three alignments in both alphabets, inside a blob and at its end
// (with and without a final newline), and the value alone wrapped at 76
// characters as `base64` prints it; without duplicates (a value whose
// base64 holds no '+' or '/' has the same forms in both).
std::vector<std::string> base64_forms(std::string_view value);

// Percent-encodings that differ from the value itself: every byte outside
// RFC 3986's unreserved set [A-Za-z0-9-._~] as %XX with upper-case and with
// lower-case hex digits; with space as '+' (HTML forms, Python quote_plus,
// Go QueryEscape); keeping !'()* as they are (JavaScript's
// encodeURIComponent); keeping '/' (Python's quote default). Empty for a
// value made of unreserved characters only.
std::vector<std::string> url_forms(std::string_view value);

// Lower-case and upper-case hex of every byte.
std::vector<std::string> hex_forms(std::string_view value);

// The value and all the forms above, without duplicates.
std::vector<std::string> redaction_forms(std::string_view value);

// Wipes (secrets::wipe) and clears every string.
void wipe_all(std::vector<std::string>& strings) noexcept;

}  // namespace corral::secrets
