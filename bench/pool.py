#!/usr/bin/python3
"""Warm pool benchmark (issue 16, C4): run by bench/pool.sh against a fresh
daemon whose config has a pool "bench" (min 10).

1. Claim -> first exec output: POST /v1/sandboxes {"pool": "bench"}, then
   POST .../exec {"cmd": "echo hi"}, timed from before the create to the
   exec's answer; the pool is let refill between rounds, so each is a hit.
2. The same for a cold create (a spec no pool matches), interleaved.
3. A burst of 50 concurrent claims against the pool of 10: all must
   succeed; hits and misses from GET /v1/pools.
Prints p50 and p99 of each and one JSON line ("bench":"pool").
"""

import argparse
import http.client
import json
import socket
import statistics
import sys
import threading
import time


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("corral")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def call(sock, method, target, body=None):
    c = UnixConnection(sock)
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, target, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, (json.loads(out) if out else {})


def wait_ready(sock, n):
    for _ in range(1200):
        _, p = call(sock, "GET", "/v1/pools/bench")
        if p.get("ready", 0) >= n:
            return p
        time.sleep(0.05)
    raise SystemExit("the pool did not fill: %s" % p)


def first_output(sock, body):
    t0 = time.monotonic()
    st, info = call(sock, "POST", "/v1/sandboxes", body)
    assert st == 201, (st, info)
    st, r = call(sock, "POST", "/v1/sandboxes/%s/exec" % info["id"], {"cmd": "echo hi"})
    dt = time.monotonic() - t0
    assert st == 200 and r.get("stdout") == "hi\n", (st, r)
    call(sock, "DELETE", "/v1/sandboxes/" + info["id"])
    return dt


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--rounds", type=int, default=50)
    a = ap.parse_args()
    sock = a.socket
    wait_ready(sock, 10)
    pooled, cold = [], []
    for _ in range(a.rounds):
        wait_ready(sock, 10)
        pooled.append(first_output(sock, {"pool": "bench"}))
        cold.append(first_output(sock, {"limits": {"memory": "96Mi", "disk": "16Mi"}}))
    _, before = call(sock, "GET", "/v1/pools/bench")
    wait_ready(sock, 10)
    ids, errors = [], []
    lock = threading.Lock()

    def claimer():
        for _ in range(5):
            st, info = call(sock, "POST", "/v1/sandboxes", {"pool": "bench"})
            with lock:
                (ids if st == 201 else errors).append(info.get("id", st))

    threads = [threading.Thread(target=claimer) for _ in range(10)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    burst_s = time.monotonic() - t0
    _, after = call(sock, "GET", "/v1/pools/bench")
    hits = after["hits"] - before["hits"]
    misses = after["misses"] - before["misses"]
    for i in ids:
        call(sock, "DELETE", "/v1/sandboxes/" + i)
    ms = lambda s: round(s * 1000, 2)
    print("%-38s %10s %10s" % ("", "p50 ms", "p99 ms"))
    print("%-38s %10.2f %10.2f" % ("pooled claim -> first exec output", ms(pct(pooled, 50)), ms(pct(pooled, 99))))
    print("%-38s %10.2f %10.2f" % ("cold create -> first exec output", ms(pct(cold, 50)), ms(pct(cold, 99))))
    print("burst of 50 claims against a pool of 10: %d succeeded, %d failed, %d hits, %d misses, %.2f s"
          % (len(ids), len(errors), hits, misses, burst_s))
    print(json.dumps({"bench": "pool", "rounds": a.rounds,
                      "pooled_p50_ms": ms(pct(pooled, 50)), "pooled_p99_ms": ms(pct(pooled, 99)),
                      "cold_p50_ms": ms(pct(cold, 50)), "cold_p99_ms": ms(pct(cold, 99)),
                      "burst_ok": len(ids), "burst_failed": len(errors),
                      "burst_hits": hits, "burst_misses": misses}))
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
