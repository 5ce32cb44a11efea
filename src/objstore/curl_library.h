// libcurl, loaded with dlopen the first time an S3 store sends a request
// (ADR 0009). Linking it would make every `corral run` load libcurl and its
// ~30 shared dependencies (Debian 12 has no static archives of them), so
// corral links only libc dynamically and the daemon loads libcurl when it
// needs it. Types and constants still come from <curl/curl.h>.
#pragma once

#include <curl/curl.h>

#include "base/result.h"

namespace corral::objstore {

struct CurlLibrary {
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// libcurl.so.4, loaded and initialized once (thread-safe); kUnavailable
// with an install hint when it is missing or too old for SigV4.
Result<const CurlLibrary*> curl_library();

}  // namespace corral::objstore
