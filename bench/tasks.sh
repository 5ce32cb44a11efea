#!/usr/bin/env bash
# Task benchmarks (bench/tasks.py) against a fresh `corral serve` on a
# temporary data dir and socket. Usage: [BUILD=dir] bench/tasks.sh [--rounds N]
# [--snapshot-mib N] [--output-mib N]. Needs root; leaves nothing behind.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
dir=$(mktemp -d "${BENCH_TMP:-/tmp}/corral-bench-tasks-XXXXXX")
"$BUILD/corral" serve --data-dir "$dir/data" --socket "$dir/corral.sock" --no-tcp >"$dir/serve.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [[ -S $dir/corral.sock ]] && break; sleep 0.1; done
echo "== corral task benchmarks: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$here/tasks.py" --url "unix:$dir/corral.sock" "$@"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
