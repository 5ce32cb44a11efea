#include "store/sqlite.h"

namespace corral::sqlite {

Error sqlite_error(sqlite3* db, std::string_view what, int rc) {
  Error e;
  e.message = std::string(what) + ": " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)) +
              " (sqlite code " + std::to_string(rc) + ")";
  e.sys_errno = db != nullptr ? sqlite3_system_errno(db) : 0;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      e.code = ErrorCode::kUnavailable;
      e.hint = "another process holds the state database's write lock for longer than " +
               std::to_string(kBusyTimeoutMs) + " ms: is a second corral daemon using it?";
      break;
    case SQLITE_FULL:
      e.code = ErrorCode::kResourceExhausted;
      e.hint = "the file system of the state database is full: free space there";
      break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      e.code = ErrorCode::kPermissionDenied;
      e.hint =
          "the state database (and its -wal/-shm files and directory) must be writable by "
          "the daemon";
      break;
    case SQLITE_CANTOPEN:
      e.code = ErrorCode::kSystem;
      e.hint = "check that the directory of the state database exists and is writable";
      break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      e.code = ErrorCode::kUnavailable;
      e.hint =
          "the file is not a corral state database or is damaged: move it aside (keep it for "
          "diagnosis) and restart";
      break;
    case SQLITE_CONSTRAINT:
      e.code = ErrorCode::kInvalidArgument;
      break;
    case SQLITE_IOERR:
      e.code = ErrorCode::kSystem;
      e.hint = "the disk of the state database reported an I/O error";
      break;
    default:
      e.code = ErrorCode::kInternal;
      break;
  }
  return e;
}

tl::unexpected<Error> fail(sqlite3* db, std::string_view what, int rc) {
  return tl::unexpected<Error>(sqlite_error(db, what, rc));
}

Status exec_sql(sqlite3* db, const char* sql, std::string_view what) {
  char* msg = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &msg);
  sqlite3_free(msg);
  if (rc != SQLITE_OK) return fail(db, what, rc);
  return ok();
}

Result<std::string> pragma_text(sqlite3* db, std::string_view sql) {
  auto st = Stmt::prepare(db, sql);
  if (!st) return tl::unexpected<Error>(std::move(st).error());
  auto row = st->step(sql);
  if (!row) return tl::unexpected<Error>(std::move(row).error());
  if (!*row) return std::string();
  return st->text(0);
}

}  // namespace corral::sqlite
