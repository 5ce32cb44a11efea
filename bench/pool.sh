#!/usr/bin/env bash
# Warm pool benchmark (bench/pool.py; issue 16, C4) against a fresh
# `corral serve` with a pool "bench" of 10 sandboxes (64Mi, 16Mi disk).
# Usage: [BUILD=dir] bench/pool.sh [--rounds N]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
dir=$(mktemp -d /tmp/corral-bench-XXXXXX)
cat >"$dir/serve.yaml" <<'YAML'
serve:
  pools:
    - name: bench
      min: 10
      max: 10
      sandbox:
        limits: {memory: 64Mi, disk: 16Mi}
YAML
"$BUILD/corral" serve --config "$dir/serve.yaml" --data-dir "$dir/data" --socket "$dir/corral.sock" \
  --no-tcp >"$dir/serve.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [[ -S $dir/corral.sock ]] && break; sleep 0.1; done
echo "== corral pool benchmark: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/pool.py" --socket "$dir/corral.sock" "$@"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
