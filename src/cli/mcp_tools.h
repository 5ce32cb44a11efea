// The sandbox tools `corral mcp` offers an agent host (issue 17,
// docs/mcp.md): sandbox_create, sandbox_exec, sandbox_write_file,
// sandbox_read_file, sandbox_list_files, sandbox_destroy. Each is a call
// of the daemon's API through sdk::RemoteProvider, so `corral mcp` has no
// powers of its own. A failed operation is a result with isError (the
// model reads the message and can react), never a protocol error.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "sdk/remote_provider.h"

namespace corral::cli {

struct McpToolResult {
  nlohmann::json structured;  // structuredContent, and its JSON as the text item
  bool is_error = false;
  std::string error;  // the text when is_error
};

struct McpTool {
  std::string name;
  std::string description;
  nlohmann::json input_schema;
  nlohmann::json output_schema;
  std::function<McpToolResult(const nlohmann::json& arguments)> call;
};

// The sandboxes one MCP session created: destroyed when it ends.
class McpSession {
 public:
  explicit McpSession(std::unique_ptr<sdk::RemoteProvider> provider)
      : provider_(std::move(provider)) {}
  sdk::RemoteProvider& provider() { return *provider_; }
  void created(const std::string& id);
  void destroyed(const std::string& id);
  // Destroys what is left; returns how many.
  std::size_t destroy_all();

 private:
  std::unique_ptr<sdk::RemoteProvider> provider_;
  std::mutex mu_;
  std::set<std::string> sandboxes_;
};

// `default_lifetime_s`: a created sandbox's lifetime unless the call says.
std::vector<McpTool> sandbox_tools(McpSession& session, std::int64_t default_lifetime_s);

}  // namespace corral::cli
