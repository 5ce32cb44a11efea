#include "http/curl_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace corral::http {
namespace {

template <typename F>
bool load(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, name));
  return out != nullptr;
}

}  // namespace

Result<const CurlLibrary*> curl_library() {
  static std::once_flag once;
  static CurlLibrary library{};
  static std::string failure;
  std::call_once(once, [] {
    // Never unloaded: handles and callbacks live as long as the process.
    void* handle = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      failure = std::string("cannot load libcurl.so.4: ") + (why ? why : "unknown error");
      return;
    }
    using GlobalInit = CURLcode (*)(long);
    using VersionInfo = curl_version_info_data* (*)(CURLversion);
    GlobalInit global_init = nullptr;
    VersionInfo version_info = nullptr;
    bool all = load(handle, "curl_global_init", global_init) &&
               load(handle, "curl_version_info", version_info) &&
               load(handle, "curl_easy_init", library.easy_init) &&
               load(handle, "curl_easy_setopt", library.easy_setopt) &&
               load(handle, "curl_easy_perform", library.easy_perform) &&
               load(handle, "curl_easy_getinfo", library.easy_getinfo) &&
               load(handle, "curl_easy_cleanup", library.easy_cleanup) &&
               load(handle, "curl_easy_reset", library.easy_reset) &&
               load(handle, "curl_easy_strerror", library.easy_strerror) &&
               load(handle, "curl_slist_append", library.slist_append) &&
               load(handle, "curl_slist_free_all", library.slist_free_all);
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
