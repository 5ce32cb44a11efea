#include "http/curl_exchange.h"

#include <algorithm>

#include "base/strings.h"
#include "http/curl_library.h"

namespace corral::http {
namespace {

bool is_token_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool has_control(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7f;
  });
}

// The URL as errors show it: without its query, where file paths go.
std::string shown(const CurlRequest& r) {
  return r.method + " " + printable_ascii(r.url.substr(0, r.url.find('?')), 200);
}

struct Exchange {
  const CurlLibrary* lib = nullptr;
  CURL* curl = nullptr;
  const CurlRequest* request = nullptr;
  const CurlBodySink* sink = nullptr;
  std::optional<Error> failure;  // what a callback stopped the exchange for
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const std::size_t n = size * count;
  long status = 0;
  x->lib->easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
  if (auto st = (*x->sink)(static_cast<int>(status), std::string_view(data, n)); !st) {
    x->failure = st.error();
    return 0;  // CURLE_WRITE_ERROR
  }
  return n;
}

std::size_t on_read(char* buf, std::size_t size, std::size_t count, void* user) {
  auto* x = static_cast<Exchange*>(user);
  auto n = (*x->request->source)(buf, size * count);
  if (!n) {
    x->failure = n.error();
    return CURL_READFUNC_ABORT;
  }
  return *n;
}

Error curl_failure(const CurlRequest& r, CURLcode rc, const char* errbuf, const CurlLibrary* lib) {
  const std::string why =
      printable_ascii(errbuf[0] != '\0' ? std::string(errbuf) : lib->easy_strerror(rc), 300);
  Error e;
  e.code = ErrorCode::kUnavailable;
  e.message = shown(r) + ": " + why;
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      e.code = ErrorCode::kTimeout;
      break;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CONNECT_ERROR:
      e.hint =
          "the server's certificate is not trusted here: give the CA that signed it "
          "(a PEM bundle, e.g. SSL_CERT_FILE), or check the host name";
      break;
    case CURLE_COULDNT_RESOLVE_HOST:
      e.hint = "check the host name and this machine's DNS";
      break;
    default:
      e.hint = "check that the service is up and reachable from this host";
      break;
  }
  return e;
}

}  // namespace

CurlSession::CurlSession(std::string ca_file) : ca_file_(std::move(ca_file)) {}

CurlSession::~CurlSession() {
  auto lib = curl_library();
  if (!lib) return;  // then no handle was ever made
  for (void* h : idle_) (*lib)->easy_cleanup(static_cast<CURL*>(h));
}

void* CurlSession::take_handle() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return (*curl_library())->easy_init();
}

void CurlSession::give_back(void* handle) {
  // A few idle handles keep their connections for the next exchanges;
  // more would only hold sockets open.
  constexpr std::size_t kMaxIdle = 8;
  const CurlLibrary* lib = *curl_library();
  lib->easy_reset(static_cast<CURL*>(handle));  // keeps connections and TLS sessions
  std::lock_guard lock(mu_);
  if (idle_.size() < kMaxIdle) {
    idle_.push_back(handle);
    return;
  }
  lib->easy_cleanup(static_cast<CURL*>(handle));
}

Result<int> CurlSession::perform(const CurlRequest& request, const CurlBodySink& sink) {
  const std::string& url = request.url;
  if ((url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) || has_control(url) ||
      url.find(' ') != std::string::npos)
    return make_error(ErrorCode::kInvalidArgument,
                      "not an http:// or https:// URL: \"" + printable_ascii(url, 200) + "\"");
  if (request.method.empty() ||
      !std::all_of(request.method.begin(), request.method.end(),
                   [](char c) { return is_token_char(static_cast<unsigned char>(c)); }))
    return make_error(ErrorCode::kInvalidArgument,
                      "not an HTTP method: \"" + printable_ascii(request.method, 40) + "\"");
  auto loaded = curl_library();
  if (!loaded) return tl::unexpected(loaded.error());
  const CurlLibrary* lib = *loaded;

  // Headers: a name or value that could end the line is refused, so that
  // no value (an access token from a service's answer) adds a header.
  curl_slist* list = nullptr;
  auto free_list = [&] {
    if (list != nullptr) lib->slist_free_all(list);
  };
  auto add = [&](const std::string& line) {
    curl_slist* next = lib->slist_append(list, line.c_str());
    if (next == nullptr) return false;
    list = next;
    return true;
  };
  bool added = add("Expect:");  // no 100-continue round trip before a body
  for (const auto& [name, value] : request.headers) {
    if (name.empty() ||
        !std::all_of(name.begin(), name.end(),
                     [](char c) { return is_token_char(static_cast<unsigned char>(c)); }) ||
        has_control(value)) {
      free_list();
      return make_error(ErrorCode::kInvalidArgument, "header \"" + printable_ascii(name, 60) +
                                                         "\" has a character that HTTP "
                                                         "does not allow in a header");
    }
    // "name;" is libcurl's spelling of a header with an empty value.
    added = added && add(value.empty() ? name + ";" : name + ": " + value);
  }
  if (request.source != nullptr && !request.source_length)
    added = added && add("Transfer-Encoding: chunked");
  if (!added) {
    free_list();
    return make_error(ErrorCode::kResourceExhausted, "curl_slist_append failed");
  }

  CURL* c = static_cast<CURL*>(take_handle());
  if (c == nullptr) {
    free_list();
    return make_error(ErrorCode::kResourceExhausted, "curl_easy_init failed");
  }
  Exchange x;
  x.lib = lib;
  x.curl = c;
  x.request = &request;
  x.sink = &sink;
  char errbuf[CURL_ERROR_SIZE] = {};
  lib->easy_setopt(c, CURLOPT_URL, url.c_str());
  lib->easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  lib->easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  lib->easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  lib->easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  lib->easy_setopt(c, CURLOPT_HTTPHEADER, list);
  lib->easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  lib->easy_setopt(c, CURLOPT_WRITEDATA, &x);
  if (!ca_file_.empty()) lib->easy_setopt(c, CURLOPT_CAINFO, ca_file_.c_str());
  lib->easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(request.connect_timeout.count()));
  if (request.timeout.count() > 0)
    lib->easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  if (request.stall_timeout.count() > 0) {
    lib->easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    lib->easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                     std::max(1L, static_cast<long>((request.stall_timeout.count() + 999) / 1000)));
  }
  if (request.method == "HEAD") {
    lib->easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.source != nullptr) {
    lib->easy_setopt(c, CURLOPT_POST, 1L);
    lib->easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    lib->easy_setopt(c, CURLOPT_READDATA, &x);
    if (request.source_length)
      lib->easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(*request.source_length));
  } else if (request.method != "GET" || !request.body.empty()) {
    lib->easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
    lib->easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  }
  if (request.method != "GET" && request.method != "POST" && request.method != "HEAD")
    lib->easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  else if (request.method == "GET" && !request.body.empty())
    lib->easy_setopt(c, CURLOPT_CUSTOMREQUEST, "GET");

  const CURLcode rc = lib->easy_perform(c);
  long status = 0;
  lib->easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  give_back(c);
  free_list();
  if (x.failure) return tl::unexpected(std::move(*x.failure));
  if (rc != CURLE_OK) return tl::unexpected(curl_failure(request, rc, errbuf, lib));
  return static_cast<int>(status);
}

Result<CurlAnswer> CurlSession::fetch(const CurlRequest& request, std::size_t limit) {
  CurlAnswer answer;
  auto status = perform(request, [&](int, std::string_view piece) -> Result<void> {
    if (piece.size() > limit - answer.body.size())
      return make_error(ErrorCode::kResourceExhausted, shown(request) + ": the answer is over " +
                                                           std::to_string(limit) + " bytes");
    answer.body.append(piece);
    return {};
  });
  if (!status) return tl::unexpected(status.error());
  answer.status = *status;
  return answer;
}

}  // namespace corral::http
