// A shared library loaded the first time a feature needs it, not linked:
// libcurl (http/curl_library.h) and libpq (store/pq_library.h). corral links
// only libc dynamically, so what few users need is loaded by those who do.
#pragma once

#include <dlfcn.h>

#include <string>

namespace corral {

// dlopen(`name`) for good (never closed: its handles live as long as the
// process); null, with `why` set, when it cannot be loaded.
inline void* open_shared_library(const char* name, std::string& why) {
  void* handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    why = std::string("cannot load ") + name + ": " + (e != nullptr ? e : "unknown error");
  }
  return handle;
}

// `out` = the function `name` of `handle`; false when it has none.
template <typename F>
bool load_symbol(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(handle, name));
  return out != nullptr;
}

}  // namespace corral
