// The OCI image layout as the image store imports it (internal to
// src/image): index.json, its manifests and config blobs read as JSON
// without exceptions, the tag to unpack, and the checks on a tarball's
// member list before anything is extracted. User docs: docs/images.md.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace corral::image_detail {

using json = nlohmann::json;

inline constexpr const char* kRefNameAnnotation = "org.opencontainers.image.ref.name";

// A JSON file under `dirfd`, at most `limit` bytes ("<shown> is not valid
// JSON").
Result<json> read_json_file(int dirfd, const std::string& name, const std::string& shown,
                            size_t limit = 16u << 20);
// Members read leniently: a member of the wrong type reads as absent.
const json* member(const json& j, const char* key);
std::string string_member(const json& j, const char* key);
std::vector<std::string> string_list_member(const json& j, const char* key);

// OCI tags as umoci accepts them in --image LAYOUT:TAG.
bool valid_tag(std::string_view tag);
// Writes `text` to <name>.tmp under `dirfd` and renames it over `name`.
Status replace_file(int dirfd, const std::string& name, const std::string& text,
                    const std::string& shown);
// "sha256:<hex>" -> "blobs/sha256/<hex>", or "" if it is not that shape.
std::string blob_path(const std::string& digest);
// The digest ("sha256:<hex>") of the manifest `tag` names in `index`; ""
// when none does.
std::string manifest_digest(const json& index, const std::string& tag);
// The "config" object (Env, WorkingDir, ...) of the image `tag` names in
// the extracted layout.
Result<json> oci_image_config(int layout_fd, const json& index, const std::string& tag);
// How to make an OCI image tarball (the hint of most import errors).
std::string convert_hint();

// `tar -t` output of `file`: no absolute or '..' member, an oci-layout and
// an index.json at the top; a docker-archive is refused with the command
// that converts it for `corral image import <image_name>`.
Status check_layout_listing(const std::string& listing, const std::string& file,
                            const std::string& image_name);
// The tag to unpack: "latest", else the only one. The only manifest of an
// untagged layout is tagged "latest" in `index` and in index.json under
// `layout_fd` (shown as `index_shown`), and *tagged_here says so.
Result<std::string> choose_tag(json& index, int layout_fd, const std::string& index_shown,
                               const std::string& file, bool* tagged_here);

}  // namespace corral::image_detail
