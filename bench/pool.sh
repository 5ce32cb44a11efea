#!/usr/bin/env bash
# Warm pool benchmark (bench/pool.py; issue 16 "Must show", C4, T3) against
# two fresh `corral serve`s, one with serve.self_check on and one with it
# off, each with a pool "bench" of 10 sandboxes (64Mi, 16Mi disk):
#  - pooled claim -> first exec output and cold create -> first exec output
#    (p50, p99), next to `corral run -- echo hi` and bwrap in the same run;
#  - what the self-check adds to the claim (p50 on vs off, and its own time);
#  - a burst of 50 claims against the pool of 10 (hits, misses, all succeed);
#  - the memory of a pool of 20 idle sandboxes: the daemon's RSS and the PSS
#    of the sandboxes' processes (/proc/PID/smaps_rollup), per sandbox.
# Usage: [BUILD=dir] bench/pool.sh [--rounds N]   (as root)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
dir=$(mktemp -d /tmp/corral-bench-XXXXXX)
pids=()
# Pooled sandboxes outlive a daemon's stop (the next one would rebuild
# them): the pools are ended first, which destroys them.
end_pools() {
  for mode in on off; do
    curl -s --unix-socket "$dir/$mode/corral.sock" -X DELETE http://corral/v1/pools/bench >/dev/null 2>&1 || true
    curl -s --unix-socket "$dir/$mode/corral.sock" -X DELETE http://corral/v1/pools/mem >/dev/null 2>&1 || true
  done
}
trap 'end_pools; for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
for mode in on off; do
  mkdir -p "$dir/$mode"
  cat >"$dir/$mode/serve.yaml" <<YAML
serve:
  self_check: "$mode"
  pools:
    - name: bench
      min: 10
      max: 10
      sandbox:
        limits: {memory: 64Mi, disk: 16Mi}
YAML
  "$BUILD/corral" serve --config "$dir/$mode/serve.yaml" --data-dir "$dir/$mode/data" \
    --socket "$dir/$mode/corral.sock" --no-tcp >"$dir/$mode/serve.log" 2>&1 &
  pids+=($!)
done
for mode in on off; do
  for _ in $(seq 100); do [[ -S $dir/$mode/corral.sock ]] && break; sleep 0.1; done
done
echo "== corral pool benchmark: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/pool.py" --socket "$dir/on/corral.sock" --daemon-pid "${pids[0]}" \
  --socket-off "$dir/off/corral.sock" --corral "$BUILD/corral" "$@"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
