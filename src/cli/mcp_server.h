// The Model Context Protocol (modelcontextprotocol.io, revision
// 2025-11-25 and the three before it) as `corral mcp` speaks it over stdio:
// JSON-RPC 2.0 messages, one per line. It answers initialize, ping,
// tools/list and tools/call; notifications get no answer; anything else is
// -32601. Tools come from mcp_tools.h.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/mcp_tools.h"

namespace corral::cli {

inline constexpr std::string_view kMcpLatestVersion = "2025-11-25";

class McpServer {
 public:
  explicit McpServer(std::vector<McpTool> tools) : tools_(std::move(tools)) {}
  // One line from the client; the line to answer, if any (no newline).
  std::optional<std::string> handle_line(std::string_view line);

 private:
  nlohmann::json dispatch(const std::string& method, const nlohmann::json& params,
                          std::optional<nlohmann::json>* error);
  nlohmann::json call_tool(const nlohmann::json& params, std::optional<nlohmann::json>* error);
  std::vector<McpTool> tools_;
};

}  // namespace corral::cli
