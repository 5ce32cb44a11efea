#include "objstore/object_checks.h"

#include "base/strings.h"

namespace corral::objstore {
namespace {

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '/' || c == '-';
}

bool dot_segment(std::string_view segment) { return segment == "." || segment == ".."; }

}  // namespace

bool valid_object_key(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeyBytes) return false;
  if (key.front() == '/' || key.back() == '/') return false;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= key.size(); ++i) {
    if (i < key.size() && !key_char(key[i])) return false;
    if (i == key.size() || key[i] == '/') {
      std::string_view segment = key.substr(start, i - start);
      if (segment.empty() || dot_segment(segment)) return false;
      start = i + 1;
    }
  }
  return true;
}

bool valid_key_prefix(std::string_view prefix) {
  if (prefix.empty()) return true;
  if (prefix.size() > kMaxKeyBytes || prefix.front() == '/') return false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (!key_char(prefix[i])) return false;
    if (prefix[i] == '/') {
      std::string_view segment = prefix.substr(start, i - start);
      if (segment.empty() || dot_segment(segment)) return false;
      start = i + 1;
    }
  }
  return true;
}

Status check_key(std::string_view key) {
  if (valid_object_key(key)) return ok();
  return make_error(ErrorCode::kInvalidArgument,
                    "object key " + quote_for_message(key) + " is not valid",
                    "a key is 1-512 bytes of [A-Za-z0-9._/-] without an empty, \".\" or \"..\" "
                    "segment and without a leading or trailing '/'");
}

Status check_prefix(std::string_view prefix) {
  if (valid_key_prefix(prefix)) return ok();
  return make_error(ErrorCode::kInvalidArgument,
                    "object key prefix " + quote_for_message(prefix) + " is not valid",
                    "a prefix is empty or the start of a valid key");
}

Status check_metadata(const std::map<std::string, std::string>& metadata) {
  std::size_t total = 0;
  for (const auto& [name, value] : metadata) {
    bool name_ok = !name.empty() && name.size() <= 64;
    for (char c : name) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) name_ok = false;
    }
    if (!name_ok) {
      return make_error(ErrorCode::kInvalidArgument,
                        "object metadata name " + quote_for_message(name) + " is not valid",
                        "names are 1-64 of [a-z0-9-]");
    }
    if (name == "sha256") {
      return make_error(ErrorCode::kInvalidArgument,
                        "object metadata name sha256 is reserved (the store records the "
                        "content's digest under it)");
    }
    for (char c : value) {
      if (c < 0x20 || c > 0x7e) {
        return make_error(ErrorCode::kInvalidArgument,
                          "object metadata " + name + " has a byte outside printable ASCII",
                          "values are printable ASCII (0x20-0x7e)");
      }
    }
    total += name.size() + value.size();
  }
  if (total > kMaxMetadataBytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "object metadata is " + std::to_string(total) + " bytes, over the limit of " +
                          std::to_string(kMaxMetadataBytes),
                      "keep names and values under 2 KiB in all");
  }
  return ok();
}

Result<std::string> normalize_sha256(std::string_view hex) {
  std::string out = ascii_lower(hex);
  bool good = out.size() == 64;
  for (char c : out) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) good = false;
  }
  if (!good) {
    return make_error(ErrorCode::kInvalidArgument,
                      "sha256 " + quote_for_message(hex) + " is not 64 hex digits");
  }
  return out;
}

Result<std::optional<std::string>> check_put_options(const PutOptions& options) {
  CORRAL_TRY(check_metadata(options.metadata));
  if (!options.expected_sha256) return std::optional<std::string>();
  auto normalized = normalize_sha256(*options.expected_sha256);
  if (!normalized) return tl::unexpected(std::move(normalized).error());
  return std::optional<std::string>(std::move(*normalized));
}

tl::unexpected<Error> over_max_size(std::string message) {
  return tl::unexpected(Error{ErrorCode::kResourceExhausted, std::move(message), "", kOverMaxSize});
}

}  // namespace corral::objstore
