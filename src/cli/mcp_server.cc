#include "cli/mcp_server.h"

#include <array>

namespace corral::cli {

namespace {

using Json = nlohmann::json;

constexpr std::array<std::string_view, 4> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                       "2024-11-05"};

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json rpc_error(int code, std::string message) {
  return Json{{"code", code}, {"message", std::move(message)}};
}

}  // namespace

std::optional<std::string> McpServer::handle_line(std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return std::nullopt;
  Json msg = Json::parse(line, nullptr, false);
  if (msg.is_discarded())
    return dump({{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", rpc_error(-32700, "parse error: not JSON")}});
  if (!msg.is_object() || msg.value("jsonrpc", "") != "2.0")
    return dump({{"jsonrpc", "2.0"},
                 {"id", nullptr},
                 {"error", rpc_error(-32600, "not a JSON-RPC 2.0 message")}});
  const bool has_id = msg.contains("id") && (msg["id"].is_string() || msg["id"].is_number_integer());
  if (!msg.contains("method")) return std::nullopt;  // a response to us: we send no requests
  if (!msg["method"].is_string()) {
    if (!has_id) return std::nullopt;
    return dump({{"jsonrpc", "2.0"}, {"id", msg["id"]}, {"error", rpc_error(-32600, "method must be a string")}});
  }
  const std::string method = msg["method"].get<std::string>();
  const Json params = msg.contains("params") ? msg["params"] : Json::object();
  if (!has_id) return std::nullopt;  // a notification (initialized, cancelled, ...)
  std::optional<Json> error;
  Json result = dispatch(method, params, &error);
  Json out{{"jsonrpc", "2.0"}, {"id", msg["id"]}};
  if (error) out["error"] = std::move(*error);
  else out["result"] = std::move(result);
  return dump(out);
}

Json McpServer::dispatch(const std::string& method, const Json& params,
                         std::optional<Json>* error) {
  if (method == "initialize") {
    std::string version(kMcpLatestVersion);
    if (params.is_object() && params.contains("protocolVersion") &&
        params["protocolVersion"].is_string()) {
      const std::string asked = params["protocolVersion"].get<std::string>();
      for (auto v : kVersions)
        if (v == asked) version = asked;
    }
    return Json{{"protocolVersion", version},
                {"capabilities", {{"tools", {{"listChanged", false}}}}},
                {"serverInfo", {{"name", "corral"}, {"version", "0.1.0"}}},
                {"instructions",
                 "Sandboxes for running untrusted code: create one, run commands and move files "
                 "in it, destroy it. Each is isolated from the host and from the others."}};
  }
  if (method == "ping") return Json::object();
  if (method == "tools/list") {
    Json list = Json::array();
    for (const McpTool& t : tools_) {
      Json item{{"name", t.name}, {"description", t.description}, {"inputSchema", t.input_schema}};
      if (!t.output_schema.is_null()) item["outputSchema"] = t.output_schema;
      list.push_back(std::move(item));
    }
    return Json{{"tools", std::move(list)}};
  }
  if (method == "tools/call") return call_tool(params, error);
  *error = rpc_error(-32601, "method not found: " + method);
  return nullptr;
}

Json McpServer::call_tool(const Json& params, std::optional<Json>* error) {
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
    *error = rpc_error(-32602, "tools/call needs params.name");
    return nullptr;
  }
  const std::string name = params["name"].get<std::string>();
  Json args = params.contains("arguments") ? params["arguments"] : Json::object();
  if (args.is_null()) args = Json::object();
  if (!args.is_object()) {
    *error = rpc_error(-32602, "params.arguments must be an object");
    return nullptr;
  }
  for (const McpTool& t : tools_) {
    if (t.name != name) continue;
    McpToolResult r = t.call(args);
    if (r.is_error)
      return Json{{"content", Json::array({{{"type", "text"}, {"text", r.error}}})},
                  {"isError", true}};
    return Json{{"content", Json::array({{{"type", "text"}, {"text", dump(r.structured)}}})},
                {"structuredContent", r.structured}};
  }
  *error = rpc_error(-32602, "unknown tool: " + name);
  return nullptr;
}

}  // namespace corral::cli
