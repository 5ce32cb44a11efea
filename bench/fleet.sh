#!/usr/bin/env bash
# Fleet benchmark (bench/fleet.py; issue 18 "Must show"): sandbox creates on
#  - one node on SQLite (the baseline),
#  - one node on PostgreSQL,
#  - three nodes sharing one PostgreSQL database (creates spread round-robin),
# in one run: create -> ready p50/p99 (sequential) and the throughput of a
# burst of concurrent creates; and on the three nodes, an exec round trip on
# node-b's sandbox sent to node-b against the same sent to node-a (forwarded
# to node-b over loopback TCP, signed with the cluster key). PostgreSQL is a throwaway cluster (Debian's
# server binaries as `postgres`, a temporary directory, a free loopback
# port, fsync off as in the tests), removed on exit with the daemons.
# Usage: [BUILD=dir] bench/fleet.sh [--rounds N] [--burst N]   (as root)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -x $pgbin/initdb ]] || { echo "fleet.sh: PostgreSQL server binaries missing (scripts/install-deps)" >&2; exit 1; }
dir=$(mktemp -d /tmp/corral-bench-fleet-XXXXXX)
chmod 755 "$dir"
pids=()
pg_up=
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n $pg_up ]] && runuser -u postgres -- "$pgbin/pg_ctl" -D "$dir/pg" -m immediate stop >/dev/null 2>&1 || true
  for n in 1 2 3 4 5; do nft delete table inet corral_bfleet$n 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
mkdir -p "$dir/pg" && chown postgres "$dir/pg"
echo "$password" >"$dir/pw" && chown postgres "$dir/pw"
runuser -u postgres -- "$pgbin/initdb" -D "$dir/pg" -U corral --pwfile="$dir/pw" -A scram-sha-256 >"$dir/initdb.log"
runuser -u postgres -- "$pgbin/pg_ctl" -D "$dir/pg" -l "$dir/pg/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir/pg -c fsync=off -c max_connections=100" start >/dev/null
pg_up=1
url_base="postgres://corral:$password@127.0.0.1:$port"
for db in one three; do
  PGPASSWORD=$password "$pgbin/psql" -q -h 127.0.0.1 -p "$port" -U corral -d postgres -c "CREATE DATABASE $db" >/dev/null
done

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/cluster.key"
chmod 600 "$dir/cluster.key"
start() {  # name slot state
  local name=$1 slot=$2 state=$3
  local listen
  listen=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$dir/$name"
  cat >"$dir/$name/serve.yaml" <<YAML
serve:
  listen: "127.0.0.1:$listen"
  state: "$state"
  cluster_key_file: $dir/cluster.key
  node: {id: $name}
  network: {subnet: 10.24$slot.0.0/16, interface_prefix: bf$slot, firewall_table: corral_bfleet$slot,
            proxy_port: $((16300 + 2 * slot)), dns_port: $((16301 + 2 * slot))}
YAML
  "$BUILD/corral" serve --config "$dir/$name/serve.yaml" --data-dir "$dir/$name/data" \
    --socket "$dir/$name/corral.sock" >"$dir/$name/serve.log" 2>&1 &
  pids+=($!)
}
start sqlite 1 "$dir/sqlite/state.db"
start pg1 2 "$url_base/one"
start node-a 3 "$url_base/three"
start node-b 4 "$url_base/three"
start node-c 5 "$url_base/three"
for name in sqlite pg1 node-a node-b node-c; do
  for _ in $(seq 200); do [[ -S $dir/$name/corral.sock ]] && break; sleep 0.1; done
  [[ -S $dir/$name/corral.sock ]] || { cat "$dir/$name/serve.log" >&2; exit 1; }
done
echo "== corral fleet benchmark: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') on loopback"
python3 "$here/fleet.py" --sqlite "$dir/sqlite/corral.sock" --pg1 "$dir/pg1/corral.sock" \
  --pg3 "$dir/node-a/corral.sock,$dir/node-b/corral.sock,$dir/node-c/corral.sock" "$@"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
