// libcurl, loaded with dlopen the first time something needs it: an S3
// object store's request (ADR 0009) or the E2B provider's exchanges
// (http/curl_exchange.h). Linking it would make every `corral run` load
// libcurl and its ~30 shared dependencies (Debian 12 has no static archives
// of them), so corral links only libc dynamically and loads libcurl when it
// needs it. Types and constants still come from <curl/curl.h>.
#pragma once

#include <curl/curl.h>

#include "base/result.h"

namespace corral::http {

struct CurlLibrary {
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  void (*easy_reset)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// libcurl.so.4, loaded and initialized once (thread-safe); kUnavailable
// with an install hint when it is missing or older than 7.85.
Result<const CurlLibrary*> curl_library();

}  // namespace corral::http
