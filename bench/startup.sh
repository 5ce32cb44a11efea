#!/usr/bin/env bash
# `make bench`: start-up time (bench/startup.cc), then idle memory per open
# sandbox (bench/idle_memory.sh). Builds nothing; see bench/README.md.
#
# Usage: bench/startup.sh [corral_bench_startup options, e.g. --rounds 50]
# Environment: BUILD (build directory, default: build in the repository),
# SKIP_IDLE=1 to measure start-up time only; N, SLEEP_SECS and TOOLS are
# passed on to bench/idle_memory.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
export BUILD

prog="$BUILD/bench/corral_bench_startup"
if [[ ! -x $prog ]]; then
  echo "$prog is missing: build first (make build, or ninja -C $BUILD corral_bench_startup corral)" >&2
  exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "note: corral run needs root; without it the corral variants are skipped" >&2
fi

echo "== start-up time: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs"
"$prog" --corral "$BUILD/corral" "$@"

if [[ ${SKIP_IDLE:-0} != 1 ]]; then
  echo
  echo "== idle memory per open sandbox"
  "$here/idle_memory.sh"
fi
