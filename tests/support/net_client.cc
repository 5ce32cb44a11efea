#include "support/net_client.h"

#include <sstream>

namespace corral::testing {

const char* const kNetClientPy = R"PY(
import os, socket, ssl, sys, urllib.request
TOK = os.environ.get("CORRAL_GATEWAY_TOKEN", "")
CA = os.environ.get("WORLD_CA", "")
def out(name, value):
    print(f"{name}={value}", flush=True)
def err(e):
    return "ERR " + type(e).__name__
def read_all(s):
    data = b""
    while True:
        try:
            c = s.recv(65536)
        except ConnectionResetError:
            return data
        if not c: return data
        data += c
def transparent_http(host, port=80, path="/", connect_to=None):
    try:
        s = socket.create_connection((connect_to or host, port), timeout=5)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        d = read_all(s).decode(errors="replace")
        return "OK " + d.splitlines()[-1] if d else "EMPTY"
    except Exception as e:
        return err(e)
def proxied_http(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return "OK " + r.read().decode().strip()
    except Exception as e:
        return err(e)
def tls_get(host, sni=None, port=443, sock=None):
    try:
        ctx = ssl.create_default_context(cadata=CA)
        s = sock or socket.create_connection((host, port), timeout=5)
        t = ctx.wrap_socket(s, server_hostname=sni or host)
        t.sendall(f"GET / HTTP/1.1\r\nHost: {sni or host}\r\nConnection: close\r\n\r\n".encode())
        d = read_all(t).decode(errors="replace")
        return "OK " + d.splitlines()[-1] if d else "EMPTY"
    except Exception as e:
        return err(e)
def connect_via_proxy(target):
    p = os.environ["HTTP_PROXY"].split("//")[1]
    h, port = p.split(":")
    s = socket.create_connection((h, int(port)), timeout=5)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c: break
        head += c
    return s, head.decode(errors="replace").split("\r\n")[0]
def tcp_echo(host, port=5432):
    try:
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(b"ping")
        return "OK " + s.recv(16).decode()
    except Exception as e:
        return err(e)
def gw(method, path, token=None, header="auth", via_proxy=False, body=None):
    token = TOK if token is None else token
    try:
        if via_proxy:
            p = os.environ["HTTP_PROXY"].split("//")[1]
            h, port = p.split(":")
            s = socket.create_connection((h, int(port)), timeout=5)
            target = "http://gateway.corral.internal" + path
        else:
            s = socket.create_connection(("gateway.corral.internal", 80), timeout=5)
            target = path
        req = f"{method} {target} HTTP/1.1\r\nHost: gateway.corral.internal\r\nConnection: close\r\n"
        if token:
            if header == "auth":
                req += f"Authorization: Bearer {token}\r\n"
            else:
                req += f"X-Corral-Gateway-Token: {token}\r\n"
        if body is not None:
            req += f"Content-Length: {len(body)}\r\n"
        s.sendall(req.encode() + b"\r\n" + (body or b""))
        d = read_all(s).decode(errors="replace")
        if not d.startswith("HTTP/1."):
            return "EMPTY" if not d else "GARBAGE"
        return d.split(" ")[1] + " " + d.strip().splitlines()[-1]
    except Exception as e:
        return err(e)
def raw_get(host, port, path, via_proxy=False):
    try:
        if via_proxy:
            p = os.environ["HTTP_PROXY"].split("//")[1]
            h, pp = p.split(":")
            s = socket.create_connection((h, int(pp)), timeout=5)
            target = f"http://{host}:{port}{path}"
        else:
            s = socket.create_connection((host, port), timeout=5)
            target = path
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        d = read_all(s).decode(errors="replace")
        return "OK " + d.strip().splitlines()[-1] if d else "EMPTY"
    except Exception as e:
        return err(e)
)PY";

std::string value_of(const std::string& out, const std::string& name) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + "=", 0) == 0) return line.substr(name.size() + 1);
  }
  return "<missing>";
}

}  // namespace corral::testing
