// Hand-built TLS ClientHello messages for the tests of the egress proxy's
// SNI reading (a real client's bytes are captured from `openssl s_client`
// where the tests need them; these give exact control over each field).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace corral::testing {

struct ClientHelloSpec {
  std::vector<std::string> host_names;   // in one server_name extension; empty: none
  bool duplicate_sni_extension = false;  // a second server_name extension
  bool ech = false;                      // an encrypted_client_hello extension
  std::size_t padding = 0;               // a padding extension (21) of this many bytes
  std::size_t record_size = 0;           // split the handshake into records of this size; 0: one
};

inline void put16(std::string& out, std::size_t v) {
  out.push_back(static_cast<char>((v >> 8) & 0xff));
  out.push_back(static_cast<char>(v & 0xff));
}

inline std::string tls_extension(std::uint16_t type, const std::string& data) {
  std::string out;
  put16(out, type);
  put16(out, data.size());
  return out + data;
}

inline std::string sni_extension(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names) {
    list.push_back(0);  // host_name
    put16(list, n.size());
    list += n;
  }
  std::string data;
  put16(data, list.size());
  return tls_extension(0, data + list);
}

// The handshake message (type, length, body), without record headers.
inline std::string client_hello_message(const ClientHelloSpec& spec) {
  std::string body;
  body += "\x03\x03";               // legacy_version TLS 1.2
  body += std::string(32, '\x11');  // random
  body.push_back(32);               // legacy_session_id
  body += std::string(32, '\x22');
  put16(body, 6);  // cipher suites
  body += std::string("\x13\x01\x13\x02\x00\xff", 6);
  body += std::string("\x01\x00", 2);  // compression: null
  std::string ext;
  if (!spec.host_names.empty()) ext += sni_extension(spec.host_names);
  if (spec.duplicate_sni_extension) ext += sni_extension({"other.example"});
  ext += tls_extension(43, std::string("\x02\x03\x04", 3));      // supported_versions: 1.3
  ext += tls_extension(10, std::string("\x00\x02\x00\x1d", 4));  // supported_groups: x25519
  if (spec.ech) ext += tls_extension(0xfe0d, std::string(8, '\x33'));
  if (spec.padding > 0) ext += tls_extension(21, std::string(spec.padding, '\0'));
  put16(body, ext.size());
  body += ext;
  std::string msg;
  msg.push_back(1);  // client_hello
  msg.push_back(static_cast<char>((body.size() >> 16) & 0xff));
  put16(msg, body.size() & 0xffff);
  return msg + body;
}

// The message in TLS records, as a client sends it.
inline std::string client_hello_records(const std::string& message, std::size_t record_size = 0) {
  std::string out;
  std::size_t step = record_size == 0 ? 16384 : record_size;
  for (std::size_t pos = 0; pos < message.size(); pos += step) {
    std::string frag = message.substr(pos, step);
    out += std::string("\x16\x03\x01", 3);
    put16(out, frag.size());
    out += frag;
  }
  return out;
}

inline std::string build_client_hello(const ClientHelloSpec& spec) {
  return client_hello_records(client_hello_message(spec), spec.record_size);
}

inline std::string build_client_hello(const std::string& sni) {
  ClientHelloSpec spec;
  if (!sni.empty()) spec.host_names = {sni};
  return build_client_hello(spec);
}

}  // namespace corral::testing
