#include "store/sql_postgres.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "store/pq_library.h"

namespace corral::sql {
namespace {

// Type oids (catalog/pg_type_d.h, stable across releases).
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kBoolOid = 16;

// The advisory lock every write transaction of a corral store takes first:
// "corralST" as a big-endian int64.
constexpr const char* kBeginWrite =
    "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(7165065353098670932)";

class PgStmt final : public StmtImpl {
 public:
  PgStmt(PgConnection& conn, std::string sql) : conn_(conn), sql_(std::move(sql)) {}
  ~PgStmt() override {
    if (result_ != nullptr) conn_.pq().clear(result_);
  }
  void bind_text(int i, std::string_view v) override { set(i, std::string(v), 0, 0); }
  void bind_blob(int i, std::string_view v) override { set(i, std::string(v), kByteaOid, 1); }
  void bind_int64(int i, std::int64_t v) override { set(i, std::to_string(v), kInt8Oid, 0); }
  void bind_null(int i) override {
    grow(i);
    params_[i - 1].reset();
    types_[i - 1] = 0;
    formats_[i - 1] = 0;
  }

  Result<bool> step(std::string_view what) override {
    if (result_ == nullptr) {
      std::vector<const char*> values(params_.size());
      std::vector<int> lengths(params_.size());
      for (std::size_t i = 0; i < params_.size(); ++i) {
        values[i] = params_[i] ? params_[i]->data() : nullptr;
        lengths[i] = params_[i] ? static_cast<int>(params_[i]->size()) : 0;
      }
      auto r = conn_.run(sql_, types_, values, lengths, formats_, what, fault_);
      if (!r) return tl::unexpected<Error>(std::move(r).error());
      result_ = *r;
      rows_ = conn_.pq().ntuples(result_);
      const char* n = conn_.pq().cmd_tuples(result_);
      changes_ = n != nullptr && *n != '\0' ? std::strtoll(n, nullptr, 10) : 0;
      row_ = -1;
    }
    return ++row_ < rows_;
  }
  std::int64_t changes() const override { return changes_; }
  Fault fault() const override { return fault_; }
  bool is_null(int c) const override { return !valid(c) || conn_.pq().getisnull(result_, row_, c); }
  std::string text(int c) const override {
    if (is_null(c)) return {};
    const PqLibrary& pq = conn_.pq();
    const char* v = pq.getvalue(result_, row_, c);
    const int n = pq.getlength(result_, row_, c);
    if (pq.ftype(result_, c) != kByteaOid) return std::string(v, static_cast<std::size_t>(n));
    std::size_t len = 0;
    unsigned char* raw = pq.unescape_bytea(reinterpret_cast<const unsigned char*>(v), &len);
    if (raw == nullptr) return {};
    std::string out(reinterpret_cast<const char*>(raw), len);
    pq.freemem(raw);
    return out;
  }
  std::int64_t int64(int c) const override {
    if (is_null(c)) return 0;
    const PqLibrary& pq = conn_.pq();
    const char* v = pq.getvalue(result_, row_, c);
    if (pq.ftype(result_, c) == kBoolOid) return v[0] == 't' ? 1 : 0;
    std::int64_t out = 0;
    (void)std::from_chars(v, v + pq.getlength(result_, row_, c), out);
    return out;
  }

 private:
  void grow(int i) {
    const auto n = static_cast<std::size_t>(i);
    if (params_.size() < n) {
      params_.resize(n);
      types_.resize(n, 0);
      formats_.resize(n, 0);
    }
  }
  void set(int i, std::string v, Oid type, int format) {
    grow(i);
    params_[i - 1] = std::move(v);
    types_[i - 1] = type;
    formats_[i - 1] = format;
  }
  bool valid(int c) const {
    return result_ != nullptr && row_ >= 0 && row_ < rows_ && c >= 0 &&
           c < conn_.pq().nfields(result_);
  }

  PgConnection& conn_;
  std::string sql_;
  std::vector<std::optional<std::string>> params_;
  std::vector<Oid> types_;
  std::vector<int> formats_;
  PGresult* result_ = nullptr;
  int rows_ = 0;
  int row_ = -1;
  std::int64_t changes_ = 0;
  Fault fault_ = Fault::kNone;
};

std::string field(const PqLibrary& pq, PGresult* r, int code) {
  const char* v = r != nullptr ? pq.result_error_field(r, code) : nullptr;
  return v != nullptr ? v : "";
}

// The URL as messages show it: user, host, port and database, no password.
std::string url_without_password(const PqLibrary& pq, PGconn* conn) {
  std::string user, host, port, db;
  PQconninfoOption* opts = pq.conninfo(conn);
  for (PQconninfoOption* o = opts; o != nullptr && o->keyword != nullptr; ++o) {
    const std::string k = o->keyword;
    const std::string v = o->val != nullptr ? o->val : "";
    if (k == "user") user = v;
    if (k == "host" || (k == "hostaddr" && host.empty())) host = v;
    if (k == "port") port = v;
    if (k == "dbname") db = v;
  }
  if (opts != nullptr) pq.conninfo_free(opts);
  return "postgres://" + (user.empty() ? "" : user + "@") + host +
         (port.empty() ? "" : ":" + port) + "/" + db;
}

std::string trimmed(const char* message) {
  std::string m = message != nullptr ? message : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

}  // namespace

Result<std::unique_ptr<PgConnection>> PgConnection::open(std::string_view url) {
  auto lib = pq_library();
  if (!lib) return tl::unexpected<Error>(std::move(lib).error());
  const PqLibrary& pq = **lib;
  const std::string target(url);
  // Ours first: what the URL sets wins (expand_dbname).
  const char* keys[] = {"connect_timeout", "application_name", "client_encoding", "dbname",
                        nullptr};
  const char* values[] = {"10", "corral", "UTF8", target.c_str(), nullptr};
  PGconn* conn = pq.connectdb_params(keys, values, 1);
  if (conn == nullptr)
    return make_error(ErrorCode::kResourceExhausted, "libpq could not allocate a connection");
  if (pq.status(conn) != CONNECTION_OK) {
    std::string why = trimmed(pq.error_message(conn));
    pq.finish(conn);
    // libpq's message names host and port, never the password.
    return make_error(ErrorCode::kUnavailable, "connecting to the PostgreSQL state store: " + why,
                      "check serve.state's URL (host, port, database, user and password) and "
                      "that the server is up and reachable from this node");
  }
  std::unique_ptr<PgConnection> c(new PgConnection(&pq, conn, url_without_password(pq, conn)));
  // No notices on stderr (a daemon's stderr is its log).
  CORRAL_TRY(c->exec("SET client_min_messages TO warning", "setting client_min_messages"));
  return c;
}

PgConnection::~PgConnection() {
  if (conn_ != nullptr) pq_->finish(conn_);
}

Error PgConnection::error_of(PGresult* result, std::string_view what, Fault* fault) const {
  const std::string state = field(*pq_, result, PG_DIAG_SQLSTATE);
  std::string message = trimmed(result != nullptr ? pq_->result_error_message(result) : nullptr);
  if (message.empty()) message = trimmed(pq_->error_message(conn_));
  Error e;
  e.message = std::string(what) + ": " + message +
              (state.empty() ? "" : " (SQLSTATE " + state + ") on " + describe_);
  Fault f = Fault::kOther;
  const std::string cls = state.substr(0, 2);
  if (state == "23505") f = Fault::kUniqueViolation;
  if (state == "23503") f = Fault::kForeignKeyViolation;
  if (cls == "23") {
    e.code = ErrorCode::kInvalidArgument;
  } else if (state == "40001" || state == "40P01") {
    e.code = ErrorCode::kUnavailable;
    e.hint = "another writer conflicted; the request can be retried";
  } else if (cls == "28") {
    e.code = ErrorCode::kPermissionDenied;
    e.hint = "check the user and password of serve.state";
  } else if (cls == "53") {
    e.code = ErrorCode::kResourceExhausted;
    e.hint = "the database server is out of disk, memory or connections";
  } else if (state.empty() || cls == "08" || cls == "57") {
    e.code = ErrorCode::kUnavailable;
    e.hint = "the connection to the PostgreSQL state store failed: check that the server is up";
  } else {
    e.code = ErrorCode::kInternal;
  }
  if (fault != nullptr) *fault = f;
  return e;
}

Status PgConnection::ensure_connected(std::string_view what) {
  if (pq_->status(conn_) == CONNECTION_OK) return ok();
  if (in_txn_) {
    Error e = error_of(nullptr, what, nullptr);
    e.message += " (the connection was lost inside a transaction, which is rolled back)";
    return tl::unexpected<Error>(std::move(e));
  }
  pq_->reset(conn_);
  prepared_.clear();  // the server's prepared statements went with the old session
  if (pq_->status(conn_) != CONNECTION_OK)
    return tl::unexpected<Error>(error_of(nullptr, what, nullptr));
  return exec("SET client_min_messages TO warning", "setting client_min_messages");
}

Result<PGresult*> PgConnection::run(const std::string& sql, const std::vector<Oid>& types,
                                    const std::vector<const char*>& values,
                                    const std::vector<int>& lengths,
                                    const std::vector<int>& formats, std::string_view what,
                                    Fault& fault) {
  fault = Fault::kNone;
  if (auto st = ensure_connected(what); !st) {
    fault = Fault::kOther;
    return tl::unexpected<Error>(std::move(st).error());
  }
  std::string key = sql;
  for (Oid t : types) key += ',' + std::to_string(t);
  auto it = prepared_.find(key);
  if (it == prepared_.end()) {
    const std::string name = "corral_" + std::to_string(next_name_++);
    PGresult* r = pq_->prepare(conn_, name.c_str(), sql.c_str(), static_cast<int>(types.size()),
                               types.empty() ? nullptr : types.data());
    const bool good = r != nullptr && pq_->result_status(r) == PGRES_COMMAND_OK;
    if (!good) {
      Error e =
          error_of(r, std::string("preparing `") + sql + "` for " + std::string(what), &fault);
      if (r != nullptr) pq_->clear(r);
      return tl::unexpected<Error>(std::move(e));
    }
    pq_->clear(r);
    it = prepared_.emplace(std::move(key), name).first;
  }
  PGresult* r = pq_->exec_prepared(conn_, it->second.c_str(), static_cast<int>(values.size()),
                                   values.empty() ? nullptr : values.data(),
                                   lengths.empty() ? nullptr : lengths.data(),
                                   formats.empty() ? nullptr : formats.data(), 0);
  const ExecStatusType s = r != nullptr ? pq_->result_status(r) : PGRES_FATAL_ERROR;
  if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
    Error e = error_of(r, what, &fault);
    if (r != nullptr) pq_->clear(r);
    return tl::unexpected<Error>(std::move(e));
  }
  return r;
}

Result<Stmt> PgConnection::prepare(std::string_view sql) {
  return Stmt(std::make_unique<PgStmt>(*this, number_placeholders(sql)));
}

Status PgConnection::exec(std::string_view sql, std::string_view what) {
  if (auto st = ensure_connected(what); !st) return st;
  const std::string text(sql);
  PGresult* r = pq_->exec(conn_, text.c_str());
  const ExecStatusType s = r != nullptr ? pq_->result_status(r) : PGRES_FATAL_ERROR;
  if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
    Error e = error_of(r, what, nullptr);
    if (r != nullptr) pq_->clear(r);
    return tl::unexpected<Error>(std::move(e));
  }
  pq_->clear(r);
  return ok();
}

Status PgConnection::begin() {
  CORRAL_TRY(exec(kBeginWrite, "beginning a write transaction"));
  in_txn_ = true;
  return ok();
}

Status PgConnection::commit() {
  // A transaction a statement failed in is aborted: COMMIT would answer
  // "ROLLBACK" as a success.
  if (pq_->transaction_status(conn_) == PQTRANS_INERROR) {
    rollback();
    return make_error(ErrorCode::kInternal, "COMMIT on " + describe_ +
                                                ": a statement of the transaction failed; it was "
                                                "rolled back");
  }
  Status st = exec("COMMIT", "COMMIT");
  // A failed COMMIT (a lost connection, a deferred constraint) ends the
  // transaction too.
  in_txn_ = false;
  return st;
}

void PgConnection::rollback() {
  if (!in_txn_) return;
  in_txn_ = false;
  if (pq_->status(conn_) != CONNECTION_OK) return;
  PGresult* r = pq_->exec(conn_, "ROLLBACK");
  if (r != nullptr) pq_->clear(r);
}

}  // namespace corral::sql
