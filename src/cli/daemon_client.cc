#include "cli/daemon_client.h"

#include <chrono>
#include <cstdio>
#include <fstream>

#include "base/utf8.h"
#include "api/base64.h"
#include "base/json_text.h"

namespace corral::cli {

namespace {

std::string pretty(std::string_view text) {
  auto j = ojson::parse(text, nullptr, false);
  if (j.is_discarded()) return std::string(text);
  return json_text(j, 2);
}

}  // namespace

Result<std::unique_ptr<sdk::RemoteProvider>> connect(const Endpoint& ep) {
  sdk::RemoteOptions options = sdk::RemoteProvider::options_from_environment();
  if (!ep.url.empty()) options.url = ep.url;
  if (!ep.key_file.empty()) {
    std::ifstream in(ep.key_file);
    if (!in)
      return make_error(ErrorCode::kNotFound, "cannot read the API key file " + ep.key_file,
                        "the daemon's key is in <data-dir>/api-key");
    std::string key;
    std::getline(in, key);
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t'))
      key.pop_back();
    options.api_key = key;
  }
  // Creating a sandbox may build the host base first; destroys wait for
  // the teardown to be verified.
  options.timeout = std::chrono::seconds(120);
  auto provider = sdk::RemoteProvider::open(options);
  if (!provider) return provider;
  if (!(*provider)->endpoint().is_unix && options.api_key.empty())
    return make_error(ErrorCode::kInvalidArgument, "no API key for " + options.url,
                      "set CORRAL_API_KEY, or pass --api-key-file FILE (the daemon prints "
                      "where its key file is when it starts)");
  return provider;
}

std::optional<std::string> non_utf8_field(const ojson& j, const std::string& at) {
  if (j.is_string()) {
    if (!is_valid_utf8(j.get_ref<const std::string&>())) return at;
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      const std::string here = (at.empty() ? "" : at + ".") + key;
      if (!is_valid_utf8(key)) return here + " (the name)";
      if (auto bad = non_utf8_field(value, here)) return bad;
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (auto bad = non_utf8_field(j[i], at + "[" + std::to_string(i) + "]")) return bad;
    }
  }
  return std::nullopt;
}

std::string not_text_message(std::string_view what) {
  return std::string(what) +
         " is not UTF-8 text: the API carries it as JSON text, so corral will not send it "
         "changed (write the bytes to a file in the sandbox instead)";
}

int print_json(const Result<std::string>& reply) {
  if (!reply) return command_failure(reply.error());
  printf("%s\n", pretty(*reply).c_str());
  return 0;
}

}  // namespace corral::cli
