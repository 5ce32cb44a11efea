#include "objstore/s3_object_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/fs.h"
#include "base/random.h"
#include "base/sha256.h"
#include "base/strings.h"
#include "base/unique_fd.h"
#include "objstore/object_checks.h"
#include "objstore/object_store_config.h"
#include "objstore/s3_xml.h"

namespace corral::objstore {
namespace {

constexpr std::size_t kChunk = 256 * 1024;
constexpr std::string_view kMetaPrefix = "x-amz-meta-";
constexpr std::string_view kShaMeta = "sha256";

bool always() { return true; }

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool printable_token(std::string_view s) {
  return !s.empty() && s.size() <= 1024 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

struct HashedContent {
  std::uint64_t size = 0;
  std::string sha256;
};

// The size and sha256 of what `fd` holds from `offset` on, refused over
// `max_size` before anything is sent.
Result<HashedContent> hash_content(int fd, off_t offset, const PutOptions& options,
                                   const std::string& shown) {
  Sha256 hasher;
  HashedContent out;
  std::vector<char> buf(kChunk);
  for (;;) {
    ssize_t n = pread(fd, buf.data(), buf.size(), offset + static_cast<off_t>(out.size));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("putting " + shown + ": read");
    if (n == 0) break;
    out.size += static_cast<std::uint64_t>(n);
    if (options.max_size && out.size > *options.max_size) {
      return over_max_size("putting " + shown + ": the content is over its limit of " +
                            std::to_string(*options.max_size) + " bytes; nothing stored");
    }
    hasher.update(buf.data(), static_cast<std::size_t>(n));
  }
  out.sha256 = Sha256::hex(hasher.final());
  return out;
}

// A pipe cannot be read twice (hash, then send): its bytes go to an
// unnamed file first, up to max_size.
Result<UniqueFd> spool(int fd, const std::string& dir, const PutOptions& options,
                       const std::string& shown) {
  UniqueFd tmp(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!tmp) return errno_error("putting " + shown + ": open(" + dir + ", O_TMPFILE)");
  std::vector<char> buf(kChunk);
  std::uint64_t size = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("putting " + shown + ": read");
    if (n == 0) break;
    size += static_cast<std::uint64_t>(n);
    if (options.max_size && size > *options.max_size) {
      return over_max_size("putting " + shown + ": the content is over its limit of " +
                            std::to_string(*options.max_size) + " bytes; nothing stored");
    }
    CORRAL_TRY(write_all(tmp.get(), std::string_view(buf.data(), static_cast<std::size_t>(n)),
                         "spool of " + shown));
  }
  return tmp;
}

}  // namespace

namespace {
Status bad_setting(std::string_view what, std::string_view value, std::string hint) {
  return make_error(ErrorCode::kInvalidArgument,
                    "object store " + std::string(what) + " " + quote_for_message(value) +
                        " is not valid",
                    std::move(hint));
}

// "http(s)://host[:port]", an optional final '/' dropped.
Result<std::string> endpoint_checked(std::string endpoint) {
  std::string_view rest = endpoint;
  if (rest.rfind("http://", 0) == 0) {
    rest.remove_prefix(7);
  } else if (rest.rfind("https://", 0) == 0) {
    rest.remove_prefix(8);
  } else {
    return tl::unexpected(bad_setting("endpoint", endpoint, "use http(s)://host[:port]").error());
  }
  if (!rest.empty() && rest.back() == '/') {
    rest.remove_suffix(1);
    endpoint.pop_back();
  }
  bool good = !rest.empty() && rest.size() <= 255;
  for (char c : rest) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '-' || c == ':' || c == '[' || c == ']'))
      good = false;
  }
  if (!good) {
    return tl::unexpected(bad_setting("endpoint", endpoint,
                                      "use http(s)://host[:port] without a path, a user or a "
                                      "query: the bucket and prefix are settings of their own")
                              .error());
  }
  return endpoint;
}

bool valid_bucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(b.front()) || !alnum(b.back())) return false;
  return std::all_of(b.begin(), b.end(), [&](char c) { return alnum(c) || c == '.' || c == '-'; });
}

bool valid_region(std::string_view r) {
  return !r.empty() && r.size() <= 64 && std::all_of(r.begin(), r.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

}  // namespace

Result<std::string> check_s3_endpoint(std::string_view endpoint) {
  return endpoint_checked(std::string(endpoint));
}

Status check_s3_bucket(std::string_view bucket) {
  if (valid_bucket(bucket)) return ok();
  return bad_setting("bucket", bucket,
                     "3-63 of [a-z0-9.-], starting and ending with a letter or digit");
}

Status check_s3_region(std::string_view region) {
  if (valid_region(region)) return ok();
  return bad_setting("region", region, "for example us-east-1");
}

Status check_s3_prefix(std::string_view prefix) {
  if (valid_key_prefix(prefix)) return ok();
  return bad_setting("prefix", prefix, "a prefix is the start of a valid key, such as corral/");
}

Error s3_status_error(const S3Response& response, const std::string& what) {
  S3ErrorBody body = parse_error_body(response.body);
  std::string message = what + ": HTTP " + std::to_string(response.status);
  if (!body.code.empty()) message += " " + printable_ascii(body.code, 64);
  if (!body.message.empty()) message += ": " + printable_ascii(body.message, 200);
  long s = response.status;
  if (s == 404 && body.code == "NoSuchBucket") {
    return Error{ErrorCode::kUnavailable, message,
                 "create the bucket, or fix serve.object_store.bucket", 0};
  }
  if (s == 404) return Error{ErrorCode::kNotFound, message, "", 0};
  if (s == 401 || s == 403) {
    return Error{ErrorCode::kPermissionDenied, message,
                 "check the secrets named by serve.object_store.access_key_secret and "
                 "secret_key_secret, and the region",
                 0};
  }
  if (s == 413 || body.code == "EntityTooLarge") {
    return Error{ErrorCode::kResourceExhausted, message, "", 0};
  }
  if (s == 400) return Error{ErrorCode::kInvalidArgument, message, "", 0};
  return Error{ErrorCode::kUnavailable, message, "the object store answered with an error", 0};
}

Result<std::unique_ptr<S3ObjectStore>> S3ObjectStore::open(S3Config config,
                                                           S3Credentials credentials) {
  auto endpoint = check_s3_endpoint(config.endpoint);
  if (!endpoint) return tl::unexpected(endpoint.error());
  config.endpoint = *endpoint;
  CORRAL_TRY(check_s3_bucket(config.bucket));
  CORRAL_TRY(check_s3_prefix(config.prefix));
  if (!config.prefix.empty() && config.prefix.back() != '/') config.prefix += '/';
  CORRAL_TRY(check_s3_region(config.region));
  if (config.timeout_ms < 100 || config.max_attempts < 1 || config.list_page_size < 1 ||
      config.list_page_size > 1000) {
    return make_error(ErrorCode::kInvalidArgument,
                      "object store timeout, attempts or page size out of range");
  }
  if (!printable_token(credentials.access_key_id) ||
      !printable_token(credentials.secret_access_key)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the object store's access key id or secret key is empty or holds a byte "
                      "outside printable ASCII",
                      "fix the secret store entries named by serve.object_store");
  }
  return std::unique_ptr<S3ObjectStore>(
      new S3ObjectStore(std::move(config), std::move(credentials)));
}

S3ObjectStore::S3ObjectStore(S3Config config, S3Credentials credentials)
    : config_(std::move(config)), credentials_(std::move(credentials)) {}

std::string S3ObjectStore::describe() const {
  std::string out = config_.endpoint + "/" + config_.bucket;
  if (!config_.prefix.empty()) out += "/" + config_.prefix.substr(0, config_.prefix.size() - 1);
  return out;
}

std::string S3ObjectStore::object_url(std::string_view key) const {
  return config_.endpoint + "/" + config_.bucket + "/" + config_.prefix + std::string(key);
}

std::string S3ObjectStore::shown(std::string_view key) const {
  return "object " + std::string(key) + " in S3 store " + describe();
}

Result<S3Response> S3ObjectStore::send(const S3Request& request, const std::string& what,
                                       const std::function<bool()>& may_retry) {
  Result<S3Response> last = make_error(ErrorCode::kInternal, "no attempt");
  for (int attempt = 1; attempt <= config_.max_attempts; ++attempt) {
    if (attempt > 1) {
      std::int64_t backoff = config_.retry_base_ms << (2 * (attempt - 2));
      auto jitter = static_cast<std::int64_t>(
          random_below(static_cast<std::uint64_t>(std::max<std::int64_t>(1, backoff))));
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff + jitter));
    }
    last = perform_s3_request(request, credentials_, config_.region, what);
    bool transient = (!last && last.error().code == ErrorCode::kUnavailable) ||
                     (last && last->status >= 500);
    if (!transient || !may_retry()) return last;
  }
  if (last && last->status >= 500) {
    auto e = s3_status_error(*last, what);
    e.message += " (after " + std::to_string(config_.max_attempts) + " attempts)";
    return tl::unexpected(std::move(e));
  }
  if (!last) last.error().message += " (after " + std::to_string(config_.max_attempts) + " attempts)";
  return last;
}

Status S3ObjectStore::probe() {
  // A one-key list rather than a HEAD of the bucket: its error body names
  // the reason (SignatureDoesNotMatch, NoSuchBucket, AccessDenied).
  S3Request request;
  request.url = config_.endpoint + "/" + config_.bucket +
                "?list-type=2&max-keys=1&prefix=" + s3_query_encode(config_.prefix);
  request.timeout_ms = config_.timeout_ms;
  request.whole_request_timeout = true;
  std::string what = "checking S3 store " + describe();
  auto response = send(request, what, [] { return false; });  // once: the daemon is starting
  if (!response) return tl::unexpected(response.error());
  if (response->status / 100 == 2) return ok();
  auto e = s3_status_error(*response, what);
  if (response->status == 404) {  // NoSuchBucket: a setting to fix, not an outage
    e.code = ErrorCode::kNotFound;
    e.hint = "create the bucket, or fix serve.object_store.bucket";
  }
  return tl::unexpected(std::move(e));
}

Result<ObjectInfo> S3ObjectStore::put_fd(std::string_view key, int fd, const PutOptions& options) {
  CORRAL_TRY(check_key(key));
  off_t offset = lseek(fd, 0, SEEK_CUR);
  if (offset < 0 && errno != ESPIPE) return errno_error("putting " + shown(key) + ": lseek");
  if (offset < 0) {
    auto spooled = spool(fd, config_.spool_dir, options, shown(key));
    if (!spooled) return tl::unexpected(spooled.error());
    return put_seekable(key, spooled->get(), 0, options);
  }
  auto info = put_seekable(key, fd, offset, options);
  if (info) lseek(fd, offset + static_cast<off_t>(info->size), SEEK_SET);
  return info;
}

Result<ObjectInfo> S3ObjectStore::put_bytes(std::string_view key, std::string_view bytes,
                                            const PutOptions& options) {
  CORRAL_TRY(check_key(key));
  UniqueFd mem(memfd_create("corral-s3-put", MFD_CLOEXEC));
  if (!mem) return errno_error("putting " + shown(key) + ": memfd_create");
  CORRAL_TRY(write_all(mem.get(), bytes, "memfd of " + shown(key)));
  return put_seekable(key, mem.get(), 0, options);
}

Result<ObjectInfo> S3ObjectStore::put_seekable(std::string_view key, int fd, off_t offset,
                                               const PutOptions& options) {
  auto expected = check_put_options(options);
  if (!expected) return tl::unexpected(expected.error().wrap("putting " + shown(key)));
  auto content = hash_content(fd, offset, options, shown(key));
  if (!content) return tl::unexpected(content.error());
  if (*expected && **expected != content->sha256) {
    return make_error(ErrorCode::kInvalidArgument,
                      "putting " + shown(key) + ": the content's sha256 is " + content->sha256 +
                          ", not the expected " + **expected + "; nothing stored");
  }
  S3Request request;
  request.method = "PUT";
  request.url = object_url(key);
  request.payload_sha256 = content->sha256;
  request.headers.push_back("Content-Type: application/octet-stream");
  request.headers.push_back(std::string(kMetaPrefix) + std::string(kShaMeta) + ": " +
                            content->sha256);
  for (const auto& [name, value] : options.metadata) {
    request.headers.push_back(std::string(kMetaPrefix) + name + ": " + value);
  }
  request.body_fd = fd;
  request.body_offset = offset;
  request.body_size = content->size;
  request.timeout_ms = config_.timeout_ms;
  std::string what = "putting " + shown(key);
  auto response = send(request, what, always);
  if (!response) return tl::unexpected(response.error());
  if (response->status / 100 != 2) return tl::unexpected(s3_status_error(*response, what));
  if (response->uploaded_sha256 != content->sha256) {
    // The file changed between hashing and sending: what is stored is not
    // what was hashed (a service that checks x-amz-content-sha256 refuses
    // it already).
    (void)remove(key);
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": the content changed while it was sent; nothing stored");
  }
  ObjectInfo info;
  info.key = std::string(key);
  info.size = content->size;
  info.sha256 = content->sha256;
  info.modified_ms = now_ms();
  info.metadata = options.metadata;
  return info;
}

Result<ObjectInfo> S3ObjectStore::info_from_head(std::string_view key,
                                                 const S3Response& response) const {
  ObjectInfo info;
  info.key = std::string(key);
  info.modified_ms = response.modified_ms;
  auto length = response.headers.find("content-length");
  if (length != response.headers.end()) {
    info.size = std::strtoull(length->second.c_str(), nullptr, 10);
  }
  for (const auto& [name, value] : response.headers) {
    if (name.rfind(kMetaPrefix, 0) != 0) continue;
    std::string meta = name.substr(kMetaPrefix.size());
    if (meta == kShaMeta) {
      auto digest = normalize_sha256(value);
      if (!digest) {
        return make_error(ErrorCode::kInvalidArgument,
                          shown(key) + " is corrupted: its recorded sha256 is not valid");
      }
      info.sha256 = *digest;
    } else {
      info.metadata[meta] = value;
    }
  }
  return info;
}

Result<ObjectInfo> S3ObjectStore::get(std::string_view key, const ObjectSink& sink) {
  CORRAL_TRY(check_key(key));
  S3Request request;
  request.url = object_url(key);
  // Bytes already handed to the sink cannot be taken back: no retry then
  // (the sink sees only the bytes of a 2xx answer).
  bool delivered = false;
  ObjectSink counting = [&](std::span<const char> chunk) {
    delivered = true;
    return sink(chunk);
  };
  request.sink = &counting;
  request.timeout_ms = config_.timeout_ms;
  std::string what = "getting " + shown(key);
  auto response = send(request, what, [&] { return !delivered; });
  if (!response) return tl::unexpected(response.error());
  if (response->status / 100 != 2) return tl::unexpected(s3_status_error(*response, what));
  auto info = info_from_head(key, *response);
  if (!info) return info;
  if (response->delivered != info->size) {
    return make_error(ErrorCode::kUnavailable, what + ": the transfer ended after " +
                                                   std::to_string(response->delivered) + " of " +
                                                   std::to_string(info->size) + " bytes");
  }
  if (!info->sha256.empty() && info->sha256 != response->delivered_sha256) {
    return make_error(ErrorCode::kInvalidArgument,
                      shown(key) + " is corrupted: its content's sha256 is " +
                          response->delivered_sha256 + ", not the " + info->sha256 +
                          " recorded at put");
  }
  info->sha256 = response->delivered_sha256;
  return info;
}

Result<ObjectInfo> S3ObjectStore::head(std::string_view key) {
  CORRAL_TRY(check_key(key));
  S3Request request;
  request.method = "HEAD";
  request.url = object_url(key);
  request.timeout_ms = config_.timeout_ms;
  request.whole_request_timeout = true;
  std::string what = "looking up " + shown(key);
  auto response = send(request, what, always);
  if (!response) return tl::unexpected(response.error());
  if (response->status / 100 != 2) return tl::unexpected(s3_status_error(*response, what));
  return info_from_head(key, *response);
}

Status S3ObjectStore::remove(std::string_view key) {
  CORRAL_TRY(check_key(key));
  S3Request request;
  request.method = "DELETE";
  request.url = object_url(key);
  request.timeout_ms = config_.timeout_ms;
  request.whole_request_timeout = true;
  std::string what = "removing " + shown(key);
  auto response = send(request, what, always);
  if (!response) return tl::unexpected(response.error());
  if (response->status / 100 == 2 || response->status == 404) return ok();
  return tl::unexpected(s3_status_error(*response, what));
}

Result<std::vector<ObjectInfo>> S3ObjectStore::list(std::string_view prefix) {
  CORRAL_TRY(check_prefix(prefix));
  std::string full_prefix = config_.prefix + std::string(prefix);
  std::string what = "listing " + quote_for_message(prefix) + " in S3 store " + describe();
  std::vector<std::string> keys;
  std::string token;
  for (;;) {
    // The query in the order SigV4's canonical form sorts it.
    std::string query;
    if (!token.empty()) query += "continuation-token=" + s3_query_encode(token) + "&";
    query += "list-type=2&max-keys=" + std::to_string(config_.list_page_size) +
             "&prefix=" + s3_query_encode(full_prefix);
    S3Request request;
    request.url = config_.endpoint + "/" + config_.bucket + "?" + query;
    request.timeout_ms = config_.timeout_ms;
    auto response = send(request, what, always);
    if (!response) return tl::unexpected(response.error());
    if (response->status / 100 != 2) return tl::unexpected(s3_status_error(*response, what));
    auto page = parse_list_page(response->body);
    if (!page) return tl::unexpected(page.error().wrap(what));
    for (auto& entry : page->entries) {
      if (entry.key.rfind(full_prefix, 0) != 0) continue;
      std::string key = entry.key.substr(config_.prefix.size());
      if (valid_object_key(key)) keys.push_back(std::move(key));  // others are not ours
    }
    if (!page->truncated) break;
    if (page->next_token == token) {
      return make_error(ErrorCode::kUnavailable, what + ": the service repeated a page token");
    }
    token = page->next_token;
  }
  // The listing has no user metadata: each object's comes from its HEAD.
  std::vector<ObjectInfo> out;
  for (const auto& key : keys) {
    auto info = head(key);
    if (!info && info.error().code == ErrorCode::kNotFound) continue;  // removed meanwhile
    if (!info) return tl::unexpected(info.error());
    out.push_back(std::move(*info));
  }
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

}  // namespace corral::objstore
