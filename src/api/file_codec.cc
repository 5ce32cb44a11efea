// The file API's bodies (api_model.h, docs/file-api.md): entries and their
// lists, mkdir, rename and the upload result. Paths and names are bytes:
// "<key>_b64" when they are not UTF-8.
#include <algorithm>
#include <cstdio>
#include <limits>

#include "api/api_model.h"
#include "base/strings.h"
#include "api/json_writer.h"

namespace corral::api {

using namespace json;  // json_reader.h, json_writer.h: this file's vocabulary

namespace {

constexpr std::uint32_t kMaxMode = 0777;

Json file_entry_json(const FileEntry& e) {
  Json j = Json::object();
  put_bytes(j, "name", e.name);
  j["type"] = e.type;
  j["size"] = e.size;
  j["mode"] = e.mode;
  j["mtime_ms"] = e.mtime_ms;
  if (!e.link_target.empty()) put_bytes(j, "link_target", e.link_target);
  return j;
}

Result<FileEntry> read_file_entry(const Json& v, std::string path, const Ctx& ctx) {
  auto obj = open_object(
      v, std::move(path), ctx,
      {"name", "name_b64", "type", "size", "mode", "mtime_ms", "link_target", "link_target_b64"});
  if (!obj) return tl::unexpected<Error>(obj.error());
  FileEntry e;
  constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();
  auto name = read_bytes(*obj, "name", kAny);
  if (!name) return tl::unexpected<Error>(name.error());
  if (*name) e.name = std::move(**name);
  CORRAL_TRY(read_into(*obj, "type", e.type, any_string(ctx)));
  if (e.type != "file" && e.type != "directory" && e.type != "symlink" && e.type != "other") {
    return fail(ApiErrorCode::kInvalidValue, obj->at("type"),
                quote_for_message(e.type) + " is not one of file, directory, symlink, other");
  }
  CORRAL_TRY(read_into(*obj, "size", e.size, any_u64()));
  CORRAL_TRY(read_into(*obj, "mode", e.mode, [](const Json& j, std::string_view p) {
    return read_uint(j, p, 0, std::numeric_limits<std::uint32_t>::max());
  }));
  CORRAL_TRY(read_into(*obj, "mtime_ms", e.mtime_ms, any_i64()));
  auto target = read_bytes(*obj, "link_target", kAny);
  if (!target) return tl::unexpected<Error>(target.error());
  if (*target) e.link_target = std::move(**target);
  return e;
}

// A file API path given as "<key>" or "<key>_b64" (file names are bytes).
Result<std::string> read_file_path(const Obj& obj, std::string_view key) {
  auto bytes = read_bytes(obj, key, kMaxPathBytes);
  if (!bytes) return tl::unexpected<Error>(bytes.error());
  if (!*bytes) {
    return fail(ApiErrorCode::kInvalidValue, obj.at(key), "is missing (a path inside the sandbox)");
  }
  CORRAL_TRY(check_file_path(**bytes, obj.at(key)));
  return std::move(**bytes);
}

Result<std::uint32_t> read_mode(const Json& v, std::string_view path, const Ctx& ctx) {
  if (v.is_string()) {
    auto text = read_string(v, path, ctx);
    if (!text) return tl::unexpected<Error>(text.error());
    std::string_view digits = *text;
    if (digits.starts_with("0o")) digits.remove_prefix(2);
    bool octal =
        !digits.empty() && digits.size() <= 4 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '7'; });
    std::uint32_t mode = 0;
    for (char c : digits) mode = mode * 8 + static_cast<std::uint32_t>(c - '0');
    if (!octal || mode > kMaxMode) {
      return fail(ApiErrorCode::kInvalidValue, path,
                  quote_for_message(*text) +
                      " is not a permission mode: give octal digits up to \"0777\" (such as "
                      "\"0755\"), or an integer up to 511");
    }
    return mode;
  }
  auto n = read_uint(v, path, 0, kMaxMode, "an octal string (\"0755\") or an integer (493)");
  if (!n) return tl::unexpected<Error>(n.error());
  return static_cast<std::uint32_t>(*n);
}

std::string mode_string(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0%03o", mode);
  return buf;
}

}  // namespace

std::string to_json(const FileEntry& entry) { return dump(file_entry_json(entry)); }

Result<FileEntry> parse_file_entry(std::string_view body) {
  return read_document<FileEntry>(body, kResponse, read_file_entry);
}

std::string to_json(const std::vector<FileEntry>& entries, bool truncated) {
  Json j = list_json("entries", entries, file_entry_json);
  j["truncated"] = truncated;
  return dump(j);
}

Result<std::vector<FileEntry>> parse_file_list(std::string_view body, bool* truncated) {
  return guarded<std::vector<FileEntry>>([&]() -> Result<std::vector<FileEntry>> {
    const Ctx& ctx = kResponse;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"entries", "truncated"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    bool cut = false;
    CORRAL_TRY(read_into(*obj, "truncated", cut, any_bool()));
    const Json* list = obj->get("entries");
    if (list == nullptr) return fail(ApiErrorCode::kInvalidValue, "entries", "is missing");
    if (!list->is_array()) return wrong_type("entries", "an array", *list);
    std::vector<FileEntry> entries;
    entries.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
      auto e = read_file_entry((*list)[i], index_path("entries", i), ctx);
      if (!e) return tl::unexpected<Error>(e.error());
      entries.push_back(std::move(*e));
    }
    if (truncated != nullptr) *truncated = cut;
    return entries;
  });
}

Result<MkdirRequest> parse_mkdir(std::string_view body) {
  return guarded<MkdirRequest>([&]() -> Result<MkdirRequest> {
    const Ctx& ctx = kRequest;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"path", "path_b64", "parents", "mode"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    MkdirRequest request;
    auto path = read_file_path(*obj, "path");
    if (!path) return tl::unexpected<Error>(path.error());
    request.path = std::move(*path);
    CORRAL_TRY(read_into(*obj, "parents", request.parents, any_bool()));
    CORRAL_TRY(read_into(*obj, "mode", request.mode,
                         [&](const Json& j, std::string_view p) { return read_mode(j, p, ctx); }));
    return request;
  });
}

std::string to_json(const MkdirRequest& request) {
  Json j = Json::object();
  put_bytes(j, "path", request.path);
  j["parents"] = request.parents;
  j["mode"] = mode_string(request.mode);
  return dump(j);
}

Result<RenameRequest> parse_rename(std::string_view body) {
  return guarded<RenameRequest>([&]() -> Result<RenameRequest> {
    const Ctx& ctx = kRequest;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"from", "from_b64", "to", "to_b64", "overwrite"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    RenameRequest request;
    auto from = read_file_path(*obj, "from");
    if (!from) return tl::unexpected<Error>(from.error());
    auto to = read_file_path(*obj, "to");
    if (!to) return tl::unexpected<Error>(to.error());
    request.from = std::move(*from);
    request.to = std::move(*to);
    CORRAL_TRY(read_into(*obj, "overwrite", request.overwrite, any_bool()));
    return request;
  });
}

std::string to_json(const RenameRequest& request) {
  Json j = Json::object();
  put_bytes(j, "from", request.from);
  put_bytes(j, "to", request.to);
  j["overwrite"] = request.overwrite;
  return dump(j);
}

std::string to_json(const UploadResult& result) {
  Json j = Json::object();
  put_bytes(j, "path", result.path);
  j["bytes"] = result.bytes;
  j["sha256"] = result.sha256;
  return dump(j);
}

Result<UploadResult> parse_upload_result(std::string_view body) {
  return guarded<UploadResult>([&]() -> Result<UploadResult> {
    const Ctx& ctx = kResponse;
    auto doc = parse_json(body, ctx);
    if (!doc) return tl::unexpected<Error>(doc.error());
    auto obj = open_object(*doc, "", ctx, {"path", "path_b64", "bytes", "sha256"});
    if (!obj) return tl::unexpected<Error>(obj.error());
    UploadResult result;
    auto path = read_bytes(*obj, "path", std::numeric_limits<std::size_t>::max());
    if (!path) return tl::unexpected<Error>(path.error());
    if (*path) result.path = std::move(**path);
    CORRAL_TRY(read_into(*obj, "bytes", result.bytes, any_u64()));
    CORRAL_TRY(read_into(*obj, "sha256", result.sha256, any_string(ctx)));
    return result;
  });
}

}  // namespace corral::api
