#!/usr/bin/python3
"""Warm pool benchmark (issue 16 "Must show", C4, T3): run by bench/pool.sh
against two fresh daemons whose configs have a pool "bench" (min 10), one
with serve.self_check on (--socket) and one with it off (--socket-off).

1. Claim -> first exec output: POST /v1/sandboxes {"pool": "bench"}, then
   POST .../exec {"cmd": "echo hi"}, timed from before the create to the
   exec's answer; the pool is let refill between rounds, so each is a hit.
   On both daemons: the difference of the p50s is what the self-check adds
   to a claim; its own time (self_check.took_us of the claimed sandbox's
   diagnostics) is printed too.
2. The same for a cold create (a spec no pool matches), interleaved; and
   `corral run -- echo hi` and bwrap's `echo hi`, interleaved too.
3. A burst of 50 concurrent claims against the pool of 10: all must
   succeed; hits and misses from GET /v1/pools.
4. Memory of a pool of 20 idle sandboxes (POST /v1/pools "mem", min 20):
   the daemon's VmRSS and the summed Pss (/proc/PID/smaps_rollup) of the
   daemon's descendants, before and after the pool filled; per sandbox:
   the difference / 20.
Prints p50 and p99 of each and one JSON line ("bench":"pool").
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

from unix_http import call  # bench/unix_http.py


def wait_ready(sock, n, pool="bench"):
    p = {}
    for _ in range(2400):
        _, p = call(sock, "GET", "/v1/pools/" + pool)
        if p.get("ready", 0) >= n:
            return p
        time.sleep(0.05)
    raise SystemExit("pool %s did not fill: %s" % (pool, p))


def first_output(sock, body, took=None, create=None):
    t0 = time.monotonic()
    st, info = call(sock, "POST", "/v1/sandboxes", body)
    assert st == 201, (st, info)
    if create is not None:
        create.append(time.monotonic() - t0)
    st, r = call(sock, "POST", "/v1/sandboxes/%s/exec" % info["id"], {"cmd": "echo hi"})
    dt = time.monotonic() - t0
    assert st == 200 and r.get("stdout") == "hi\n", (st, r)
    if took is not None:
        _, d = call(sock, "GET", "/v1/sandboxes/%s/diagnostics" % info["id"])
        if isinstance(d.get("self_check"), dict):
            took.append(d["self_check"]["took_us"] / 1e6)
    call(sock, "DELETE", "/v1/sandboxes/" + info["id"])
    return dt


def run_cli(argv):
    t0 = time.monotonic()
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
    dt = time.monotonic() - t0
    assert out == b"hi\n", out
    return dt


def bwrap_argv(bwrap):
    a = [bwrap, "--unshare-all", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            a += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            a += ["--ro-bind", top, top]
    return a + ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/bin/echo", "hi"]


def descendants(root):
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def kib(path, field):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(daemon):
    """(daemon VmRSS KiB, summed Pss KiB of its descendants, their count)"""
    procs = descendants(daemon)
    return (kib("/proc/%d/status" % daemon, "VmRSS"),
            sum(kib("/proc/%d/smaps_rollup" % p, "Pss") for p in procs), len(procs))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--socket-off", required=True)
    ap.add_argument("--daemon-pid", type=int, required=True)
    ap.add_argument("--corral", required=True)
    ap.add_argument("--rounds", type=int, default=50)
    a = ap.parse_args()
    sock = a.socket
    bwrap = shutil.which("bwrap")
    for s in (sock, a.socket_off):
        wait_ready(s, 10)
    pooled, pooled_off, took, cold, run, bw, claim = [], [], [], [], [], [], []
    for _ in range(a.rounds):
        wait_ready(sock, 10)
        pooled.append(first_output(sock, {"pool": "bench"}, took, claim))
        wait_ready(a.socket_off, 10)
        pooled_off.append(first_output(a.socket_off, {"pool": "bench"}))
        cold.append(first_output(sock, {"limits": {"memory": "96Mi", "disk": "16Mi"}}))
        run.append(run_cli([a.corral, "run", "--", "/bin/echo", "hi"]))
        if bwrap:
            bw.append(run_cli(bwrap_argv(bwrap)))
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

    # Memory: the bench pool full and steady, then a pool of 20 more.
    wait_ready(sock, 10)
    time.sleep(1)
    rss0, pss0, n0 = memory(a.daemon_pid)
    st, p = call(sock, "POST", "/v1/pools", {"name": "mem", "min": 20, "max": 20,
                                              "sandbox": {"limits": {"memory": "64Mi", "disk": "16Mi"}}})
    assert st == 201, (st, p)
    wait_ready(sock, 20, "mem")
    time.sleep(1)
    rss1, pss1, n1 = memory(a.daemon_pid)
    call(sock, "DELETE", "/v1/pools/mem")

    ms = lambda s: round(s * 1000, 2)
    row = lambda name, xs: print("%-44s %10.2f %10.2f" % (name, ms(pct(xs, 50)), ms(pct(xs, 99))))
    print("%-44s %10s %10s   (%d rounds)" % ("", "p50 ms", "p99 ms", a.rounds))
    row("pooled claim -> first exec output", pooled)
    row("  the same, serve.self_check off", pooled_off)
    row("  of which the claim (POST answered)", claim)
    if took:
        row("  the self-check's own time at claim", took)
    row("cold create -> first exec output", cold)
    row("corral run -- echo hi", run)
    if bw:
        row("bwrap --unshare-all ... echo hi", bw)
    print("self-check added to a claim (p50 on - p50 off): %.2f ms" % (ms(pct(pooled, 50)) - ms(pct(pooled_off, 50))))
    print("burst of 50 claims against a pool of 10: %d succeeded, %d failed, %d hits, %d misses, %.2f s"
          % (len(ids), len(errors), hits, misses, burst_s))
    print("pool of 20 idle sandboxes: daemon RSS %d -> %d KiB (+%d KiB, %.0f KiB per sandbox); "
          "PSS of its %d -> %d descendants %d -> %d KiB (%.0f KiB per sandbox)"
          % (rss0, rss1, rss1 - rss0, (rss1 - rss0) / 20.0, n0, n1, pss0, pss1, (pss1 - pss0) / 20.0))
    print(json.dumps({"bench": "pool", "rounds": a.rounds,
                      "pooled_p50_ms": ms(pct(pooled, 50)), "pooled_p99_ms": ms(pct(pooled, 99)),
                      "pooled_self_check_off_p50_ms": ms(pct(pooled_off, 50)),
                      "pooled_self_check_off_p99_ms": ms(pct(pooled_off, 99)),
                      "claim_post_p50_ms": ms(pct(claim, 50)), "claim_post_p99_ms": ms(pct(claim, 99)),
                      "self_check_took_p50_ms": ms(pct(took, 50)) if took else None,
                      "cold_p50_ms": ms(pct(cold, 50)), "cold_p99_ms": ms(pct(cold, 99)),
                      "corral_run_p50_ms": ms(pct(run, 50)), "corral_run_p99_ms": ms(pct(run, 99)),
                      "bwrap_p50_ms": ms(pct(bw, 50)) if bw else None,
                      "bwrap_p99_ms": ms(pct(bw, 99)) if bw else None,
                      "burst_ok": len(ids), "burst_failed": len(errors),
                      "burst_hits": hits, "burst_misses": misses,
                      "pool20_daemon_rss_kib": [rss0, rss1],
                      "pool20_pss_kib": [pss0, pss1],
                      "pool20_pss_per_sandbox_kib": round((pss1 - pss0) / 20.0)}))
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
