#include "objstore/s3_request.h"

#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "base/sha256.h"
#include "base/strings.h"
#include "http/curl_library.h"

namespace corral::objstore {

using http::curl_library;
using http::CurlLibrary;
namespace {

constexpr std::size_t kMaxKeptBody = 16u << 20;

struct Exchange {
  const S3Request* request = nullptr;
  S3Response response;
  Sha256 upload_hash;
  Sha256 sink_hash;
  std::uint64_t uploaded = 0;
  Status failure = ok();  // the sink's or the body file's error
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* x = static_cast<Exchange*>(user);
  std::string_view line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new answer (a "100 Continue" may come first): its status and headers.
    x->response.headers.clear();
    std::size_t sp = line.find(' ');
    x->response.status = sp == std::string_view::npos ? 0 : std::atol(line.data() + sp + 1);
    return size * count;
  }
  std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * count;
  std::string name = ascii_lower(line.substr(0, colon));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
    value.remove_suffix(1);
  x->response.headers[name] = std::string(value);
  return size * count;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* x = static_cast<Exchange*>(user);
  std::size_t n = size * count;
  if (x->request->sink != nullptr && x->response.status / 100 == 2) {
    x->sink_hash.update(data, n);
    x->response.delivered += n;
    Status st = (*x->request->sink)(std::span<const char>(data, n));
    if (!st) {
      x->failure = std::move(st);
      return 0;  // CURLE_WRITE_ERROR ends the transfer
    }
    return n;
  }
  std::size_t keep = std::min(n, kMaxKeptBody - std::min(kMaxKeptBody, x->response.body.size()));
  x->response.body.append(data, keep);
  return n;
}

std::size_t on_read(char* buf, std::size_t size, std::size_t count, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const S3Request& r = *x->request;
  std::uint64_t left = r.body_size - x->uploaded;
  std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(size * count, left));
  if (want == 0) return 0;
  for (;;) {
    ssize_t n = pread(r.body_fd, buf, want, r.body_offset + static_cast<off_t>(x->uploaded));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      x->failure = n < 0 ? Status(errno_error("read(object content)"))
                         : Status(make_error(ErrorCode::kInvalidArgument,
                                             "the content got shorter while it was sent"));
      return CURL_READFUNC_ABORT;
    }
    x->upload_hash.update(buf, static_cast<std::size_t>(n));
    x->uploaded += static_cast<std::uint64_t>(n);
    return static_cast<std::size_t>(n);
  }
}

// A fresh handle starts the read from the beginning (a retry, or curl
// rewinding after a redirect or an auth round).
int on_seek(void* user, curl_off_t offset, int origin) {
  auto* x = static_cast<Exchange*>(user);
  if (origin != SEEK_SET || offset != 0) return CURL_SEEKFUNC_CANTSEEK;
  x->uploaded = 0;
  x->upload_hash.reset();
  return CURL_SEEKFUNC_OK;
}

struct CurlDeleter {
  const CurlLibrary* lib;
  void operator()(CURL* c) const { lib->easy_cleanup(c); }
};
struct SlistDeleter {
  const CurlLibrary* lib;
  void operator()(curl_slist* l) const { lib->slist_free_all(l); }
};

}  // namespace

S3Credentials::~S3Credentials() {
  explicit_bzero(access_key_id.data(), access_key_id.size());
  explicit_bzero(secret_access_key.data(), secret_access_key.size());
}

std::string s3_query_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

Result<S3Response> perform_s3_request(const S3Request& request, const S3Credentials& credentials,
                                      const std::string& region, const std::string& shown) {
  auto loaded = curl_library();
  if (!loaded) return tl::unexpected(loaded.error());
  const CurlLibrary* lib = *loaded;
  std::unique_ptr<CURL, CurlDeleter> curl(lib->easy_init(), CurlDeleter{lib});
  if (!curl) return make_error(ErrorCode::kResourceExhausted, "curl_easy_init failed");
  CURL* c = curl.get();
  Exchange x;
  x.request = &request;
  char errbuf[CURL_ERROR_SIZE] = {};

  std::unique_ptr<curl_slist, SlistDeleter> headers(nullptr, SlistDeleter{lib});
  auto add_header = [&](const std::string& h) {
    curl_slist* next = lib->slist_append(headers.get(), h.c_str());
    if (next != nullptr) {
      (void)headers.release();
      headers.reset(next);
    }
    return next != nullptr;
  };
  // (Not "Expect:" to drop 100-continue: libcurl 7.88 would sign the
  // emptied header, and servers then compute another signature.)
  bool added = add_header("x-amz-content-sha256: " + request.payload_sha256);
  for (const auto& h : request.headers) added = added && add_header(h);
  if (!added) return make_error(ErrorCode::kResourceExhausted, "curl_slist_append failed");

  std::string sigv4 = "aws:amz:" + region + ":s3";
  lib->easy_setopt(c, CURLOPT_URL, request.url.c_str());
  lib->easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  lib->easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  lib->easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  lib->easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  lib->easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4.c_str());
  lib->easy_setopt(c, CURLOPT_USERNAME, credentials.access_key_id.c_str());
  lib->easy_setopt(c, CURLOPT_PASSWORD, credentials.secret_access_key.c_str());
  lib->easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  lib->easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  lib->easy_setopt(c, CURLOPT_HEADERDATA, &x);
  lib->easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  lib->easy_setopt(c, CURLOPT_WRITEDATA, &x);
  lib->easy_setopt(c, CURLOPT_FILETIME, 1L);
  lib->easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.timeout_ms));
  // A transfer that moves nothing for the timeout has stalled.
  lib->easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  lib->easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>((request.timeout_ms + 999) / 1000)));
  if (request.whole_request_timeout) {
    lib->easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_ms));
  }
  if (request.method == "PUT") {
    lib->easy_setopt(c, CURLOPT_UPLOAD, 1L);
    lib->easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body_size));
    lib->easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    lib->easy_setopt(c, CURLOPT_READDATA, &x);
    lib->easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
    lib->easy_setopt(c, CURLOPT_SEEKDATA, &x);
  } else if (request.method == "HEAD") {
    lib->easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET") {
    lib->easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  CURLcode rc = lib->easy_perform(c);
  if (!x.failure) return tl::unexpected(std::move(x.failure).error());
  if (rc != CURLE_OK) {
    std::string why = errbuf[0] != '\0' ? std::string(errbuf) : lib->easy_strerror(rc);
    return make_error(ErrorCode::kUnavailable,
                      "S3 " + request.method + " " + shown + ": " + printable_ascii(why, 200),
                      "check that the object store's endpoint is reachable from this host");
  }
  lib->easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x.response.status);
  long filetime = -1;
  if (lib->easy_getinfo(c, CURLINFO_FILETIME, &filetime) == CURLE_OK && filetime >= 0) {
    x.response.modified_ms = static_cast<std::int64_t>(filetime) * 1000;
  }
  if (request.method == "PUT") x.response.uploaded_sha256 = Sha256::hex(x.upload_hash.final());
  if (request.sink != nullptr) x.response.delivered_sha256 = Sha256::hex(x.sink_hash.final());
  return std::move(x.response);
}

}  // namespace corral::objstore
