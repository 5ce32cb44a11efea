// multipart/form-data (RFC 7578 on RFC 2046's multipart syntax), read as a
// stream (FormDataReader: a body of any size in bounded memory, each part's
// bytes handed on as they arrive) or from a body held in memory
// (parse_form_data, the same reader fed once), and written for our own
// clients.
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

// Where a FormDataReader hands what it reads. A part's head comes first
// (its body empty), then its bytes in one or more pieces, then its end. An
// error returned stops the reader; it is what feed() returns.
class FormDataSink {
 public:
  virtual ~FormDataSink() = default;
  virtual Status part(const FormPart& head) = 0;
  virtual Status data(std::string_view bytes) = 0;
  virtual Status part_end() = 0;
};

// The reader fed a body in pieces cut anywhere. It holds back only what
// may be the start of a delimiter or an unfinished part head (at most
// max_part_head_bytes), so its memory does not grow with the body. The
// rules and errors are those of parse_form_data below; a part's bytes
// handed to the sink before an error stay handed: a caller that wrote
// them somewhere undoes that itself.
class FormDataReader {
 public:
  FormDataReader(std::string_view boundary, FormLimits limits = {});
  // The next piece of the body. After an error every call returns it.
  Status feed(std::string_view bytes, FormDataSink& sink);
  // The body ended: an error unless the closing boundary line was read.
  Status finish(FormDataSink& sink);

 private:
  enum class State { kFirstBoundary, kAfterBoundary, kHead, kBody, kEpilogue, kDone };
  // Reads from the front of `s`: how much it consumed (0: it needs more
  // input; never 0 when `end`, the body having ended there).
  Result<std::size_t> step(std::string_view s, bool end, FormDataSink& sink);
  Status run(std::string_view s, bool end, FormDataSink& sink, std::size_t& consumed);

  std::string dash_;       // "--" boundary
  std::string delimiter_;  // CRLF "--" boundary
  FormLimits limits_;
  State state_ = State::kFirstBoundary;
  std::size_t parts_ = 0;  // parts whose head was read
  std::string held_;       // bytes read but not yet consumed
  std::optional<Error> error_;
};

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
