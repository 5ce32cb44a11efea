#include "support/tls_front.h"

#include <filesystem>

#include "base/subprocess.h"
#include "support/sandbox_harness.h"

namespace corral::testing {

Result<std::unique_ptr<TlsFront>> TlsFront::start(const std::string& upstream,
                                                  const std::string& envd_version) {
  auto openssl = find_program("openssl");
  if (!openssl)
    return make_error(ErrorCode::kUnavailable, "openssl is not installed (scripts/install-deps)");
  std::unique_ptr<TlsFront> front(new TlsFront);
  front->dir_ = make_temp_dir("tls-front");
  front->cert_ = front->dir_ + "/cert.pem";
  const std::string key = front->dir_ + "/key.pem";
  // A self-signed certificate for the API host and every envd host; the
  // test trusts it as its CA.
  SubprocessOptions o;
  o.program = *openssl;
  o.argv = {"openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=corral test front",
            "-addext",
            "subjectAltName=DNS:api.sbx.localhost,DNS:*.sbx.localhost",
            "-keyout",
            key,
            "-out",
            front->cert_};
  o.timeout = std::chrono::milliseconds(60'000);
  auto made = run_subprocess(o);
  if (!made) return tl::unexpected(made.error().wrap("openssl req"));
  if (!made->exited_ok())
    return make_error(ErrorCode::kInternal, "openssl req failed: " + made->err);
  std::vector<std::string> env;
  if (!envd_version.empty()) env.push_back("ENVD_VERSION=" + envd_version);
  auto node = NodeHelper::start("tls_front.js", {front->cert_, key, upstream, "sbx.localhost"}, "",
                                {}, env);
  if (!node) return tl::unexpected(node.error().wrap("the TLS front"));
  front->node_ = std::move(*node);
  return front;
}

TlsFront::~TlsFront() {
  node_.reset();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

}  // namespace corral::testing
