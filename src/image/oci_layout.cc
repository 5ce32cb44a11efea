#include "image/oci_layout.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <sstream>

#include "base/strings.h"
#include "base/fs.h"
#include "base/json_text.h"
#include "base/unique_fd.h"

namespace corral::image_detail {

namespace {

}  // namespace

Result<json> read_json_file(int dirfd, const std::string& name, const std::string& shown,
                            size_t limit) {
  int fd = openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_error("open(" + shown + ")");
  UniqueFd f(fd);
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = read(f.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read(" + shown + ")");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > limit) {
      return make_error(ErrorCode::kInvalidArgument,
                        shown + " is larger than " + std::to_string(limit) + " bytes");
    }
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return make_error(ErrorCode::kInvalidArgument, shown + " is not valid JSON");
  }
  return j;
}

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string string_member(const json& j, const char* key) {
  const json* v = member(j, key);
  return (v != nullptr && v->is_string()) ? v->get<std::string>() : std::string();
}

std::vector<std::string> string_list_member(const json& j, const char* key) {
  std::vector<std::string> out;
  const json* v = member(j, key);
  if (v == nullptr || !v->is_array()) return out;
  for (const auto& e : *v) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

bool valid_tag(std::string_view tag) {
  if (tag.empty() || tag.size() > 128) return false;
  for (size_t i = 0; i < tag.size(); ++i) {
    char c = tag[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum || c == '_') continue;
    if (i > 0 && (c == '.' || c == '-')) continue;
    return false;
  }
  return true;
}

Status replace_file(int dirfd, const std::string& name, const std::string& text,
                    const std::string& shown) {
  std::string tmp = name + ".tmp";
  int fd = openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("create(" + shown + ".tmp)");
  UniqueFd f(fd);
  CORRAL_TRY(write_all(f.get(), text, shown + ".tmp"));
  if (renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    return errno_error("rename(" + shown + ".tmp)");
  }
  return ok();
}

std::string blob_path(const std::string& digest) {
  size_t colon = digest.find(':');
  if (colon == std::string::npos || colon == 0 || digest.size() - colon - 1 < 32 ||
      digest.size() - colon - 1 > 128) {
    return "";
  }
  for (size_t i = 0; i < digest.size(); ++i) {
    char c = digest[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (i != colon && !ok) return "";
  }
  return "blobs/" + digest.substr(0, colon) + "/" + digest.substr(colon + 1);
}

Result<json> oci_image_config(int layout_fd, const json& index, const std::string& tag) {
  const json* manifests = member(index, "manifests");
  if (manifests == nullptr || !manifests->is_array()) {
    return make_error(ErrorCode::kInvalidArgument, "index.json has no manifests");
  }
  std::string manifest_digest;
  for (const auto& desc : *manifests) {
    const json* ann = member(desc, "annotations");
    if (ann != nullptr && string_member(*ann, kRefNameAnnotation) == tag) {
      manifest_digest = string_member(desc, "digest");
    }
  }
  std::string path = blob_path(manifest_digest);
  if (path.empty()) return make_error(ErrorCode::kInvalidArgument, "no manifest for " + tag);
  auto manifest = read_json_file(layout_fd, path, path);
  if (!manifest) return manifest;
  const json* config_desc = member(*manifest, "config");
  path = config_desc != nullptr ? blob_path(string_member(*config_desc, "digest")) : "";
  if (path.empty()) return make_error(ErrorCode::kInvalidArgument, "manifest has no config");
  auto config = read_json_file(layout_fd, path, path);
  if (!config) return config;
  const json* inner = member(*config, "config");
  if (inner == nullptr || !inner->is_object()) return json::object();
  return *inner;
}

std::string convert_hint() {
  return "an OCI image tarball is made with `skopeo copy SOURCE oci-archive:IMAGE.tar:latest` "
         "or, from an OCI layout directory, `tar -C LAYOUT -cf IMAGE.tar .` (docs/images.md)";
}

Status check_layout_listing(const std::string& listing, const std::string& file,
                            const std::string& image_name) {
  bool has_layout = false, has_index = false, has_manifest = false;
  std::istringstream members(listing);
  std::string m;
  while (std::getline(members, m)) {
    if (m.empty()) continue;
    if (m[0] == '/') {
      return make_error(ErrorCode::kInvalidArgument,
                        "refusing " + file + ": member " + quote_for_message(m) + " is an absolute path",
                        "an OCI image tarball holds only relative paths; " + convert_hint());
    }
    std::string rel = m;
    std::istringstream parts(m);
    std::string part;
    while (std::getline(parts, part, '/')) {
      if (part == "..") {
        return make_error(
            ErrorCode::kInvalidArgument,
            "refusing " + file + ": member " + quote_for_message(m) + " leads outside the archive with '..'",
            "an OCI image tarball never needs '..'; " + convert_hint());
      }
    }
    while (rel.rfind("./", 0) == 0) rel.erase(0, 2);
    if (rel == "oci-layout") has_layout = true;
    if (rel == "index.json") has_index = true;
    if (rel == "manifest.json") has_manifest = true;
  }
  if (!has_layout && has_manifest) {
    return make_error(ErrorCode::kInvalidArgument,
                      file +
                          " is a docker-archive (manifest.json without oci-layout), not an "
                          "OCI image layout",
                      "convert it: skopeo copy docker-archive:" + file +
                          " oci-archive:IMAGE.tar:latest, then corral image import " +
                          image_name + " IMAGE.tar");
  }
  if (!has_layout || !has_index) {
    return make_error(
        ErrorCode::kInvalidArgument,
        file + " is not an OCI image layout (no oci-layout and index.json at its top)",
        convert_hint());
  }
  return ok();
}

std::string manifest_digest(const json& index, const std::string& tag) {
  const json* manifests = member(index, "manifests");
  if (manifests == nullptr || !manifests->is_array()) return "";
  for (const auto& desc : *manifests) {
    const json* ann = member(desc, "annotations");
    if (ann != nullptr && string_member(*ann, kRefNameAnnotation) == tag)
      return string_member(desc, "digest");
  }
  return "";
}

Result<std::string> choose_tag(json& index, int layout_fd, const std::string& index_shown,
                               const std::string& file, bool* tagged_here) {
  std::set<std::string> tags;
  const json* manifests = member(index, "manifests");
  if (manifests != nullptr && manifests->is_array()) {
    for (const auto& desc : *manifests) {
      const json* ann = member(desc, "annotations");
      std::string ref = ann != nullptr ? string_member(*ann, kRefNameAnnotation) : "";
      if (!ref.empty()) tags.insert(ref);
    }
  }
  std::string tag;
  if (tags.count("latest") != 0) {
    tag = "latest";
  } else if (tags.size() == 1) {
    tag = *tags.begin();
  } else if (tags.empty() && manifests != nullptr && manifests->is_array() &&
             manifests->size() == 1 && (*manifests)[0].is_object()) {
    // `skopeo copy X oci-archive:FILE` without a tag leaves the only
    // manifest unnamed; umoci needs a name, so give it one in our copy.
    tag = "latest";
    *tagged_here = true;
    json& desc = index["manifests"][0];
    if (!desc.contains("annotations") || !desc["annotations"].is_object()) {
      desc["annotations"] = json::object();
    }
    desc["annotations"][kRefNameAnnotation] = tag;
    CORRAL_TRY(replace_file(layout_fd, "index.json", json_text(index), index_shown));
  } else if (tags.empty()) {
    return make_error(ErrorCode::kInvalidArgument, file + " has no tagged image in index.json",
                      "tag it while converting: skopeo copy oci-archive:" + file +
                          " oci-archive:IMAGE.tar:latest");
  } else {
    std::string all;
    for (const auto& t : tags) all += (all.empty() ? "" : ", ") + t;
    return make_error(
        ErrorCode::kInvalidArgument,
        file + " holds several tags (" + all + ") and none is \"latest\"",
        "keep one: skopeo copy oci-archive:" + file + ":TAG oci-archive:IMAGE.tar:latest");
  }
  if (!valid_tag(tag)) {
    return make_error(ErrorCode::kInvalidArgument,
                      file + ": tag " + quote_for_message(tag) + " is not a valid OCI tag");
  }
  return tag;
}

}  // namespace corral::image_detail
