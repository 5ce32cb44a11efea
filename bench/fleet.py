#!/usr/bin/python3
"""Fleet benchmark (issue 18 "Must show"), run by bench/fleet.sh against one
node on SQLite, one node on PostgreSQL and three nodes sharing PostgreSQL.

1. Create -> ready, sequential: POST /v1/sandboxes (64Mi, 16Mi disk), timed to
   its 201, then DELETE (not timed). On three nodes the creates go to each
   node in turn. The rounds of the three setups are interleaved, so load
   changes hit all of them alike. p50 and p99 of each, and the ratios of the
   p50s to SQLite's.
2. Throughput: a burst of --burst creates at once (8 client threads), then
   their destroys; creates per second from the first request to the last
   answer. On three nodes the burst is sent round-robin and each create is
   placed by the fleet (docs/fleet.md "Placement"); where they ran is printed.
3. Forwarded exec: on the three nodes, POST .../exec {"cmd": "true"} on a
   sandbox of node-b, sent to node-b (local) and to node-a (forwarded to
   node-b), interleaved; p50 of each and their ratio.
Prints one JSON line ("bench":"fleet").
"""

import argparse
import json
import threading
import time

from unix_http import call  # bench/unix_http.py


BODY = {"limits": {"memory": "64Mi", "disk": "16Mi"}}


def create(sock, body=None, nodes=None):
    """Creates a sandbox through `sock`; (seconds, id). The node it was
    placed on is counted in `nodes` (a dict) when given."""
    t0 = time.monotonic()
    st, info = call(sock, "POST", "/v1/sandboxes", body or BODY)
    dt = time.monotonic() - t0
    assert st == 201, (st, info)
    if nodes is not None:
        nodes[info.get("node", "")] = nodes.get(info.get("node", ""), 0) + 1
    return dt, info["id"]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def burst(socks, n, threads=8, nodes=None):
    ids, errors, lock = [], [], threading.Lock()
    todo = list(range(n))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            try:
                placed = {}
                _, sid = create(socks[i % len(socks)], nodes=placed)
                with lock:
                    if nodes is not None:
                        for k, v in placed.items():
                            nodes[k] = nodes.get(k, 0) + v
                    ids.append((socks[i % len(socks)], sid))
            except AssertionError as e:
                with lock:
                    errors.append(str(e))

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    took = time.monotonic() - t0
    for sock, sid in ids:
        call(sock, "DELETE", "/v1/sandboxes/" + sid)
    return len(ids) / took, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sqlite", required=True)
    ap.add_argument("--pg1", required=True)
    ap.add_argument("--pg3", required=True)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--burst", type=int, default=48)
    a = ap.parse_args()
    setups = {"sqlite_1": [a.sqlite], "postgres_1": [a.pg1], "postgres_3": a.pg3.split(",")}
    for socks in setups.values():  # warm-up: images, host base, connections
        for s in socks:
            _, sid = create(s)
            call(s, "DELETE", "/v1/sandboxes/" + sid)
    lat = {k: [] for k in setups}
    for r in range(a.rounds):
        for name, socks in setups.items():
            s = socks[r % len(socks)]
            dt, sid = create(s)
            lat[name].append(dt)
            call(s, "DELETE", "/v1/sandboxes/" + sid)
    rates, spread = {}, {}
    for name, socks in setups.items():
        spread[name] = {}
        rate, errors = burst(socks, a.burst, nodes=spread[name])
        rates[name] = rate
        if errors:
            print("  %s burst errors: %d (first: %s)" % (name, len(errors), errors[0][:200]))
    # Forwarded exec against a local one (node-b's sandbox; node-a relays).
    pg3 = setups["postgres_3"]
    node_a, node_b = pg3[0], pg3[1]
    # Placed on node-b by name: with placement, a create sent to node-b may
    # otherwise run elsewhere.
    _, sid = create(node_b, dict(BODY, placement={"node": "node-b"}))
    local, forwarded = [], []
    for r in range(a.rounds * 3):
        for sock, into in ((node_b, local), (node_a, forwarded)):
            t0 = time.monotonic()
            st, res = call(sock, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true"})
            into.append(time.monotonic() - t0)
            assert st == 200 and res.get("exit_code") == 0, (st, res)
    call(node_b, "DELETE", "/v1/sandboxes/" + sid)
    base = pct(lat["sqlite_1"], 50)
    out = {"bench": "fleet", "rounds": a.rounds, "burst": a.burst}
    print("create -> ready (sequential, %d rounds; three nodes: round-robin)" % a.rounds)
    for name in setups:
        p50, p99 = pct(lat[name], 50), pct(lat[name], 99)
        print("  %-11s p50 %7.1f ms  p99 %7.1f ms  p50 / sqlite_1 %.3fx   burst of %d: %6.1f creates/s"
              " (%.3fx sqlite_1)" % (name, p50 * 1e3, p99 * 1e3, p50 / base, a.burst, rates[name],
                                     rates[name] / rates["sqlite_1"]))
        out[name] = {"p50_ms": round(p50 * 1e3, 2), "p99_ms": round(p99 * 1e3, 2),
                     "ratio_p50": round(p50 / base, 3), "creates_per_s": round(rates[name], 1),
                     "burst_nodes": spread[name]}
    print("  three nodes: the burst was placed %s" % json.dumps(spread["postgres_3"], sort_keys=True))
    fl, fw = pct(local, 50), pct(forwarded, 50)
    print("exec round trip on node-b's sandbox (%d rounds): local p50 %.2f ms, forwarded by node-a"
          " p50 %.2f ms: %.3fx" % (len(local), fl * 1e3, fw * 1e3, fw / fl))
    out["exec_local_p50_ms"] = round(fl * 1e3, 3)
    out["exec_forwarded_p50_ms"] = round(fw * 1e3, 3)
    out["exec_forwarded_ratio"] = round(fw / fl, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
