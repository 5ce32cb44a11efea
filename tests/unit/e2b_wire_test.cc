// The E2B facade's wire layer (src/e2b, issue 17): Connect envelopes and
// errors, envd's messages in proto3 JSON, the control plane's bodies.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <nlohmann/json.hpp>

#include "e2b/connect_protocol.h"
#include "e2b/control_messages.h"
#include "e2b/envd_messages.h"

namespace corral::e2b {
namespace {

using nlohmann::json;

TEST(ConnectEnvelope, WritesFlagBigEndianLengthAndMessage) {
  const std::string e = envelope(0, "{}");
  ASSERT_EQ(e.size(), 7u);
  EXPECT_EQ(e.substr(0, 5), std::string("\x00\x00\x00\x00\x02", 5));
  EXPECT_EQ(end_stream_envelope(std::nullopt), std::string("\x02\x00\x00\x00\x02{}", 7));
  const std::string err = end_stream_envelope(ConnectError{ConnectCode::kNotFound, "gone"});
  EXPECT_EQ(err[0], '\x02');
  EXPECT_EQ(json::parse(err.substr(5)),
            json::parse(R"({"error":{"code":"not_found","message":"gone"}})"));
}

TEST(ConnectEnvelope, ReaderReassemblesEnvelopesSplitAnywhere) {
  const std::string stream = envelope(0, R"({"a":1})") + envelope(0, "") + envelope(2, "{}");
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    EnvelopeReader r;
    ASSERT_TRUE(r.feed(stream.substr(0, cut)));
    std::vector<Envelope> got;
    while (auto e = r.next()) got.push_back(*e);
    ASSERT_TRUE(r.feed(stream.substr(cut)));
    while (auto e = r.next()) got.push_back(*e);
    ASSERT_EQ(got.size(), 3u) << cut;
    EXPECT_EQ(got[0].message, R"({"a":1})");
    EXPECT_EQ(got[1].message, "");
    EXPECT_EQ(got[2].flags, kEnvelopeEndStream);
    EXPECT_FALSE(r.partial());
  }
}

TEST(ConnectEnvelope, ReaderRefusesCompressedAndHugeEnvelopes) {
  EnvelopeReader compressed;
  EXPECT_FALSE(compressed.feed(envelope(kEnvelopeCompressed, "x")));
  EnvelopeReader huge;
  auto st = huge.feed(std::string("\x00\xff\xff\xff\xff", 5));
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("at most"), std::string::npos);
}

TEST(ConnectEnvelope, SingleEnvelopeIsExactlyOneUncompressedMessage) {
  EXPECT_EQ(*single_envelope(envelope(0, "{}")), "{}");
  EXPECT_FALSE(single_envelope(""));
  EXPECT_FALSE(single_envelope(envelope(1, "{}")));
  EXPECT_FALSE(single_envelope(envelope(2, "{}")));
  EXPECT_FALSE(single_envelope(envelope(0, "{}") + "x"));
  EXPECT_FALSE(single_envelope(envelope(0, "{}").substr(0, 6)));
}

TEST(ConnectErrors, CodesMapToTheProtocolsStatuses) {
  EXPECT_EQ(connect_http_status(ConnectCode::kNotFound), 404);
  EXPECT_EQ(connect_http_status(ConnectCode::kUnauthenticated), 401);
  EXPECT_EQ(connect_http_status(ConnectCode::kAlreadyExists), 409);
  EXPECT_EQ(connect_http_status(ConnectCode::kUnimplemented), 501);
  EXPECT_EQ(connect_code_name(ConnectCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(connect_code_from_name("deadline_exceeded"), ConnectCode::kDeadlineExceeded);
  EXPECT_FALSE(connect_code_from_name("nope"));
  EXPECT_EQ(connect_code_from_http(404), ConnectCode::kUnimplemented);
  EXPECT_EQ(connect_code_from_http(502), ConnectCode::kUnavailable);
  auto e = parse_connect_error(connect_error_json({ConnectCode::kPermissionDenied, "no"}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, ConnectCode::kPermissionDenied);
  EXPECT_EQ(e->message, "no");
  EXPECT_FALSE(parse_connect_error(R"({"code":404})"));
}

TEST(EnvdMessages, StartRequestAsTheSdkSendsIt) {
  auto r = parse_start_request(
      R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"A":"1"},"cwd":"/tmp"},"stdin":false,"tag":"t","future":1})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->process.cmd, "/bin/bash");
  EXPECT_EQ(r->process.args, (std::vector<std::string>{"-l", "-c", "echo hi"}));
  ASSERT_EQ(r->process.envs.size(), 1u);
  EXPECT_EQ(r->process.cwd, "/tmp");
  EXPECT_EQ(r->stdin, false);
  EXPECT_EQ(r->tag, "t");
  EXPECT_FALSE(r->pty);
  // Defaults left out, as the SDK leaves them out.
  auto bare = parse_start_request(R"({"process":{"cmd":"ls"}})");
  ASSERT_TRUE(bare);
  EXPECT_FALSE(bare->stdin.has_value());
}

TEST(EnvdMessages, StartRequestErrorsNameTheField) {
  auto no_cmd = parse_start_request(R"({"process":{"args":["x"]}})");
  ASSERT_FALSE(no_cmd);
  EXPECT_NE(no_cmd.error().message.find("process.cmd"), std::string::npos);
  auto bad_args = parse_start_request(R"({"process":{"cmd":"x","args":"y"}})");
  ASSERT_FALSE(bad_args);
  EXPECT_NE(bad_args.error().message.find("process.args"), std::string::npos);
  EXPECT_FALSE(parse_start_request("[1]"));
  EXPECT_FALSE(parse_start_request("{"));
}

TEST(EnvdMessages, SelectorsNameExactlyOneProcess) {
  EXPECT_EQ(parse_selector_request(R"({"process":{"pid":42}})")->pid, 42u);
  EXPECT_EQ(parse_selector_request(R"({"process":{"pid":"42"}})")->pid, 42u);
  EXPECT_EQ(parse_selector_request(R"({"process":{"tag":"x"}})")->tag, "x");
  EXPECT_FALSE(parse_selector_request(R"({"process":{}})"));
  EXPECT_FALSE(parse_selector_request(R"({"process":{"pid":1,"tag":"x"}})"));
  EXPECT_FALSE(parse_selector_request(R"({"process":{"pid":-1}})"));
  EXPECT_FALSE(parse_selector_request(R"({"process":{"pid":4294967296}})"));
}

TEST(EnvdMessages, SignalsByNameOrNumberOnlyKillAndTerm) {
  EXPECT_EQ(parse_send_signal(R"({"process":{"pid":1},"signal":"SIGNAL_SIGKILL"})")->signal,
            SIGKILL);
  EXPECT_EQ(parse_send_signal(R"({"process":{"pid":1},"signal":15})")->signal, SIGTERM);
  EXPECT_FALSE(parse_send_signal(R"({"process":{"pid":1},"signal":"SIGNAL_SIGSTOP"})"));
  EXPECT_FALSE(parse_send_signal(R"({"process":{"pid":1}})"));
}

TEST(EnvdMessages, SendInputDecodesBase64EvenUnpaddedOrUrlSafe) {
  EXPECT_EQ(parse_send_input(R"({"process":{"pid":1},"input":{"stdin":"aGVsbG8K"}})")->data,
            "hello\n");
  EXPECT_EQ(parse_send_input(R"({"process":{"pid":1},"input":{"stdin":"aGk"}})")->data, "hi");
  EXPECT_EQ(parse_send_input(R"({"process":{"pid":1},"input":{"stdin":"-_8"}})")->data, "\xfb\xff");
  EXPECT_FALSE(parse_send_input(R"({"process":{"pid":1},"input":{"stdin":"***"}})"));
}

TEST(EnvdMessages, StreamInputEventsAreExactlyOneOfStartDataAndKeepalive) {
  using Kind = StreamInputEvent::Kind;
  auto start = parse_stream_input_event(R"({"start":{"process":{"tag":"t"}}})");
  ASSERT_TRUE(start);
  EXPECT_EQ(start->kind, Kind::kStart);
  EXPECT_EQ(start->process.tag, "t");
  auto data = parse_stream_input_event(R"({"data":{"input":{"stdin":"aGk="}}})");
  ASSERT_TRUE(data);
  EXPECT_EQ(data->kind, Kind::kData);
  EXPECT_EQ(data->data, "hi");
  EXPECT_FALSE(data->pty);
  EXPECT_TRUE(parse_stream_input_event(R"({"data":{"input":{"pty":"aGk="}}})")->pty);
  EXPECT_EQ(parse_stream_input_event(R"({"keepalive":{}})")->kind, Kind::kKeepalive);
  for (const char* bad :
       {R"({})", R"({"start":{"process":{"pid":1}},"keepalive":{}})", R"({"start":{"process":{}}})",
        R"({"start":1})", R"({"data":{}})", R"({"data":{"input":{"stdin":"***"}}})",
        R"({"keepalive":[]})", R"([])"}) {
    auto r = parse_stream_input_event(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_FALSE(r.error().message.empty()) << bad;
    }
  }
  // The field names in the errors say where the fault is.
  EXPECT_NE(parse_stream_input_event(R"({"data":{"input":{"stdin":5}}})")
                .error()
                .message.find("data.input.stdin"),
            std::string::npos);
}

TEST(EnvdMessages, TerminalSizesAreCheckedInStartAndUpdate) {
  auto start = parse_start_request(
      R"({"process":{"cmd":"/bin/bash"},"pty":{"size":{"cols":100,"rows":30}}})");
  ASSERT_TRUE(start);
  ASSERT_TRUE(start->pty);
  EXPECT_EQ(start->pty->cols, 100);
  EXPECT_EQ(start->pty->rows, 30);
  EXPECT_FALSE(parse_start_request(R"({"process":{"cmd":"/bin/bash"}})")->pty);
  auto update = parse_update(R"({"process":{"pid":4},"pty":{"size":{"cols":1,"rows":65535}}})");
  ASSERT_TRUE(update);
  EXPECT_EQ(update->process.pid, 4u);
  EXPECT_EQ(update->pty->rows, 65535);
  EXPECT_FALSE(parse_update(R"({"process":{"pid":4}})")->pty);
  for (const char* bad :
       {R"({"process":{"pid":4},"pty":{}})", R"({"process":{"pid":4},"pty":{"size":{"cols":80}}})",
        R"({"process":{"pid":4},"pty":{"size":{"cols":0,"rows":24}}})",
        R"({"process":{"pid":4},"pty":{"size":{"cols":80,"rows":65536}}})",
        R"({"process":{"pid":4},"pty":{"size":{"cols":"x80","rows":24}}})",
        R"({"process":{"pid":4},"pty":[]})", R"({"pty":{"size":{"cols":80,"rows":24}}})"})
    EXPECT_FALSE(parse_update(bad)) << bad;
}

TEST(EnvdMessages, EndEventsSayWhatGoSays) {
  auto ok = process_end(0, std::nullopt);
  EXPECT_EQ(ok.status, "exit status 0");
  EXPECT_FALSE(ok.error);
  auto three = process_end(3, std::nullopt);
  EXPECT_EQ(three.exit_code, 3);
  EXPECT_EQ(three.error, "exit status 3");
  auto killed = process_end(std::nullopt, SIGKILL);
  EXPECT_EQ(killed.exit_code, -1);
  EXPECT_FALSE(killed.exited);
  EXPECT_EQ(killed.status, "signal: killed");
  EXPECT_EQ(
      json::parse(end_event_json(three)),
      json::parse(
          R"({"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}}})"));
  EXPECT_EQ(json::parse(data_event_json(true, "oops\n")),
            json::parse(R"({"event":{"data":{"stderr":"b29wcwo="}}})"));
  EXPECT_EQ(json::parse(start_event_json(11104)),
            json::parse(R"({"event":{"start":{"pid":11104}}})"));
}

TEST(EnvdMessages, FileModesAsGoPrintsThem) {
  EXPECT_EQ(go_file_mode_string(S_IFREG | 0644), "-rw-r--r--");
  EXPECT_EQ(go_file_mode_string(S_IFDIR | 0755), "drwxr-xr-x");
  EXPECT_EQ(go_file_mode_string(S_IFLNK | 0777), "Lrwxrwxrwx");
  EXPECT_EQ(go_file_mode_string(S_IFREG | S_ISUID | 0755), "urwxr-xr-x");
  EXPECT_EQ(go_file_mode_string(S_IFDIR | S_ISVTX | 0777), "dtrwxrwxrwx");
}

TEST(EnvdMessages, EntryInfoUsesStringSizesAndPermissionBits) {
  EntryInfo e;
  e.name = "a.txt";
  e.type = FileType::kFile;
  e.path = "/tmp/a.txt";
  e.size = 5;
  e.mode = S_IFREG | 0644;
  e.owner = e.group = "sandbox";
  e.modified_ms = 1764596419945;
  auto j = json::parse(entry_json(e));
  EXPECT_EQ(j["size"], "5");
  EXPECT_EQ(j["mode"], 420);
  EXPECT_EQ(j["type"], "FILE_TYPE_FILE");
  EXPECT_EQ(j["permissions"], "-rw-r--r--");
  EXPECT_EQ(j["modifiedTime"], "2025-12-01T13:40:19.945Z");
  EXPECT_FALSE(j.contains("symlinkTarget"));
}

TEST(EnvdMessages, ListDirDepthZeroIsOne) {
  EXPECT_EQ(parse_list_dir(R"({"path":"/x"})")->depth, 1u);
  EXPECT_EQ(parse_list_dir(R"({"path":"/x","depth":3})")->depth, 3u);
  EXPECT_FALSE(parse_list_dir(R"({"depth":3})"));
  EXPECT_FALSE(parse_move(R"({"source":"a"})"));
}

TEST(EnvdMessages, PollingWatcherMessagesUseTheProtosJsonNames) {
  EXPECT_EQ(*parse_watcher_id(R"({"watcherId":"watcher-1"})"), "watcher-1");
  EXPECT_FALSE(parse_watcher_id(R"({})"));
  EXPECT_FALSE(parse_watcher_id(R"({"watcherId":""})"));
  EXPECT_FALSE(parse_watcher_id(R"({"watcherId":7})"));
  EXPECT_FALSE(parse_watcher_id("[]"));
  EXPECT_EQ(json::parse(watcher_created_json("watcher-1")), json::parse(R"({"watcherId":"watcher-1"})"));
  EXPECT_EQ(json::parse(watcher_events_json({})), json::parse(R"({"events":[]})"));
  EXPECT_EQ(json::parse(watcher_events_json({{"a/b", FsEventType::kRename}})),
            json::parse(R"({"events":[{"name":"a/b","type":"EVENT_TYPE_RENAME"}]})"));
}

TEST(ControlMessages, CreateRequestMapsTheSdksFields) {
  auto r = parse_create_request(
      R"({"templateID":"py","metadata":{"who":"probe"},"envVars":{"STAGE":"dev"},"timeout":120,)"
      R"("allow_internet_access":true,"network":{"allowOut":["pypi.org"],"denyOut":["10.0.0.0/8"]},"unknown":{}})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->template_id, "py");
  EXPECT_EQ(r->metadata.at("who"), "probe");
  EXPECT_EQ(r->env_vars.at(0).second, "dev");
  EXPECT_EQ(r->timeout_s, 120);
  EXPECT_EQ(r->allow_out->at(0), "pypi.org");
  EXPECT_EQ(r->deny_out->at(0), "10.0.0.0/8");
  EXPECT_EQ(parse_create_request("")->template_id, "base");
}

TEST(ControlMessages, WhatCorralCannotDoIsRefusedByName) {
  for (const char* body : {R"({"autoPause":true})", R"({"autoResume":{"enabled":true}})",
                           R"({"volumeMounts":[{"name":"v","path":"/v"}]})",
                           R"({"network":{"rules":{}}})", R"({"mcp":{"x":{}}})"}) {
    auto r = parse_create_request(body);
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << body;
    EXPECT_NE(r.error().message.find("not supported"), std::string::npos);
  }
  EXPECT_TRUE(parse_create_request(R"({"autoPause":false,"volumeMounts":[],"mcp":{}})"));
  auto wrong = parse_create_request(R"({"timeout":"5m"})");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(wrong.error().message.find("timeout"), std::string::npos);
}

TEST(ControlMessages, MetadataFilterIsDecodedTwiceInside) {
  // {a: "x y&z", team: "abc"} as the SDK sends it, after the query
  // parser's own decoding.
  auto m = parse_metadata_filter("a=x%2520y%2526z&team=abc");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->at("a"), "x y&z");
  EXPECT_EQ(m->at("team"), "abc");
  EXPECT_FALSE(parse_metadata_filter("novalue"));
  EXPECT_FALSE(parse_metadata_filter("a=%zz"));
  EXPECT_TRUE(parse_metadata_filter("")->empty());
}

TEST(ControlMessages, ErrorBodiesCarryTheStatusAsANumber) {
  EXPECT_EQ(json::parse(error_json(404, "gone")), json::parse(R"({"code":404,"message":"gone"})"));
  SandboxView v;
  v.sandbox_id = "sb-1";
  v.template_id = "base";
  v.envd_version = "0.5.2";
  v.envd_access_token = "tok";
  auto created = json::parse(created_json(v));
  EXPECT_EQ(created["sandboxID"], "sb-1");
  EXPECT_EQ(created["envdAccessToken"], "tok");
  EXPECT_TRUE(created["domain"].is_null());
  auto listed = json::parse(listed_json({v}));
  ASSERT_TRUE(listed.is_array());
  EXPECT_FALSE(listed[0].contains("envdAccessToken"));
  EXPECT_EQ(json::parse(detail_json(v))["envdAccessToken"], "tok");
}

}  // namespace
}  // namespace corral::e2b
