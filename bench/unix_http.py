"""JSON calls to a corral daemon's unix socket, for the Python benchmarks."""

import http.client
import json
import socket


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("corral")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def call(sock, method, target, body=None):
    """One request on a fresh connection: (status, parsed JSON or {})."""
    c = UnixConnection(sock)
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, target, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, (json.loads(out) if out else {})
