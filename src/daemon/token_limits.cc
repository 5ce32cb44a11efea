#include "daemon/token_limits.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "jail/fs_util.h"

namespace corral::daemon {

namespace {

using Clock = std::chrono::system_clock;
constexpr std::size_t kMaxFile = 4096;

}  // namespace

Status TokenLimits::open() const { return mkdir_p(dir_, 0700); }

Result<std::string> TokenLimits::path_of(const std::string& sandbox_id) const {
  // Ids are the daemon's own; still, one never names another file.
  if (sandbox_id.empty() || sandbox_id.size() > 128 || sandbox_id.front() == '.' ||
      sandbox_id.find('/') != std::string::npos)
    return make_error(ErrorCode::kInvalidArgument,
                      "token limits: not a sandbox id: \"" + sandbox_id + "\"");
  return dir_ + "/" + sandbox_id + ".json";
}

Result<TokenLimit> TokenLimits::get(const std::string& sandbox_id) const {
  auto path = path_of(sandbox_id);
  if (!path) return tl::unexpected(path.error());
  UniqueFd fd(::open(path->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return TokenLimit{};
    return errno_error("open(" + *path + ")");
  }
  std::string text(kMaxFile + 1, '\0');
  ssize_t n = ::read(fd.get(), text.data(), text.size());
  if (n < 0) return errno_error("read(" + *path + ")");
  text.resize(static_cast<std::size_t>(n));
  auto j = nlohmann::json::parse(text, nullptr, false);
  TokenLimit out;
  if (text.size() > kMaxFile || !j.is_object())
    return make_error(ErrorCode::kInvalidArgument, "token limits: " + *path + " is not valid",
                      "the sandbox's tokens are treated as revoked; destroy it");
  if (auto it = j.find("not_after_ms"); it != j.end()) {
    if (!it->is_number_integer())
      return make_error(ErrorCode::kInvalidArgument,
                        "token limits: " + *path + ": not_after_ms is not an integer");
    out.deadline = Clock::time_point(std::chrono::milliseconds(it->get<std::int64_t>()));
  }
  if (auto it = j.find("revoked"); it != j.end()) {
    if (!it->is_boolean())
      return make_error(ErrorCode::kInvalidArgument,
                        "token limits: " + *path + ": revoked is not a boolean");
    out.revoked = it->get<bool>();
  }
  return out;
}

Status TokenLimits::put(const std::string& sandbox_id, const TokenLimit& limit) const {
  auto path = path_of(sandbox_id);
  if (!path) return tl::unexpected(path.error());
  nlohmann::json j = nlohmann::json::object();
  if (limit.deadline)
    j["not_after_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                            limit.deadline->time_since_epoch())
                            .count();
  j["revoked"] = limit.revoked;
  const std::string tmp = *path + ".tmp";
  CORRAL_TRY(write_file(tmp, json_text(j) + "\n", 0600));
  if (::rename(tmp.c_str(), path->c_str()) != 0) {
    Status st = errno_error("rename(" + tmp + ", " + *path + ")");
    ::unlink(tmp.c_str());
    return st;
  }
  return ok();
}

Status TokenLimits::erase(const std::string& sandbox_id) const {
  auto path = path_of(sandbox_id);
  if (!path) return tl::unexpected(path.error());
  if (::unlink(path->c_str()) != 0 && errno != ENOENT) return errno_error("unlink(" + *path + ")");
  return ok();
}

}  // namespace corral::daemon
