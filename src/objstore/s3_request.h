// One HTTP exchange with an S3-compatible service through libcurl, signed
// by libcurl's own AWS SigV4 (CURLOPT_AWS_SIGV4; ADR 0009): no signer of
// ours. The caller builds the path-style URL and the query (sorted and
// encoded, as the signature wants it); this file moves the bytes, streams
// bodies both ways, bounds what it keeps, and turns transport failures into
// kUnavailable. HTTP statuses are the caller's to judge.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace corral::objstore {

// SHA-256 of nothing: the payload hash of a request without a body.
inline constexpr const char* kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  S3Credentials() = default;
  S3Credentials(std::string id, std::string secret)
      : access_key_id(std::move(id)), secret_access_key(std::move(secret)) {}
  S3Credentials(const S3Credentials&) = default;
  S3Credentials& operator=(const S3Credentials&) = default;
  ~S3Credentials();  // wipes both
};

struct S3Request {
  std::string method = "GET";  // GET, PUT, HEAD, DELETE
  std::string url;             // endpoint/bucket/key?query, already encoded
  std::vector<std::string> headers;  // "Name: value", signed with the rest
  std::string payload_sha256 = kEmptySha256;
  // PUT: `body_size` bytes of `body_fd` from `body_offset` (read with
  // pread, so a retry starts again from the same place).
  int body_fd = -1;
  off_t body_offset = 0;
  std::uint64_t body_size = 0;
  // GET: the bytes of a 2xx answer go to the sink (else into the response's
  // body, bounded); `sink_hash` then receives them too.
  const std::function<Status(std::span<const char>)>* sink = nullptr;
  std::int64_t timeout_ms = 30'000;
  // A limit on the whole exchange as well (requests without a big body).
  bool whole_request_timeout = false;
};

struct S3Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-case, last wins
  std::string body;                            // bounded (1 MiB; lists 16 MiB)
  std::uint64_t delivered = 0;                 // bytes given to the sink
  std::int64_t modified_ms = -1;               // Last-Modified, when sent
  std::string uploaded_sha256;                 // hex SHA-256 of the bytes sent (PUT)
  std::string delivered_sha256;                // hex SHA-256 of the bytes given to the sink
};

// Performs one exchange. kUnavailable when the service cannot be reached or
// the transfer breaks (the message names the method and `shown`, never a
// credential); a sink's error is returned as it is.
Result<S3Response> perform_s3_request(const S3Request& request, const S3Credentials& credentials,
                                      const std::string& region, const std::string& shown);

// RFC 3986 percent-encoding of a query value or key (unreserved bytes kept).
std::string s3_query_encode(std::string_view text);

}  // namespace corral::objstore
