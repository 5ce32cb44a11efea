// libpq, loaded with dlopen the first time a PostgreSQL state store is
// opened (issue 18, ADR 0020). A daemon on SQLite, and every `corral run`,
// never loads it; a static corral stays static (Debian 12's libpq.a needs
// Kerberos and LDAP archives it does not ship). Types and constants still
// come from <libpq-fe.h>.
#pragma once

#include <libpq-fe.h>

#include "base/result.h"

namespace corral::sql {

struct PqLibrary {
  PGconn* (*connectdb_params)(const char* const*, const char* const*, int);
  ConnStatusType (*status)(const PGconn*);
  char* (*error_message)(const PGconn*);
  void (*finish)(PGconn*);
  void (*reset)(PGconn*);
  PGTransactionStatusType (*transaction_status)(const PGconn*);
  PQconninfoOption* (*conninfo)(PGconn*);
  void (*conninfo_free)(PQconninfoOption*);
  PGresult* (*exec)(PGconn*, const char*);
  PGresult* (*prepare)(PGconn*, const char*, const char*, int, const Oid*);
  PGresult* (*exec_prepared)(PGconn*, const char*, int, const char* const*, const int*, const int*,
                             int);
  ExecStatusType (*result_status)(const PGresult*);
  char* (*result_error_message)(const PGresult*);
  char* (*result_error_field)(const PGresult*, int);
  int (*ntuples)(const PGresult*);
  int (*nfields)(const PGresult*);
  Oid (*ftype)(const PGresult*, int);
  char* (*getvalue)(const PGresult*, int, int);
  int (*getlength)(const PGresult*, int, int);
  int (*getisnull)(const PGresult*, int, int);
  char* (*cmd_tuples)(PGresult*);
  void (*clear)(PGresult*);
  unsigned char* (*unescape_bytea)(const unsigned char*, size_t*);
  void (*freemem)(void*);
  int (*library_version)();
};

// libpq.so.5, loaded once (thread-safe); kUnavailable with an install hint
// when it is missing or older than PostgreSQL 12's.
Result<const PqLibrary*> pq_library();

}  // namespace corral::sql
