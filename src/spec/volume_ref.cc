#include "spec/volume_ref.h"

#include "base/strings.h"

namespace corral {

bool is_valid_volume_name(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto lower_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_digit(name.front())) return false;
  for (char c : name) {
    if (!lower_digit(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

Result<std::string> normalize_volume_subpath(std::string_view subpath) {
  if (subpath.size() > 4095)
    return make_error(ErrorCode::kInvalidArgument, "the sub-path is longer than 4095 bytes");
  if (subpath.find('\0') != std::string_view::npos)
    return make_error(ErrorCode::kInvalidArgument, "the sub-path contains a NUL byte");
  if (!subpath.empty() && subpath.front() == '/')
    return make_error(ErrorCode::kInvalidArgument,
                      quote_for_message(subpath) +
                          " is absolute: a sub-path is relative to the volume's root",
                      "write it without the leading '/' (\"data/in\", or \"\" for all of it)");
  std::string out;
  std::size_t i = 0;
  while (i < subpath.size()) {
    std::size_t j = subpath.find('/', i);
    if (j == std::string_view::npos) j = subpath.size();
    std::string_view part = subpath.substr(i, j - i);
    i = j + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..")
      return make_error(ErrorCode::kInvalidArgument,
                        quote_for_message(subpath) + " contains \"..\"",
                        "a sub-path stays inside its volume: name the directory without \"..\"");
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

}  // namespace corral
