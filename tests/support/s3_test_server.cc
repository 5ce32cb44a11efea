#include "support/s3_test_server.h"

#include <filesystem>
#include <fstream>

#include "base/sha256.h"
#include "base/subprocess.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Sha256 hasher;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    hasher.update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  return Sha256::hex(hasher.final());
}

}  // namespace

Result<std::unique_ptr<S3TestServer>> S3TestServer::start(const std::string& bucket) {
  std::unique_ptr<S3TestServer> server(new S3TestServer);
  server->bucket_ = bucket;
  server->dir_ = make_temp_dir("s3");
  // The server's list continuation tokens use DES, which OpenSSL 3 keeps
  // in its legacy provider.
  auto node = NodeHelper::start(
      "s3_server.js", {server->dir_ + "/data", bucket, kAccessKey, kSecretKey},
      "node_modules/@20minutes/s3rver/package.json", {"--openssl-legacy-provider"});
  if (!node) return tl::unexpected(node.error().wrap("the S3 test server"));
  server->node_ = std::move(*node);
  return server;
}

S3TestServer::~S3TestServer() {
  node_.reset();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

S3TestServer::CurlResult S3TestServer::curl(const std::string& method, const std::string& path,
                                            const std::string& upload_file,
                                            const std::vector<std::string>& headers,
                                            const std::string& secret_key) const {
  std::string head_file = dir_ + "/curl-headers";
  SubprocessOptions o;
  o.argv = {"curl",
            "-s",
            "-S",
            "-X",
            method,
            "--aws-sigv4",
            std::string("aws:amz:") + kRegion + ":s3",
            "--user",
            std::string(kAccessKey) + ":" + secret_key,
            "-D",
            head_file,
            "-w",
            "\n%{http_code}"};
  std::string payload = upload_file.empty() ? sha256_hex("") : file_sha256(upload_file);
  o.argv.insert(o.argv.end(), {"-H", "x-amz-content-sha256: " + payload});
  if (!upload_file.empty()) o.argv.insert(o.argv.end(), {"--data-binary", "@" + upload_file});
  if (method == "HEAD") o.argv.push_back("-I");
  for (const auto& h : headers) o.argv.insert(o.argv.end(), {"-H", h});
  o.argv.push_back(endpoint() + path);
  o.program = find_program("curl").value_or("/usr/bin/curl");
  o.output_limit = 256u << 20;
  o.timeout = std::chrono::milliseconds(120'000);
  CurlResult result;
  auto run = run_subprocess(o);
  if (!run) return result;
  std::string& out = run->out;
  std::size_t nl = out.rfind('\n');
  if (nl == std::string::npos) return result;
  result.status = std::atoi(out.c_str() + nl + 1);
  result.body = out.substr(0, nl);
  std::ifstream h(head_file);
  result.headers.assign(std::istreambuf_iterator<char>(h), std::istreambuf_iterator<char>());
  return result;
}

}  // namespace corral::testing
