#!/usr/bin/env bash
# What the self-check (T3, daemon/self_check.h) adds to a create: a fresh
# `corral serve` with serve.self_check on, then one with it off, each doing
# ROUNDS creates (then deletes) without network and with an allowlist; prints
# the create p50/p99 of each and the checks' own took_us p50/p99 (issue 16's
# target: <= 1 ms added p50). Usage: [BUILD=dir] [ROUNDS=n] bench/self_check.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
ROUNDS=${ROUNDS:-40}
dir=$(mktemp -d /tmp/corral-bench-selfcheck-XXXXXX)
daemon=
trap '[[ -n $daemon ]] && kill $daemon 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
echo "== self-check bench: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $ROUNDS creates each"

run() {  # $1: on|off
  local data="$dir/$1"
  mkdir -p "$data"
  printf 'serve:\n  self_check: %s\n' "$1" >"$data/serve.yaml"
  "$BUILD/corral" serve --config "$data/serve.yaml" --data-dir "$data/data" \
    --socket "$data/corral.sock" --no-tcp >"$data/serve.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do [[ -S $data/corral.sock ]] && break; sleep 0.1; done
  for body in '{}' '{"network": {"mode": "allowlist", "allow": ["pypi.org"]}}'; do
    python3 - "$data/corral.sock" "$1" "$body" "$ROUNDS" <<'PY'
import http.client, json, socket, statistics, sys, time
sock, mode, body, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sock)
def req(method, path, data=None):
    c = Conn("corral")
    c.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, out
creates, took = [], []
for i in range(rounds):
    t0 = time.perf_counter()
    status, out = req("POST", "/v1/sandboxes", body)
    dt = time.perf_counter() - t0
    if status != 201:
        sys.exit(f"create failed: {status} {out[:300]!r}")
    j = json.loads(out)
    if i > 0:  # the first one warms the daemon up
        creates.append(dt * 1e3)
        if j.get("self_check"):
            took.append(j["self_check"]["took_us"])
    req("DELETE", "/v1/sandboxes/" + j["id"])
def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]
kind = "network" if "network" in body else "no network"
line = f"self_check {mode:3} {kind:10}: create p50 {statistics.median(creates):7.2f} ms  p99 {pct(creates, 0.99):7.2f} ms"
if took:
    line += f"   checks p50 {statistics.median(took) / 1e3:6.3f} ms  p99 {pct(took, 0.99) / 1e3:6.3f} ms"
print(line)
PY
  done
  kill $daemon; wait $daemon 2>/dev/null || true
  daemon=
}
run on
run off
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
