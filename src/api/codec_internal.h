// Pieces of the API's codecs that more than one resource's codec uses: the
// error body (an exec stream's "error" event), the network and secrets
// objects (the create request and the stored spec), and the stored spec
// (inside a sandbox's info). Internal to src/api, like json_reader.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/json_reader.h"
#include "spec/sandbox_spec.h"

namespace corral::api {

// api_error.cc: {"code", "message", "field", "hint"}.
json::Json error_body_json(const ApiError& e);
Result<ApiError> read_error_body(const json::Json& v, std::string_view path, const json::Ctx& ctx);

// network_codec.cc. The API form, which is also the stored form: absent
// lists are empty, an absent timeout or rate is the daemon's default.
// Rules are checked with the policy's own parser only for requests.
json::Json network_json(const NetworkSpec& n);
Result<NetworkSpec> read_network_object(const json::Json& v, const std::string& path,
                                        const json::Ctx& ctx);

// spec_codec.cc: the secrets a spec names (shapes only, no values), the
// mounts, and the spec as stored and shown.
json::Json secrets_json(const std::vector<SecretSpec>& secrets);
Result<std::vector<SecretSpec>> read_secrets(const json::Json& v, const std::string& path,
                                             const json::Ctx& ctx);
json::Json mounts_json(const std::vector<MountSpec>& mounts);
json::Json volumes_json(const std::vector<VolumeMountSpec>& volumes);
json::Json spec_json(const SandboxSpec& s);
Result<SandboxSpec> read_spec(const json::Json& v, std::string path, const json::Ctx& ctx);

}  // namespace corral::api
