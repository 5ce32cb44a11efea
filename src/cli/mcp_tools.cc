#include "cli/mcp_tools.h"

#include "api/base64.h"
#include "api/task_model.h"
#include "base/utf8.h"
#include "http/http_message.h"

namespace corral::cli {

namespace {

using Json = nlohmann::json;

McpToolResult fail(std::string message) {
  McpToolResult r;
  r.is_error = true;
  r.error = std::move(message);
  return r;
}

McpToolResult fail(const Error& e) {
  return fail(e.hint.empty() ? e.message : e.message + " (" + e.hint + ")");
}

McpToolResult ok(Json structured) {
  McpToolResult r;
  r.structured = std::move(structured);
  return r;
}

// A string argument: nullopt when absent; the error when of another type.
Result<std::optional<std::string>> string_arg(const Json& args, const char* name) {
  auto it = args.find(name);
  if (it == args.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string())
    return make_error(ErrorCode::kInvalidArgument, std::string(name) + " must be a string");
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::string> required(const Json& args, const char* name) {
  auto v = string_arg(args, name);
  if (!v) return tl::unexpected(v.error());
  if (!*v || (*v)->empty())
    return make_error(ErrorCode::kInvalidArgument, std::string(name) + " is required");
  return **v;
}

Json object_schema(Json properties, std::vector<std::string> required_names) {
  return Json{{"type", "object"}, {"properties", std::move(properties)}, {"required", required_names}};
}

std::string text_or_base64(const std::string& bytes, std::string* encoding) {
  if (is_valid_utf8(bytes)) {
    *encoding = "utf-8";
    return bytes;
  }
  *encoding = "base64";
  return api::base64_encode(bytes);
}

std::string encoded_path(const std::string& path) { return http::percent_encode(path); }

}  // namespace

void McpSession::created(const std::string& id) {
  std::lock_guard lock(mu_);
  sandboxes_.insert(id);
}

void McpSession::destroyed(const std::string& id) {
  std::lock_guard lock(mu_);
  sandboxes_.erase(id);
}

std::size_t McpSession::destroy_all() {
  std::set<std::string> left;
  {
    std::lock_guard lock(mu_);
    left.swap(sandboxes_);
  }
  std::size_t n = 0;
  for (const auto& id : left)
    if (provider_->destroy_sandbox(id)) ++n;
  return n;
}

std::vector<McpTool> sandbox_tools(McpSession& session, std::int64_t default_lifetime_s) {
  std::vector<McpTool> tools;
  const Json id_prop{{"type", "string"}, {"description", "the sandbox id from sandbox_create"}};

  tools.push_back(
      {"sandbox_create",
       "Create an isolated Linux sandbox to run commands and keep files in. Nothing in it can "
       "reach the host; it has no network unless asked. It is destroyed when it times out or "
       "when this session ends.",
       object_schema(
           {{"image", {{"type", "string"}, {"description", "a corral image; default: the host base"}}},
            {"timeout_s",
             {{"type", "integer"}, {"minimum", 1}, {"description", "lifetime in seconds"}}},
            {"env",
             {{"type", "object"},
              {"additionalProperties", {{"type", "string"}}},
              {"description", "environment variables of its commands"}}},
            {"network",
             {{"description",
               "\"none\" (default), \"open\" (public internet, audited), a network template's "
               "name, or a list of allowed hosts such as [\"pypi.org\"]"},
              {"anyOf", Json::array({{{"type", "string"}},
                                     {{"type", "array"}, {"items", {{"type", "string"}}}}})}}}},
           {}),
       object_schema({{"sandbox_id", {{"type", "string"}}},
                      {"expires_at", {{"type", "string"}}}},
                     {"sandbox_id"}),
       [&session, default_lifetime_s](const Json& args) -> McpToolResult {
         Json body = Json::object();
         auto image = string_arg(args, "image");
         if (!image) return fail(image.error());
         if (*image) body["image"] = **image;
         std::int64_t lifetime = default_lifetime_s;
         if (auto t = args.find("timeout_s"); t != args.end() && !t->is_null()) {
           if (!t->is_number_integer() || t->get<std::int64_t>() < 1)
             return fail("timeout_s must be a whole number of seconds, at least 1");
           lifetime = t->get<std::int64_t>();
         }
         body["max_lifetime"] = lifetime;
         if (auto e = args.find("env"); e != args.end() && !e->is_null()) {
           if (!e->is_object()) return fail("env must be an object of strings");
           body["env"] = *e;
         }
         if (auto n = args.find("network"); n != args.end() && !n->is_null()) {
           if (n->is_array()) {
             body["network"] = Json{{"mode", "allowlist"}, {"allow", *n}};
           } else if (n->is_string()) {
             const std::string mode = n->get<std::string>();
             body["network"] = mode == "none" || mode == "open" ? Json{{"mode", mode}}
                                                                : Json{{"template", mode}};
           } else {
             return fail("network must be a string or a list of hosts");
           }
         }
         auto reply = session.provider().call("POST", "/v1/sandboxes",
                                              body.dump(-1, ' ', false,
                                                        Json::error_handler_t::replace));
         if (!reply) return fail(reply.error());
         auto info = api::parse_sandbox_info(*reply);
         if (!info) return fail(info.error());
         session.created(info->id);
         Json out{{"sandbox_id", info->id}};
         if (info->expires_at_ms) out["expires_at"] = api::format_time_ms(*info->expires_at_ms);
         return ok(std::move(out));
       }});

  tools.push_back(
      {"sandbox_exec",
       "Run a shell command (/bin/sh -c) in a sandbox and wait for it. A non-zero exit code is a "
       "normal result.",
       object_schema({{"sandbox_id", id_prop},
                      {"command", {{"type", "string"}, {"description", "a shell command line"}}},
                      {"cwd", {{"type", "string"}}},
                      {"env", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
                      {"timeout_s", {{"type", "integer"}, {"minimum", 1}}},
                      {"stdin", {{"type", "string"}}}},
                     {"sandbox_id", "command"}),
       object_schema({{"exit_code", {{"type", "integer"}}},
                      {"stdout", {{"type", "string"}}},
                      {"stderr", {{"type", "string"}}},
                      {"timed_out", {{"type", "boolean"}}}},
                     {"exit_code", "stdout", "stderr", "timed_out"}),
       [&session](const Json& args) -> McpToolResult {
         auto id = required(args, "sandbox_id");
         if (!id) return fail(id.error());
         auto command = required(args, "command");
         if (!command) return fail(command.error());
         api::ExecRequest req;
         req.argv = {"/bin/sh", "-c", *command};
         auto cwd = string_arg(args, "cwd");
         if (!cwd) return fail(cwd.error());
         req.cwd = *cwd;
         auto in = string_arg(args, "stdin");
         if (!in) return fail(in.error());
         if (*in) req.stdin_data = **in;
         if (auto e = args.find("env"); e != args.end() && e->is_object()) {
           for (auto it = e->begin(); it != e->end(); ++it) {
             if (!it->is_string()) return fail("env." + it.key() + " must be a string");
             req.env.emplace_back(it.key(), it->get<std::string>());
           }
         }
         if (auto t = args.find("timeout_s"); t != args.end() && !t->is_null()) {
           if (!t->is_number_integer() || t->get<std::int64_t>() < 1)
             return fail("timeout_s must be a whole number of seconds, at least 1");
           req.timeout_ms = t->get<std::int64_t>() * 1000;
         }
         auto r = session.provider().exec(*id, req);
         if (!r) return fail(r.error());
         Json out{{"exit_code", sdk::exit_status_of(*r)},
                  {"stdout", r->stdout_data},
                  {"stderr", r->stderr_data},
                  {"timed_out", r->timed_out}};
         if (r->stdout_truncated || r->stderr_truncated) out["truncated"] = true;
         return ok(std::move(out));
       }});

  tools.push_back(
      {"sandbox_write_file",
       "Write a file in a sandbox (parent directories are created; an existing file is "
       "replaced).",
       object_schema({{"sandbox_id", id_prop},
                      {"path", {{"type", "string"}, {"description", "absolute, or under /workspace"}}},
                      {"content", {{"type", "string"}}},
                      {"encoding", {{"type", "string"}, {"enum", {"utf-8", "base64"}}}}},
                     {"sandbox_id", "path", "content"}),
       object_schema({{"path", {{"type", "string"}}}, {"size", {{"type", "integer"}}}},
                     {"path", "size"}),
       [&session](const Json& args) -> McpToolResult {
         auto id = required(args, "sandbox_id");
         if (!id) return fail(id.error());
         auto path = required(args, "path");
         if (!path) return fail(path.error());
         auto content = string_arg(args, "content");
         if (!content) return fail(content.error());
         if (!*content) return fail("content is required");
         auto encoding = string_arg(args, "encoding");
         if (!encoding) return fail(encoding.error());
         std::string bytes = **content;
         if (encoding->value_or("utf-8") == "base64") {
           auto decoded = api::base64_decode(bytes);
           if (!decoded) return fail("content is not base64: " + decoded.error().message);
           bytes = std::move(*decoded);
         } else if (encoding->value_or("utf-8") != "utf-8") {
           return fail("encoding must be utf-8 or base64");
         }
         if (auto slash = path->rfind('/'); slash != std::string::npos && slash > 0) {
           Json mk{{"path", path->substr(0, slash)}, {"parents", true}};
           auto made = session.provider().call(
               "POST", "/v1/sandboxes/" + *id + "/files/mkdir",
               mk.dump(-1, ' ', false, Json::error_handler_t::replace));
           if (!made) return fail(made.error());
         }
         auto put = session.provider().put_file(*id, *path, bytes);
         if (!put) return fail(put.error());
         return ok(Json{{"path", put->path}, {"size", put->bytes}});
       }});

  tools.push_back(
      {"sandbox_read_file",
       "Read a file of a sandbox (at most 10 MiB). Text comes as UTF-8; other bytes as base64.",
       object_schema({{"sandbox_id", id_prop},
                      {"path", {{"type", "string"}}},
                      {"encoding", {{"type", "string"}, {"enum", {"utf-8", "base64"}}}}},
                     {"sandbox_id", "path"}),
       object_schema({{"path", {{"type", "string"}}},
                      {"content", {{"type", "string"}}},
                      {"encoding", {{"type", "string"}}},
                      {"size", {{"type", "integer"}}}},
                     {"path", "content", "encoding", "size"}),
       [&session](const Json& args) -> McpToolResult {
         auto id = required(args, "sandbox_id");
         if (!id) return fail(id.error());
         auto path = required(args, "path");
         if (!path) return fail(path.error());
         auto encoding = string_arg(args, "encoding");
         if (!encoding) return fail(encoding.error());
         auto data = session.provider().get_file(*id, *path, 10u << 20);
         if (!data) return fail(data.error());
         std::string used;
         std::string content;
         if (encoding->value_or("") == "base64") {
           used = "base64";
           content = api::base64_encode(*data);
         } else {
           content = text_or_base64(*data, &used);
         }
         return ok(Json{{"path", *path}, {"content", content}, {"encoding", used},
                        {"size", data->size()}});
       }});

  tools.push_back(
      {"sandbox_list_files", "List a directory of a sandbox.",
       object_schema({{"sandbox_id", id_prop}, {"path", {{"type", "string"}}}},
                     {"sandbox_id", "path"}),
       object_schema({{"entries", {{"type", "array"}}}}, {"entries"}),
       [&session](const Json& args) -> McpToolResult {
         auto id = required(args, "sandbox_id");
         if (!id) return fail(id.error());
         auto path = required(args, "path");
         if (!path) return fail(path.error());
         auto reply = session.provider().call(
             "GET", "/v1/sandboxes/" + *id + "/files/list?path=" + encoded_path(*path));
         if (!reply) return fail(reply.error());
         auto j = Json::parse(*reply, nullptr, false);
         if (!j.is_object() || !j["entries"].is_array()) return fail("the daemon's answer is not a listing");
         Json entries = Json::array();
         for (const Json& e : j["entries"])
           entries.push_back({{"name", e.value("name", "")},
                              {"type", e.value("type", "other")},
                              {"size", e.value("size", 0)}});
         return ok(Json{{"entries", std::move(entries)}});
       }});

  tools.push_back(
      {"sandbox_destroy", "Destroy a sandbox: its processes and files are gone.",
       object_schema({{"sandbox_id", id_prop}}, {"sandbox_id"}),
       object_schema({{"sandbox_id", {{"type", "string"}}}, {"destroyed", {{"type", "boolean"}}}},
                     {"sandbox_id", "destroyed"}),
       [&session](const Json& args) -> McpToolResult {
         auto id = required(args, "sandbox_id");
         if (!id) return fail(id.error());
         auto info = session.provider().destroy_sandbox(*id);
         if (!info) return fail(info.error());
         session.destroyed(*id);
         return ok(Json{{"sandbox_id", *id}, {"destroyed", true}});
       }});
  return tools;
}

}  // namespace corral::cli
