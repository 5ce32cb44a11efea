#include "store/pq_library.h"

#include <mutex>
#include <string>

#include "base/shared_library.h"

namespace corral::sql {

Result<const PqLibrary*> pq_library() {
  static std::once_flag once;
  static PqLibrary lib{};
  static std::string failure;
  std::call_once(once, [] {
    void* handle = open_shared_library("libpq.so.5", failure);
    if (handle == nullptr) return;
    const bool all =
        load_symbol(handle, "PQconnectdbParams", lib.connectdb_params) &&
        load_symbol(handle, "PQstatus", lib.status) &&
        load_symbol(handle, "PQerrorMessage", lib.error_message) &&
        load_symbol(handle, "PQfinish", lib.finish) && load_symbol(handle, "PQreset", lib.reset) &&
        load_symbol(handle, "PQtransactionStatus", lib.transaction_status) &&
        load_symbol(handle, "PQconninfo", lib.conninfo) &&
        load_symbol(handle, "PQconninfoFree", lib.conninfo_free) &&
        load_symbol(handle, "PQexec", lib.exec) && load_symbol(handle, "PQprepare", lib.prepare) &&
        load_symbol(handle, "PQexecPrepared", lib.exec_prepared) &&
        load_symbol(handle, "PQresultStatus", lib.result_status) &&
        load_symbol(handle, "PQresultErrorMessage", lib.result_error_message) &&
        load_symbol(handle, "PQresultErrorField", lib.result_error_field) &&
        load_symbol(handle, "PQntuples", lib.ntuples) &&
        load_symbol(handle, "PQnfields", lib.nfields) &&
        load_symbol(handle, "PQftype", lib.ftype) &&
        load_symbol(handle, "PQgetvalue", lib.getvalue) &&
        load_symbol(handle, "PQgetlength", lib.getlength) &&
        load_symbol(handle, "PQgetisnull", lib.getisnull) &&
        load_symbol(handle, "PQcmdTuples", lib.cmd_tuples) &&
        load_symbol(handle, "PQclear", lib.clear) &&
        load_symbol(handle, "PQunescapeBytea", lib.unescape_bytea) &&
        load_symbol(handle, "PQfreemem", lib.freemem) &&
        load_symbol(handle, "PQlibVersion", lib.library_version);
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
