// envd's /files routes on the facade: GET a file's bytes, POST an upload
// (multipart/form-data with one "file" part per file, or the file itself
// as application/octet-stream, gzip or not). Bodies are streamed both
// ways: an upload goes into its file as it arrives, so a request costs the
// daemon one buffer whatever its size. Paths go through the sandbox's
// ConfinedRoot as corral's own file API does; every transfer is audited
// with its size and sha256.
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "daemon/e2b_facade_internal.h"
#include "daemon/file_ops.h"
#include "daemon/gzip_inflater.h"
#include "daemon/sandbox_service.h"
#include "http/multipart.h"

namespace corral::daemon::e2b_internal {

namespace {

constexpr std::size_t kBuffer = 1 << 20;

void files_refuse(EnvdCall& c, const EnvdTarget& t, std::string_view op, const std::string& path,
                  const api::ApiError& e) {
  audit_refused(c.facade.context().sandboxes, t.sandbox->id, op, path, e);
  send_control_error(c.r.out, FileRedactor(c.facade.context().sandboxes, t.sandbox->id).error(e));
}

void download(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto raw = c.r.query_value("path");
  if (!raw || raw->empty())
    return send_control_error(c.r.out, 400, "the query parameter path is required");
  auto t = open_target(c, true, false);
  if (!t) return;
  if (!user_allowed(c.r, *t->sandbox)) return;
  const std::string path = sandbox_path(*t->sandbox, *raw);
  auto fd = t->root->open_read(path);
  if (!fd) {
    // envd: 404 for a missing file, 400 for a directory.
    auto info = t->root->stat(path);
    if (info && info->type == FileType::kDirectory)
      return files_refuse(
          c, *t, "read", path,
          api::make_api_error(api::ApiErrorCode::kInvalidValue, "path is a directory: " + path));
    return files_refuse(c, *t, "read", path, file_error(fd.error()));
  }
  struct stat st;
  if (fstat(fd->get(), &st) != 0)
    return files_refuse(c, *t, "read", path,
                        api::make_api_error(api::ApiErrorCode::kInternal, "fstat failed"));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  Sha256 hash;
  if (!c.r.out.start(200, {{"content-type", "application/octet-stream"}}, size)) return;
  std::uint64_t sent = 0;
  std::string buf(kBuffer, '\0');
  while (sent < size) {
    ssize_t n = read(fd->get(), buf.data(), std::min<std::uint64_t>(buf.size(), size - sent));
    if (n <= 0) break;
    hash.update(buf.data(), static_cast<std::size_t>(n));
    if (!c.r.out.write(std::string_view(buf.data(), static_cast<std::size_t>(n)))) break;
    sent += static_cast<std::uint64_t>(n);
  }
  audit_file(ctx.sandboxes, t->sandbox->id, "read", path,
             {{"bytes", sent}, {"sha256", Sha256::hex(hash.final())}, {"complete", sent == size}});
  if (sent == size) {
    t->lease.settle();
    (void)c.r.out.finish();
  }
}

// One file an upload writes: its parents made and it opened as the
// sandbox's user, then its bytes written as they come, hashed and held to
// serve.max_upload. A failed upload truncates it (the space given back,
// never a half file that looks whole), as corral's own PUT does.
class UploadFile {
 public:
  UploadFile(std::string path, std::uint64_t limit) : path_(std::move(path)), limit_(limit) {}

  std::optional<api::ApiError> open(EnvdTarget& t) {
    const uid_t uid = file_owner(*t.sandbox);
    if (auto slash = path_.rfind('/'); slash != std::string::npos && slash > 0) {
      if (auto st = t.root->mkdir(path_.substr(0, slash), 0755, true, uid, uid); !st)
        return file_error(st.error());
    }
    auto fd = t.root->open_write(path_);
    if (!fd) return file_error(fd.error());
    fd_ = std::move(*fd);
    if (fchown(fd_.get(), uid, uid) != 0)
      return api::make_api_error(api::ApiErrorCode::kInternal,
                                 "fchown: " + std::string(strerror(errno)));
    return std::nullopt;
  }

  std::optional<api::ApiError> put(std::string_view data) {
    if (limit_ != 0 && data.size() > limit_ - std::min(limit_, written_))
      return api::make_api_error(api::ApiErrorCode::kBodyTooLarge,
                                 "the file is larger than this daemon's " + std::to_string(limit_) +
                                     " bytes (serve.max_upload)");
    hash_.update(data.data(), data.size());
    return write_upload_chunk(fd_.get(), data, written_);
  }

  void undo() {
    if (fd_) (void)ftruncate(fd_.get(), 0);
  }

  const std::string& path() const { return path_; }
  nlohmann::json record() { return {{"bytes", written_}, {"sha256", Sha256::hex(hash_.final())}}; }

 private:
  std::string path_;
  std::uint64_t limit_;
  UniqueFd fd_;
  Sha256 hash_;
  std::uint64_t written_ = 0;
};

// What an upload answers: the files written, as envd lists them.
void send_written(EnvdCall& c, const EnvdTarget& t, const std::vector<std::string>& paths) {
  FileRedactor redactor(c.facade.context().sandboxes, t.sandbox->id);
  nlohmann::json answer = nlohmann::json::array();
  for (const std::string& path : paths)
    answer.push_back({{"name", redactor.text(last_name(path))},
                      {"type", "file"},
                      {"path", redactor.text(path)}});
  (void)c.r.out.send(200, {{"content-type", "application/json"}},
                     answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

api::ApiError interrupted(const Error& e) {
  return api::make_api_error(e.code == ErrorCode::kTimeout ? api::ApiErrorCode::kRequestTimeout
                                                           : api::ApiErrorCode::kInvalidValue,
                             "upload interrupted: " + e.message);
}

// An upload whose body is the file (envd 0.5.7: application/octet-stream,
// possibly gzip-compressed), streamed into the file as it arrives.
void upload_raw(EnvdCall& c) {
  ApiContext& ctx = c.facade.context();
  auto raw_path = c.r.query_value("path");
  if (!raw_path || raw_path->empty())
    return send_control_error(c.r.out, 400, "a raw upload needs ?path=");
  const std::string encoding(c.r.head.header("content-encoding").value_or("identity"));
  const bool gzip = encoding == "gzip" || encoding == "x-gzip";
  if (!gzip && encoding != "identity")
    return send_control_error(
        c.r.out, 415, "Content-Encoding " + encoding + " is not accepted (gzip or identity)");
  auto t = open_target(c, true, false);
  if (!t) return;
  if (!user_allowed(c.r, *t->sandbox)) return;
  UploadFile file(sandbox_path(*t->sandbox, *raw_path), ctx.limits.max_upload);
  if (auto e = file.open(*t)) return files_refuse(c, *t, "write", file.path(), *e);
  auto fail = [&](const api::ApiError& e) {
    file.undo();
    files_refuse(c, *t, "write", file.path(), e);
  };
  std::optional<GzipInflater> inflater;
  if (gzip) inflater.emplace();
  std::string buf(kBuffer, '\0');
  std::string plain;
  for (;;) {
    auto n = c.r.body.read(buf.data(), buf.size());
    if (!n) return fail(interrupted(n.error()));
    if (*n == 0) break;
    std::string_view chunk(buf.data(), *n);
    if (inflater) {
      plain.clear();
      if (auto st = inflater->feed(chunk, plain); !st)
        return fail(api::make_api_error(api::ApiErrorCode::kInvalidValue,
                                        "the gzip body is corrupt: " + st.error().message));
      chunk = plain;
    }
    if (auto e = file.put(chunk)) return fail(*e);
  }
  if (inflater && !inflater->done())
    return fail(
        api::make_api_error(api::ApiErrorCode::kInvalidValue, "the gzip body is cut short"));
  t->lease.settle();
  nlohmann::json record = file.record();
  record["gzip"] = gzip;
  audit_file(ctx.sandboxes, t->sandbox->id, "write", file.path(), std::move(record));
  send_written(c, *t, {file.path()});
}

// The "file" parts of a multipart upload, each written as its bytes come
// out of the reader; other parts are read past. A failure is kept for the
// handler to answer once the reader has stopped.
class MultipartUpload : public http::FormDataSink {
 public:
  MultipartUpload(EnvdCall& c, EnvdTarget& t, std::optional<std::string> query_path)
      : c_(c), t_(t), query_path_(std::move(query_path)) {}

  Status part(const http::FormPart& head) override {
    if (head.name != "file") return ok();
    std::string raw;
    if (query_path_ && !query_path_->empty())
      raw = *query_path_;
    else if (head.filename && !head.filename->empty())
      raw = *head.filename;
    else
      return refuse("a file part without a path: give ?path= or the part's filename");
    if (query_path_ && !written_.empty())
      return refuse("?path= names one file, but more parts were sent");
    file_.emplace(sandbox_path(*t_.sandbox, raw), c_.facade.context().limits.max_upload);
    if (auto e = file_->open(t_)) return refuse_file(*e);
    return ok();
  }

  Status data(std::string_view bytes) override {
    if (!file_) return ok();
    if (auto e = file_->put(bytes)) return refuse_file(*e);
    return ok();
  }

  Status part_end() override {
    if (!file_) return ok();
    audit_file(c_.facade.context().sandboxes, t_.sandbox->id, "write", file_->path(),
               file_->record());
    written_.push_back(file_->path());
    file_.reset();
    return ok();
  }

  // The body stopped being readable (cut, malformed, timed out): the file
  // under way, if any, is undone and the error answered.
  void fail(const api::ApiError& e) {
    if (answered_) return;
    if (file_) return (void)refuse_file(e);
    answered_ = true;
    send_control_error(c_.r.out, e);
  }

  bool answered() const { return answered_; }
  const std::vector<std::string>& written() const { return written_; }

 private:
  Status refuse(const std::string& message) {
    answered_ = true;
    send_control_error(c_.r.out, 400, message);
    return make_error(ErrorCode::kInvalidArgument, message);
  }
  Status refuse_file(const api::ApiError& e) {
    answered_ = true;
    file_->undo();
    files_refuse(c_, t_, "write", file_->path(), e);
    file_.reset();
    return make_error(ErrorCode::kInvalidArgument, e.message);
  }

  EnvdCall& c_;
  EnvdTarget& t_;
  std::optional<std::string> query_path_;
  std::optional<UploadFile> file_;
  std::vector<std::string> written_;
  bool answered_ = false;
};

void upload(EnvdCall& c) {
  auto ct = c.r.head.header("content-type");
  if (ct && std::string_view(*ct).substr(0, ct->find(';')) == "application/octet-stream")
    return upload_raw(c);
  if (!ct || !http::is_form_data(*ct))
    return send_control_error(c.r.out, 415,
                              "uploads are multipart/form-data (one \"file\" part per file) or "
                              "application/octet-stream with ?path=");
  auto boundary = http::form_data_boundary(*ct);
  if (!boundary) return send_control_error(c.r.out, 400, boundary.error().message);
  auto t = open_target(c, true, false);
  if (!t) return;
  if (!user_allowed(c.r, *t->sandbox)) return;
  MultipartUpload sink(c, *t, c.r.query_value("path"));
  http::FormDataReader reader(*boundary);
  auto malformed = [&](const Error& e) {
    sink.fail(api::make_api_error(api::ApiErrorCode::kInvalidValue, e.message, "", e.hint));
  };
  std::string buf(kBuffer, '\0');
  for (;;) {
    auto n = c.r.body.read(buf.data(), buf.size());
    if (!n) return sink.fail(interrupted(n.error()));
    if (*n == 0) break;
    if (auto st = reader.feed(std::string_view(buf.data(), *n), sink); !st) {
      if (!sink.answered()) malformed(st.error());
      return;
    }
  }
  if (auto st = reader.finish(sink); !st) {
    if (!sink.answered()) malformed(st.error());
    return;
  }
  t->lease.settle();
  if (sink.written().empty())
    return send_control_error(c.r.out, 400, "no part named \"file\" was sent");
  send_written(c, *t, sink.written());
}

}  // namespace

void handle_files(EnvdCall& c) {
  if (c.r.head.method == "GET" || c.r.head.method == "HEAD") return download(c);
  if (c.r.head.method == "POST") return upload(c);
  send_control_error(c.r.out, 405, "GET or POST /files");
}

}  // namespace corral::daemon::e2b_internal
