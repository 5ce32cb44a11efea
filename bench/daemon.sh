#!/usr/bin/env bash
# Daemon benchmarks (bench/daemon_bench.cc) against a fresh `corral serve`
# on a temporary data dir and socket. Usage: [BUILD=dir] bench/daemon.sh [--rounds N]
# [--burst N] [--only exec]. Set PERF_RECORD=FILE to profile the whole machine with
# `perf record -a -g` while the benchmarks run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
dir=$(mktemp -d /tmp/corral-bench-XXXXXX)
"$BUILD/corral" serve --data-dir "$dir/data" --socket "$dir/corral.sock" --no-tcp >"$dir/serve.log" 2>&1 &
daemon=$!
# Not stopped by set -e: a daemon that already died must not keep its dir.
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [[ -S $dir/corral.sock ]] && break; sleep 0.1; done
echo "== corral serve daemon benchmarks: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
perf_pid=
if [[ -n ${PERF_RECORD:-} ]]; then
  perf record -a -g -o "$PERF_RECORD" >"$dir/perf.log" 2>&1 &
  perf_pid=$!
  sleep 0.5
fi
"$BUILD/bench/corral_bench_daemon" --socket "$dir/corral.sock" --daemon-pid "$daemon" \
  --corral "$BUILD/corral" "$@"
if [[ -n $perf_pid ]]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
