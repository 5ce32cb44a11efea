// multipart/form-data (RFC 7578 on RFC 2046's multipart syntax), read from
// a body held in memory, and written for our own clients.
//
// The reader is strict, because its input comes from any API client and
// a lenient reader is where two parsers start to disagree about where a
// part ends: the body starts with the first boundary line (no preamble),
// every boundary line ends with CRLF at once (no transport padding), no
// byte follows the closing boundary but one optional CRLF, a boundary
// inside a part is an error (never a silent split), every part carries
// exactly one Content-Disposition "form-data" with a name, and a
// Content-Transfer-Encoding other than an identity one is refused (RFC
// 7578 4.7 deprecates it; ignoring it would store encoded bytes as if they
// were the content). Other header fields are checked for syntax and then
// ignored, as RFC 7578 4.8 asks. ADR 0014 says why this is ours.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::http {

struct FormPart {
  std::string name;                     // Content-Disposition's name
  std::optional<std::string> filename;  // its filename, when given
  std::string content_type;             // as sent (trimmed); empty when absent
  std::string_view body;                // the part's bytes, inside the parsed body
};

struct FormLimits {
  std::size_t max_parts = 1024;
  std::size_t max_part_head_bytes = 8 * 1024;  // the header lines of one part
};

// The boundary of a Content-Type value such as
// `multipart/form-data; boundary="----x"`. Not multipart/form-data, no
// boundary, two boundaries, or one that RFC 2046 does not allow (1-70 of
// its bchars, not ending in a space) is an error saying what to send.
Result<std::string> form_data_boundary(std::string_view content_type);

// True when a Content-Type value names multipart/form-data (parameters
// aside): the body is to be read with form_data_boundary + parse_form_data.
bool is_form_data(std::string_view content_type);

// The parts of `body`, in order; each part's body views into `body`.
// Errors are kInvalidArgument (kResourceExhausted past `limits`), with a
// printable message naming the part by its position.
Result<std::vector<FormPart>> parse_form_data(std::string_view body, std::string_view boundary,
                                              const FormLimits& limits = {});

// A boundary that occurs in none of `bodies` (random; checked).
std::string new_form_boundary(const std::vector<std::string_view>& bodies);

// A multipart/form-data body of `parts` under `boundary` (which must not
// occur in any part's body: new_form_boundary). Names and filenames must
// be printable ASCII without '"' or '\\' (ours always are).
std::string write_form_data(const std::vector<FormPart>& parts, std::string_view boundary);

}  // namespace corral::http
