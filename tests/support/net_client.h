// The client side of the network security tests: a Python prelude that the
// sandbox's python3 runs before a test's own lines, and the reading of what
// it printed. Each check prints one line, name=<result>.
#pragma once

#include <string>

namespace corral::testing {

// out(name, value); transparent_http(host, port=80, path="/", connect_to=None)
// -> "OK <last line>"; proxied_http(url); tls_get(host, sni=None, port=443,
// sock=None) with the world's CA from $WORLD_CA; connect_via_proxy(target)
// -> (socket, status line); tcp_echo(host, port=5432); gw(method, path,
// token=None, header="auth", via_proxy=False, body=None) -> "<status> <last
// line>" from gateway.corral.internal with $CORRAL_GATEWAY_TOKEN;
// raw_get(host, port, path, via_proxy=False). Failures read "ERR <type>".
extern const char* const kNetClientPy;

// The value printed as name=<value>, or "<missing>".
std::string value_of(const std::string& out, const std::string& name);

}  // namespace corral::testing
