#!/usr/bin/env bash
# Daemon benchmarks (bench/daemon_bench.cc) against a fresh `corral serve`
# on a temporary data dir and socket. Usage: bench/daemon.sh [--rounds N]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
dir=$(mktemp -d /tmp/corral-bench-XXXXXX)
"$BUILD/corral" serve --data-dir "$dir/data" --socket "$dir/corral.sock" --no-tcp >"$dir/serve.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [[ -S $dir/corral.sock ]] && break; sleep 0.1; done
echo "== corral serve daemon benchmarks: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs"
"$BUILD/bench/corral_bench_daemon" --socket "$dir/corral.sock" --daemon-pid "$daemon" \
  --corral "$BUILD/corral" "$@"
