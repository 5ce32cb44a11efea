#!/usr/bin/env bash
# A sandbox's real download through corral's egress proxy, against the same
# download on the host (issue 4's throughput target, on the whole path:
# firewall redirect or HTTP_PROXY, conntrack, the relay, the sandbox around
# the reader). The upstream (corral_bench_download_server) sits in a network
# namespace behind a plain veth at the network's MTU (1500), as a real
# upstream does. The reader is the same python3 program everywhere, reading
# into 1 MiB. Each round: direct, two sandboxes (transparent and through
# $http_proxy, their order alternating), direct again; each sandbox's rate
# is divided by the mean of the two direct runs. Prints every round and the
# medians. Needs root; leaves nothing behind (trap).
#
#   bench/sandbox_download.sh [ROUNDS=20] [MIB=1024]     BUILD=dir for another build
set -euo pipefail
rounds=${1:-20}
mib=${2:-1024}
build=${BUILD:-build}
corral="$build/corral"
server="$build/bench/corral_bench_download_server"
[[ $(id -u) == 0 ]] || { echo "run as root" >&2; exit 1; }
[[ -x $corral && -x $server ]] || { echo "build first: ninja -C $build corral corral_bench_download_server" >&2; exit 1; }
ns=corral-bench-dl host_if=cbdl0 up_if=cbdl1 host_ip=10.250.0.1 up_ip=10.250.0.2 port=8080
work=$(mktemp -d /tmp/corral-bench-dl-XXXXXX)
cleanup() {
  [[ -n ${server_pid:-} ]] && kill "$server_pid" 2>/dev/null || true
  ip link del "$host_if" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip link add "$host_if" type veth peer name "$up_if" netns "$ns"
ip addr add "$host_ip/30" dev "$host_if" && ip link set "$host_if" up
ip -n "$ns" addr add "$up_ip/30" dev "$up_if" && ip -n "$ns" link set "$up_if" up
ip -n "$ns" link set lo up
ip netns exec "$ns" "$server" "$up_ip" "$port" $((mib * 1024 * 1024)) &
server_pid=$!
cat > "$work/read.py" <<'PY'
import os, socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
proxy = os.environ.get("http_proxy") if len(sys.argv) > 3 else None
t0 = time.time()
if proxy:
    ph, pp = proxy.split("//")[1].rstrip("/").rsplit(":", 1)
    s = socket.create_connection((ph, int(pp)))
    s.sendall(b"GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
else:
    s = socket.create_connection((host, port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode())
buf = bytearray(1 << 20)
total = 0
while True:
    n = s.recv_into(buf)
    if n == 0:
        break
    total += n
print("%.0f" % (total / (time.time() - t0) / 2**20))
PY
sleep 0.3
run=("$corral" run --network allowlist --allow "$up_ip:$port" --mount-root "$work" --mount "$work:/bench:ro" --)
direct() { /usr/bin/python3 "$work/read.py" "$up_ip" "$port"; }
transparent() { "${run[@]}" /usr/bin/python3 /bench/read.py "$up_ip" "$port" | tail -1; }
proxyvar() { "${run[@]}" /usr/bin/python3 /bench/read.py "$up_ip" "$port" proxy | tail -1; }
echo "round direct_MiB/s transparent proxy_var (ratios to the mean of the direct runs around them)"
: > "$work/ratios"
for ((i = 1; i <= rounds; i++)); do
  a=$(direct)
  if ((i % 2)); then t=$(transparent); p=$(proxyvar); else p=$(proxyvar); t=$(transparent); fi
  b=$(direct)
  /usr/bin/python3 -c 'import sys; i,a,t,p,b=sys.argv[1:]; d=(float(a)+float(b))/2; print("%s %.0f %.3f %.3f"%(i,d,float(t)/d,float(p)/d))' "$i" "$a" "$t" "$p" "$b" | tee -a "$work/ratios"
done
/usr/bin/python3 - "$work/ratios" <<'PY'
import statistics, sys, json
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
t = [float(r[2]) for r in rows]; p = [float(r[3]) for r in rows]
out = {"bench": "sandbox_download", "rounds": len(rows),
       "direct_mib_s_median": statistics.median(float(r[1]) for r in rows),
       "transparent_median": round(statistics.median(t), 3),
       "proxy_var_median": round(statistics.median(p), 3),
       "both_median": round(statistics.median(t + p), 3),
       "at_least_0_80": sum(x >= 0.8 for x in t + p), "runs": len(t + p)}
print(f"median ratio: transparent {out['transparent_median']}, proxy-var {out['proxy_var_median']}, "
      f"both {out['both_median']} ({out['at_least_0_80']} of {out['runs']} runs >= 0.80; target >= 0.80)")
print(json.dumps(out))
PY
