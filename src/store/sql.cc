#include "store/sql.h"

namespace corral::sql {

bool is_postgres_url(std::string_view target) {
  return target.starts_with("postgres://") || target.starts_with("postgresql://");
}

std::string number_placeholders(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  int n = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\'' || c == '"') {  // a literal or a quoted name: copied whole ('' and "" included)
      const std::size_t end = text.find(c, i + 1);
      const std::size_t stop = end == std::string_view::npos ? text.size() : end + 1;
      out.append(text.substr(i, stop - i));
      i = stop - 1;
    } else if (c == '-' && i + 1 < text.size() &&
               text[i + 1] == '-') {  // a comment to the line's end
      const std::size_t end = text.find('\n', i);
      const std::size_t stop = end == std::string_view::npos ? text.size() : end;
      out.append(text.substr(i, stop - i));
      i = stop - 1;
    } else if (c == '?' && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9') {
      out += '$';  // ?NNN: numbered already (SQLite's form), kept
    } else if (c == '?') {
      out += '$';
      out += std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace corral::sql
