#include "spec/image_ref.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

namespace corral {

namespace {

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// One path component of a repository: [a-z0-9]+ with single '.', '_' or
// '-' (and "__") between runs, as the distribution spec allows.
bool valid_component(std::string_view c) {
  if (c.empty() || c.size() > 128) return false;
  auto alnum = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); };
  if (!alnum(c.front()) || !alnum(c.back())) return false;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (alnum(c[i])) continue;
    if (c[i] != '.' && c[i] != '_' && c[i] != '-') return false;
    if (!alnum(c[i - 1]) && !(c[i] == '_' && c[i - 1] == '_')) return false;
  }
  return true;
}

// REGISTRY/REPOSITORY of `name` into `registry` and `repository`; what is
// wrong with it otherwise.
std::optional<std::string> split_repository(std::string_view name, std::string& registry,
                                            std::string& repository) {
  const auto slash = name.find('/');
  if (slash == std::string_view::npos) return "names no registry (REGISTRY/REPOSITORY)";
  registry = std::string(name.substr(0, slash));
  if (!valid_registry(registry)) return "has an invalid registry host or port";
  std::string_view repo = name.substr(slash + 1);
  if (repo.empty() || repo.size() > 255) return "has an empty or too long repository";
  for (std::string_view rest = repo; !rest.empty();) {
    auto s = rest.find('/');
    if (!valid_component(rest.substr(0, s))) return "has an invalid repository path";
    if (s == std::string_view::npos) break;
    rest.remove_prefix(s + 1);
    if (rest.empty()) return "has an invalid repository path";
  }
  repository = std::string(repo);
  return std::nullopt;
}

bool valid_tag(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  if (!word(t.front())) return false;
  return std::all_of(t.begin(), t.end(), [&](char c) { return word(c) || c == '.' || c == '-'; });
}

}  // namespace

bool valid_registry(std::string_view r) {
  if (r.empty() || r.size() > 255) return false;
  std::string_view host = r;
  if (r.front() == '[') {
    auto close = r.find(']');
    if (close == std::string_view::npos) return false;
    for (char c : r.substr(1, close - 1))
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':') return false;
    host = {};
    r.remove_prefix(close + 1);
    if (r.empty()) return true;
    if (r.front() != ':') return false;
  } else if (auto colon = r.rfind(':'); colon != std::string_view::npos) {
    host = r.substr(0, colon);
    r.remove_prefix(colon);
  } else {
    r = {};
  }
  if (!r.empty()) {  // ":PORT"
    std::string_view port = r.substr(1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
  }
  for (char c : host)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '-'))
      return false;
  return host.empty() || (host.front() != '-' && host.front() != '.');
}

bool valid_digest(std::string_view text) {
  return text.size() == 7 + 64 && text.substr(0, 7) == "sha256:" && lower_hex(text.substr(7));
}

Result<DigestReference> parse_digest_reference(std::string_view text) {
  auto refuse = [&](const std::string& why) -> Result<DigestReference> {
    return make_error(ErrorCode::kInvalidArgument,
                      "image reference \"" + std::string(text.substr(0, 200)) + "\" " + why,
                      "name an image by its digest: REGISTRY[:PORT]/REPOSITORY@sha256:<64 hex>, "
                      "e.g. 10.0.0.9:5000/tools@sha256:... (skopeo inspect gives the digest)");
  };
  const auto at = text.find('@');
  if (at == std::string_view::npos) return refuse("has no @sha256:<digest>: a tag can move");
  DigestReference ref;
  ref.digest = std::string(text.substr(at + 1));
  if (!valid_digest(ref.digest)) return refuse("does not end in @sha256: and 64 lowercase hex");
  // A ':' tag before the '@' is refused with the rest: the digest alone names it.
  if (auto why = split_repository(text.substr(0, at), ref.registry, ref.repository))
    return refuse(*why);
  return ref;
}

Result<PushTarget> parse_push_target(std::string_view text) {
  auto refuse = [&](const std::string& why) -> Result<PushTarget> {
    return make_error(ErrorCode::kInvalidArgument,
                      "push target \"" + std::string(text.substr(0, 200)) + "\" " + why,
                      "name where to push: REGISTRY[:PORT]/REPOSITORY[:TAG], e.g. "
                      "10.0.0.9:5000/tools:v1 (the push answers the digest to pull it by)");
  };
  if (text.find('@') != std::string_view::npos)
    return refuse("has a digest: the registry gives the digest of what is pushed");
  PushTarget t;
  std::string_view name = text;
  // A tag is a ':' after the last '/' (a ':' before it is the port).
  const auto last_slash = text.rfind('/');
  const auto colon = text.rfind(':');
  if (colon != std::string_view::npos && last_slash != std::string_view::npos &&
      colon > last_slash) {
    t.tag = std::string(text.substr(colon + 1));
    if (!valid_tag(t.tag)) return refuse("has an invalid tag ([A-Za-z0-9_][A-Za-z0-9._-]{0,127})");
    name = text.substr(0, colon);
  } else {
    t.tag = "latest";
  }
  if (auto why = split_repository(name, t.registry, t.repository)) return refuse(*why);
  return t;
}

bool valid_image_name(std::string_view text) {
  if (text.empty() || text.size() > 63) return false;
  auto ok = [](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (!first && (c == '.' || c == '_' || c == '-'));
  };
  for (std::size_t i = 0; i < text.size(); ++i)
    if (!ok(text[i], i == 0)) return false;
  return true;
}

bool valid_image_ref(std::string_view text) {
  return valid_image_name(text) || valid_digest(text) || parse_digest_reference(text).has_value();
}

}  // namespace corral
