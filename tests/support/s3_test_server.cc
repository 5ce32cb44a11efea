#include "support/s3_test_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

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
  auto node = find_program("node");
  if (!node) return make_error(ErrorCode::kUnavailable, "node is not installed (scripts/install-deps)");
  std::string npm = source_dir() + "/tests/npm";
  if (!std::filesystem::exists(npm + "/node_modules/@20minutes/s3rver/package.json")) {
    return make_error(ErrorCode::kUnavailable,
                      "the S3 test server is not installed in " + npm +
                          "/node_modules (run scripts/install-deps: npm ci)");
  }
  std::unique_ptr<S3TestServer> server(new S3TestServer);
  server->bucket_ = bucket;
  server->dir_ = make_temp_dir("s3");
  int in[2];
  int out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return errno_error("pipe2");
  std::string script = npm + "/s3_server.js";
  std::string data = server->dir_ + "/data";
  pid_t pid = fork();
  if (pid < 0) return errno_error("fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    // The server's list continuation tokens use DES, which OpenSSL 3 keeps
    // in its legacy provider.
    const char* argv[] = {node->c_str(), "--openssl-legacy-provider", script.c_str(), data.c_str(),
                          bucket.c_str(), kAccessKey, kSecretKey, nullptr};
    execv(node->c_str(), const_cast<char* const*>(argv));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  server->pid_ = pid;
  server->stdin_fd_ = in[1];
  // Its first line is "PORT <n>" (node starts in seconds on a busy host;
  // 120 s is a bound on a hang, not a speed expectation).
  std::string line;
  for (int waited_ms = 0; line.find('\n') == std::string::npos && waited_ms < 120'000;) {
    pollfd p{out[0], POLLIN, 0};
    int r = poll(&p, 1, 500);
    waited_ms += 500;
    if (r <= 0) continue;
    char buf[256];
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, static_cast<std::size_t>(n));
  }
  close(out[0]);
  if (line.rfind("PORT ", 0) != 0) {
    return make_error(ErrorCode::kInternal, "the S3 test server did not start: " + line);
  }
  server->port_ = std::atoi(line.c_str() + 5);
  return server;
}

S3TestServer::~S3TestServer() {
  if (stdin_fd_ >= 0) close(stdin_fd_);  // it exits when its stdin ends
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

S3TestServer::CurlResult S3TestServer::curl(const std::string& method, const std::string& path,
                                            const std::string& upload_file,
                                            const std::vector<std::string>& headers,
                                            const std::string& secret_key) const {
  std::string head_file = dir_ + "/curl-headers";
  SubprocessOptions o;
  o.argv = {"curl", "-s", "-S", "-X", method,
            "--aws-sigv4", std::string("aws:amz:") + kRegion + ":s3",
            "--user", std::string(kAccessKey) + ":" + secret_key,
            "-D", head_file, "-w", "\n%{http_code}"};
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
