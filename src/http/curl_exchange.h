// HTTP exchanges through libcurl (http/curl_library.h) for clients of
// services corral does not run itself, such as an E2B-compatible cloud:
// https with the system's CA bundle or a given one, host names resolved,
// HTTP/2 when the server offers it, no redirects, no other protocols.
// corral's own client (http_client.h) stays libcurl-free: the CLI talks to
// its daemon on loopback or a unix socket and needs none of this.
//
//   CurlSession s("");                      // libcurl's default CA bundle
//   CurlRequest r{.method = "GET", .url = "https://api.example.com/x"};
//   auto answer = s.fetch(r, 1 << 20);      // status and body
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "http/http_client.h"
#include "http/http_message.h"

namespace corral::http {

struct CurlRequest {
  std::string method = "GET";
  std::string url;  // http:// or https://
  Headers headers;  // names and values without control characters
  // The body: `body` with its length, or, when `source` is set, streamed
  // from it (with Content-Length when `source_length` is given, chunked
  // otherwise).
  std::string_view body;
  const BodySource* source = nullptr;
  std::optional<std::uint64_t> source_length;
  std::chrono::milliseconds connect_timeout{30000};
  std::chrono::milliseconds timeout{0};        // the whole exchange; 0: none
  std::chrono::milliseconds stall_timeout{0};  // no byte either way for this long; 0: none
};

// The answer's status and a piece of its body, as the pieces arrive. An
// error returned stops the exchange and is what perform() then returns.
using CurlBodySink = std::function<Result<void>(int status, std::string_view piece)>;

struct CurlAnswer {
  int status = 0;
  std::string body;
};

// Exchanges share a session's connections (keep-alive, TLS sessions): an
// idle handle keeps its connection cache and is reused by the next
// exchange. Thread-safe; exchanges run concurrently on separate handles.
class CurlSession {
 public:
  // `ca_file`: the PEM bundle that verifies servers; empty for libcurl's
  // default (Debian: /etc/ssl/certs/ca-certificates.crt).
  explicit CurlSession(std::string ca_file = "");
  ~CurlSession();
  CurlSession(const CurlSession&) = delete;
  CurlSession& operator=(const CurlSession&) = delete;

  // The answer's status, whatever it is (4xx and 5xx are the caller's to
  // read); kInvalidArgument for a URL or header corral will not send,
  // kUnavailable when the server cannot be reached or its certificate is
  // not trusted, kTimeout when a timeout ends the exchange.
  Result<int> perform(const CurlRequest& request, const CurlBodySink& sink);
  // The whole answer; kResourceExhausted when the body passes `limit`.
  Result<CurlAnswer> fetch(const CurlRequest& request, std::size_t limit);

 private:
  void* take_handle();
  void give_back(void* handle);

  std::string ca_file_;
  std::mutex mu_;
  std::vector<void*> idle_;  // CURL*
};

}  // namespace corral::http
