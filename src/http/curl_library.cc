#include "http/curl_library.h"

#include <mutex>
#include <string>

#include "base/shared_library.h"

namespace corral::http {

Result<const CurlLibrary*> curl_library() {
  static std::once_flag once;
  static CurlLibrary library{};
  static std::string failure;
  std::call_once(once, [] {
    void* handle = open_shared_library("libcurl.so.4", failure);
    if (handle == nullptr) return;
    using GlobalInit = CURLcode (*)(long);
    using VersionInfo = curl_version_info_data* (*)(CURLversion);
    GlobalInit global_init = nullptr;
    VersionInfo version_info = nullptr;
    bool all = load_symbol(handle, "curl_global_init", global_init) &&
               load_symbol(handle, "curl_version_info", version_info) &&
               load_symbol(handle, "curl_easy_init", library.easy_init) &&
               load_symbol(handle, "curl_easy_setopt", library.easy_setopt) &&
               load_symbol(handle, "curl_easy_perform", library.easy_perform) &&
               load_symbol(handle, "curl_easy_getinfo", library.easy_getinfo) &&
               load_symbol(handle, "curl_easy_cleanup", library.easy_cleanup) &&
               load_symbol(handle, "curl_easy_reset", library.easy_reset) &&
               load_symbol(handle, "curl_easy_strerror", library.easy_strerror) &&
               load_symbol(handle, "curl_slist_append", library.slist_append) &&
               load_symbol(handle, "curl_slist_free_all", library.slist_free_all);
    if (!all) {
      failure = "libcurl.so.4 lacks a function corral uses";
      return;
    }
    // CURLOPT_AWS_SIGV4 came in 7.75, CURLOPT_PROTOCOLS_STR in 7.85.
    const curl_version_info_data* v = version_info(CURLVERSION_NOW);
    if (v == nullptr || v->version_num < 0x075500) {
      failure = std::string("libcurl ") + (v ? v->version : "?") +
                " is older than 7.85, which corral needs";
      return;
    }
    if (global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      failure = "curl_global_init failed";
      return;
    }
  });
  if (!failure.empty()) {
    return make_error(ErrorCode::kUnavailable, failure,
                      "install libcurl4 (Debian 12: apt-get install libcurl4)");
  }
  return &library;
}

}  // namespace corral::http
