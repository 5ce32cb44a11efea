// The multipart/form-data reader and writer (src/http/multipart.h): what a
// client may send as a task's raw input bytes (docs/api.md "Submitting raw
// bytes"), and later the E2B file uploads.
#include "http/multipart.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace corral::http {
namespace {

const std::string kB = "XyZ-boundary";

std::string part(const std::string& headers, const std::string& body) {
  return "--" + kB + "\r\n" + headers + "\r\n" + body + "\r\n";
}
std::string close() { return "--" + kB + "--\r\n"; }
std::string named(const std::string& name) {
  return "Content-Disposition: form-data; name=\"" + name + "\"\r\n";
}

void expect_refused(const std::string& body, const std::string& words,
                    ErrorCode code = ErrorCode::kInvalidArgument, FormLimits limits = {}) {
  auto r = parse_form_data(body, kB, limits);
  ASSERT_FALSE(r.has_value()) << "accepted: " << body;
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(words), std::string::npos)
      << "message \"" << r.error().message << "\" lacks \"" << words << "\"";
}

TEST(FormData, ReadsPartsWithTheirNamesTypesAndExactBytes) {
  // Bytes that look like framing: CR, LF, "--", the boundary without its
  // leading CRLF, a NUL.
  const std::string tricky = std::string("a\r\nb--\r\n--XyZ-boundar\r\n") + '\0' + "--" + kB;
  const std::string body = part(named("task") + "Content-Type: application/json\r\n", "{}") +
                           part(
                               "content-disposition: FORM-DATA; NAME=in0; filename=\"x y.bin\"\r\n"
                               "X-Ignored: yes\r\nContent-Transfer-Encoding: binary\r\n",
                               tricky) +
                           part(named("empty"), "") + close();
  auto parts = parse_form_data(body, kB);
  ASSERT_TRUE(parts.has_value()) << parts.error().message;
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].name, "task");
  EXPECT_EQ((*parts)[0].content_type, "application/json");
  EXPECT_EQ((*parts)[0].body, "{}");
  EXPECT_EQ((*parts)[1].name, "in0");
  EXPECT_EQ((*parts)[1].filename, "x y.bin");
  EXPECT_EQ((*parts)[1].content_type, "");
  EXPECT_EQ((*parts)[1].body, tricky);
  EXPECT_EQ((*parts)[2].body, "");
}

TEST(FormData, TheClosingBoundaryMayEndWithOrWithoutCrlf) {
  std::string body = part(named("a"), "1") + "--" + kB + "--";
  EXPECT_TRUE(parse_form_data(body, kB).has_value());
  EXPECT_TRUE(parse_form_data(body + "\r\n", kB).has_value());
  expect_refused(body + "\r\nepilogue", "follow the closing boundary");
  expect_refused(body + "x", "follow the closing boundary");
}

TEST(FormData, QuotedNamesResolveTheirEscapes) {
  auto parts = parse_form_data(
      part("Content-Disposition: form-data; name=\"a\\\"b\\\\c\"\r\n", "v") + close(), kB);
  ASSERT_TRUE(parts.has_value()) << parts.error().message;
  EXPECT_EQ((*parts)[0].name, "a\"b\\c");
}

TEST(FormData, RefusesFramingThatTwoParsersCouldReadDifferently) {
  const std::string good = part(named("a"), "1") + close();
  expect_refused("preamble\r\n" + good, "does not start with its boundary");
  expect_refused("\r\n" + good, "does not start with its boundary");
  // Transport padding after a boundary line (RFC 2046 allows it; we do not).
  expect_refused("--" + kB + " \r\n" + named("a") + "\r\n1\r\n" + close(),
                 "does not end with CRLF");
  // The boundary inside a part, not followed by CRLF or "--".
  expect_refused(part(named("a"), "x\r\n--" + kB + "tail") + close(), "part 2");
  // A bare LF where CRLF belongs.
  expect_refused("--" + kB + "\n" + named("a") + "\r\n1\r\n" + close(), "does not end with CRLF");
  expect_refused("--" + kB + "\r\nContent-Disposition: form-data; name=a\n\n1\r\n" + close(),
                 "not closed by an empty line");
  expect_refused(close(), "no part");
}

TEST(FormData, EveryTruncationIsRefusedNeverReadAsFewerParts) {
  const std::string body =
      part(named("task"), "{\"id\":\"t\"}") + part(named("in0"), std::string(300, 'z')) + close();
  ASSERT_TRUE(parse_form_data(body, kB).has_value());
  // The full body without its final CRLF is complete; anything shorter is cut.
  for (std::size_t n = 0; n + 2 < body.size(); ++n) {
    auto r = parse_form_data(std::string_view(body).substr(0, n), kB);
    EXPECT_FALSE(r.has_value()) << "a body cut at " << n << " of " << body.size() << " was read";
  }
}

TEST(FormData, RefusesPartHeadsItCannotReadExactly) {
  expect_refused(part("Content-Type: text/plain\r\n", "1") + close(), "no Content-Disposition");
  expect_refused(part("Content-Disposition: attachment; name=\"a\"\r\n", "1") + close(),
                 "not form-data");
  expect_refused(part("Content-Disposition: form-data\r\n", "1") + close(), "no name");
  expect_refused(part("Content-Disposition: form-data; name=\"\"\r\n", "1") + close(), "no name");
  expect_refused(
      part("Content-Disposition: form-data; name=\"a\"; filename*=UTF-8''x\r\n", "1") + close(),
      "filename*");
  expect_refused(part("Content-Disposition: form-data; name=\"a\"; size=3\r\n", "1") + close(),
                 "\"size\" is not accepted");
  expect_refused(part("Content-Disposition: form-data; name=a; name=b\r\n", "1") + close(),
                 "name twice");
  expect_refused(part(named("a") + named("b"), "1") + close(), "Content-Disposition twice");
  expect_refused(part(named("a") + "Content-Type: a/b\r\nContent-Type: c/d\r\n", "1") + close(),
                 "Content-Type twice");
  expect_refused(part(named("a") + "Content-Transfer-Encoding: base64\r\n", "MQ==") + close(),
                 "Content-Transfer-Encoding \"base64\" is not accepted");
  expect_refused(part(named("a") + " folded\r\n", "1") + close(), "folded");
  expect_refused(part(named("a") + "No colon\r\n", "1") + close(), "not \"Name: value\"");
  expect_refused(part(named("a") + "X-Bad: a\x01"
                                   "b\r\n",
                      "1") +
                     close(),
                 "control byte");
  expect_refused(part("Content-Disposition: form-data; name=\"a\x7f\"\r\n", "1") + close(),
                 "control byte");
  expect_refused(part("Content-Disposition: form-data; name=\"a\r\n", "1") + close(), "not closed");
}

TEST(FormData, LimitsPartsAndHeadSizes) {
  FormLimits limits;
  limits.max_parts = 2;
  limits.max_part_head_bytes = 64;
  const std::string two = part(named("a"), "1") + part(named("b"), "2");
  EXPECT_TRUE(parse_form_data(two + close(), kB, limits).has_value());
  expect_refused(two + part(named("c"), "3") + close(), "more than 2 parts",
                 ErrorCode::kResourceExhausted, limits);
  expect_refused(part(named("a") + "X-Long: " + std::string(80, 'v') + "\r\n", "1") + close(),
                 "longer than 64 bytes", ErrorCode::kResourceExhausted, limits);
}

TEST(FormData, BoundaryComesFromTheContentType) {
  EXPECT_EQ(form_data_boundary("multipart/form-data; boundary=abc").value_or(""), "abc");
  EXPECT_EQ(
      form_data_boundary("Multipart/Form-Data;charset=utf-8; BOUNDARY=\"a b:c\"").value_or(""),
      "a b:c");
  EXPECT_TRUE(is_form_data("multipart/form-data; boundary=x"));
  EXPECT_FALSE(is_form_data("application/json"));
  for (const char* bad :
       {"multipart/form-data", "multipart/mixed; boundary=a", "application/json",
        "multipart/form-data; boundary=", "multipart/form-data; boundary=\"a \"",
        "multipart/form-data; boundary=a; boundary=b", "multipart/form-data; boundary=\"a;b\"",
        "multipart/form-data; boundary=\"a\x01\"", "multipart/form-data; boundary"}) {
    EXPECT_FALSE(form_data_boundary(bad).has_value()) << bad;
  }
  EXPECT_TRUE(form_data_boundary("multipart/form-data; boundary=" + std::string(70, 'a')));
  EXPECT_FALSE(form_data_boundary("multipart/form-data; boundary=" + std::string(71, 'a')));
}

TEST(FormData, WhatWeWriteReadsBackAndItsBoundaryIsInNoPart) {
  const std::string hostile = "\r\n--corral-" + std::string(32, '0') + "\r\n";
  std::vector<FormPart> parts{{"task", std::nullopt, "application/json", "{\"a\":1}"},
                              {"in0", std::string("in0"), "application/octet-stream", hostile},
                              {"in1", std::nullopt, "", ""}};
  const std::string b = new_form_boundary({hostile, "{\"a\":1}"});
  EXPECT_EQ(form_data_boundary("multipart/form-data; boundary=" + b).value_or(""), b);
  const std::string written = write_form_data(parts, b);  // the parts view into it
  auto back = parse_form_data(written, b);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  ASSERT_EQ(back->size(), parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ((*back)[i].name, parts[i].name);
    EXPECT_EQ((*back)[i].filename, parts[i].filename);
    EXPECT_EQ((*back)[i].content_type, parts[i].content_type);
    EXPECT_EQ((*back)[i].body, parts[i].body);
  }
}

// A sink that writes down what the streaming reader hands it.
struct Recorder : FormDataSink {
  std::vector<FormPart> heads;
  std::vector<std::string> bodies;
  std::size_t ended = 0;
  std::size_t handed = 0;  // bytes of part bodies so far
  std::size_t fail_after = SIZE_MAX;
  Status part(const FormPart& head) override {
    heads.push_back(head);
    bodies.emplace_back();
    return ok();
  }
  Status data(std::string_view bytes) override {
    bodies.back().append(bytes);
    handed += bytes.size();
    if (handed > fail_after) return make_error(ErrorCode::kResourceExhausted, "sink is full");
    return ok();
  }
  Status part_end() override {
    ++ended;
    return ok();
  }
};

TEST(FormDataReader, EveryWayOfCuttingTheBodyReadsTheSameParts) {
  const std::string body = part(named("task") + "Content-Type: application/json\r\n", "{}") +
                           part(named("in0"), "a\r\n--" + kB.substr(0, 5) + "\r\n--x") +
                           part(named("empty"), "") + close();
  auto whole = parse_form_data(body, kB);
  ASSERT_TRUE(whole.has_value()) << whole.error().message;
  // Two cuts anywhere: three pieces, some of them empty.
  for (std::size_t a = 0; a <= body.size(); ++a) {
    for (std::size_t b = a; b <= body.size(); b += 7) {
      FormDataReader reader(kB);
      Recorder rec;
      ASSERT_TRUE(reader.feed(body.substr(0, a), rec).has_value()) << a << " " << b;
      ASSERT_TRUE(reader.feed(body.substr(a, b - a), rec).has_value()) << a << " " << b;
      ASSERT_TRUE(reader.feed(body.substr(b), rec).has_value()) << a << " " << b;
      ASSERT_TRUE(reader.finish(rec).has_value()) << a << " " << b;
      ASSERT_EQ(rec.heads.size(), whole->size());
      EXPECT_EQ(rec.ended, whole->size());
      for (std::size_t i = 0; i < whole->size(); ++i) {
        EXPECT_EQ(rec.heads[i].name, (*whole)[i].name);
        EXPECT_EQ(rec.heads[i].content_type, (*whole)[i].content_type);
        EXPECT_EQ(rec.bodies[i], (*whole)[i].body) << "cut at " << a << ", " << b;
      }
    }
  }
}

TEST(FormDataReader, HandsBytesOnAsTheyArriveInBoundedMemory) {
  // 4 MiB in 64 KiB pieces: after each piece all but the last few bytes
  // (a possible delimiter start) have been handed on.
  const std::string head = "--" + kB + "\r\n" + named("file") + "\r\n";
  FormDataReader reader(kB);
  Recorder rec;
  ASSERT_TRUE(reader.feed(head, rec).has_value());
  const std::string piece(64 * 1024, 'z');
  for (int i = 1; i <= 64; ++i) {
    ASSERT_TRUE(reader.feed(piece, rec).has_value());
    EXPECT_GE(rec.handed + kB.size() + 4, piece.size() * i) << "after piece " << i;
    rec.bodies.back().clear();  // what a file writer does: nothing kept
  }
  ASSERT_TRUE(reader.feed("\r\n" + close(), rec).has_value());
  ASSERT_TRUE(reader.finish(rec).has_value());
  EXPECT_EQ(rec.handed, piece.size() * 64);
  EXPECT_EQ(rec.ended, 1u);
}

TEST(FormDataReader, ASinkErrorStopsItAndEveryLaterCallSaysSo) {
  const std::string body = part(named("a"), std::string(1000, 'x')) + close();
  FormDataReader reader(kB);
  Recorder rec;
  rec.fail_after = 10;
  auto st = reader.feed(body, rec);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message, "sink is full");
  EXPECT_FALSE(reader.feed("more", rec).has_value());
  EXPECT_FALSE(reader.finish(rec).has_value());
}

TEST(FormDataReader, ABodyThatStopsEarlyIsAnErrorAtFinish) {
  const std::string body = part(named("a"), "12345") + close();
  for (std::size_t n = 0; n + 2 < body.size(); ++n) {
    FormDataReader reader(kB);
    Recorder rec;
    auto fed = reader.feed(body.substr(0, n), rec);
    EXPECT_FALSE(fed.has_value() && reader.finish(rec).has_value()) << "cut at " << n;
  }
}

}  // namespace
}  // namespace corral::http
