// An upstream that reflects what it was sent (issue 12, point 7
// "responses"): the test servers of net_world.h answer a request whose
// target contains "/reflect" with its own head and body, as echo services,
// error pages and httpbin's /anything do. The query picks the shape:
//
//   frame=length (default) | chunked | close   how the body is delimited
//   piece=N     the body goes out in writes (and chunks) of N bytes (64)
//   encoding=X  adds "Content-Encoding: X" (the body stays as it is: a
//               host that says gzip and is not believed must not pass)
//   decode=basic  also the decoded Authorization: Basic credentials
//
// Fields of the answer: X-Echo-Authorization (the request's Authorization
// value, raw) and X-Seen-Accept-Encoding (what the request asked for).
#pragma once

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace corral::testing {

// A field's value as sent (first match, case-insensitive name), or "".
inline std::string raw_field(const std::string& head, const std::string& name) {
  std::size_t at = 0;
  while ((at = head.find("\r\n", at)) != std::string::npos) {
    at += 2;
    if (head.size() - at <= name.size() || head[at + name.size()] != ':') continue;
    bool same = true;
    for (std::size_t i = 0; i < name.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(head[at + i])) ==
             std::tolower(static_cast<unsigned char>(name[i]));
    if (!same) continue;
    std::size_t start = head.find_first_not_of(" \t", at + name.size() + 1);
    std::size_t end = head.find("\r\n", at);
    if (start == std::string::npos || start > end) return "";
    return head.substr(start, end - start);
  }
  return "";
}

inline bool wants_reflection(const std::string& head) {
  const std::size_t eol = head.find("\r\n");
  return head.substr(0, eol).find("/reflect") != std::string::npos;
}

inline std::string query_param(const std::string& head, const std::string& key) {
  const std::string line = head.substr(0, head.find("\r\n"));
  const std::size_t q = line.find('?');
  if (q == std::string::npos) return "";
  const std::string query = line.substr(q + 1, line.find(' ', q) - q - 1);
  std::size_t at = 0;
  while (at <= query.size()) {
    std::size_t amp = query.find('&', at);
    if (amp == std::string::npos) amp = query.size();
    const std::string item = query.substr(at, amp - at);
    if (item.rfind(key + "=", 0) == 0) return item.substr(key.size() + 1);
    at = amp + 1;
  }
  return "";
}

inline std::string base64_decoded(const std::string& in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned bits = 0;
  int have = 0;
  for (char c : in) {
    const std::size_t v = kAlphabet.find(c);
    if (v == std::string::npos) continue;  // '=' and anything else
    bits = (bits << 6) | static_cast<unsigned>(v);
    have += 6;
    if (have >= 8) {
      have -= 8;
      out.push_back(static_cast<char>((bits >> have) & 0xff));
    }
  }
  return out;
}

// The writes that make up the answer, in order.
inline std::vector<std::string> reflection_writes(const std::string& head,
                                                  const std::string& body) {
  std::string frame = query_param(head, "frame");
  const std::string piece_text = query_param(head, "piece");
  std::size_t piece = piece_text.empty() ? 64 : std::strtoul(piece_text.c_str(), nullptr, 10);
  if (piece == 0) piece = 1;
  std::string text = "== head ==\n" + head + "== body ==\n" + body + "\n";
  const std::string auth = raw_field(head, "authorization");
  if (query_param(head, "decode") == "basic" && auth.rfind("Basic ", 0) == 0)
    text += "== basic ==\n" + base64_decoded(auth.substr(6)) + "\n";
  std::string out_head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Echo-Authorization: " +
                         auth + "\r\nX-Seen-Accept-Encoding: " +
                         raw_field(head, "accept-encoding") + "\r\n";
  if (const std::string enc = query_param(head, "encoding"); !enc.empty())
    out_head += "Content-Encoding: " + enc + "\r\n";
  if (frame == "chunked") {
    out_head += "Transfer-Encoding: chunked\r\n";
  } else if (frame != "close") {
    out_head += "Content-Length: " + std::to_string(text.size()) + "\r\n";
  }
  out_head += "Connection: close\r\n\r\n";
  std::vector<std::string> writes{out_head};
  for (std::size_t at = 0; at < text.size(); at += piece) {
    const std::string part = text.substr(at, piece);
    if (frame == "chunked") {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", part.size());
      writes.push_back(size + part + "\r\n");
    } else {
      writes.push_back(part);
    }
  }
  if (frame == "chunked") writes.push_back("0\r\n\r\n");
  return writes;
}

}  // namespace corral::testing
