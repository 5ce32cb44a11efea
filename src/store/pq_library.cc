#include "store/pq_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace corral::sql {
namespace {

template <typename F>
bool load(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, name));
  return out != nullptr;
}

}  // namespace

Result<const PqLibrary*> pq_library() {
  static std::once_flag once;
  static PqLibrary lib{};
  static std::string failure;
  std::call_once(once, [] {
    // Never unloaded: connections live as long as the process.
    void* handle = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      failure = std::string("cannot load libpq.so.5: ") + (why ? why : "unknown error");
      return;
    }
    const bool all =
        load(handle, "PQconnectdbParams", lib.connectdb_params) &&
        load(handle, "PQstatus", lib.status) && load(handle, "PQerrorMessage", lib.error_message) &&
        load(handle, "PQfinish", lib.finish) && load(handle, "PQreset", lib.reset) &&
        load(handle, "PQtransactionStatus", lib.transaction_status) &&
        load(handle, "PQconninfo", lib.conninfo) &&
        load(handle, "PQconninfoFree", lib.conninfo_free) && load(handle, "PQexec", lib.exec) &&
        load(handle, "PQprepare", lib.prepare) &&
        load(handle, "PQexecPrepared", lib.exec_prepared) &&
        load(handle, "PQresultStatus", lib.result_status) &&
        load(handle, "PQresultErrorMessage", lib.result_error_message) &&
        load(handle, "PQresultErrorField", lib.result_error_field) &&
        load(handle, "PQntuples", lib.ntuples) && load(handle, "PQnfields", lib.nfields) &&
        load(handle, "PQftype", lib.ftype) && load(handle, "PQgetvalue", lib.getvalue) &&
        load(handle, "PQgetlength", lib.getlength) && load(handle, "PQgetisnull", lib.getisnull) &&
        load(handle, "PQcmdTuples", lib.cmd_tuples) && load(handle, "PQclear", lib.clear) &&
        load(handle, "PQunescapeBytea", lib.unescape_bytea) &&
        load(handle, "PQfreemem", lib.freemem) && load(handle, "PQlibVersion", lib.library_version);
    if (!all) {
      failure = "libpq.so.5 lacks a function corral uses";
      return;
    }
    if (lib.library_version() < 120000) {
      failure = "libpq " + std::to_string(lib.library_version()) +
                " is older than PostgreSQL 12's, which corral needs";
    }
  });
  if (!failure.empty())
    return make_error(ErrorCode::kUnavailable, failure,
                      "install libpq5 (Debian: apt-get install libpq5) or use the SQLite state "
                      "store (leave serve.state unset)");
  return &lib;
}

}  // namespace corral::sql
