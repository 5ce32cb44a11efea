#!/usr/bin/env bash
# The E2B facade against corral's own API (issue 17): bench/e2b.mjs in one
# Node process, against a fresh `corral serve` on a temporary data dir and a
# loopback port. Usage: [BUILD=dir] bench/e2b.sh [--rounds N]. Needs root,
# Node.js and tests/npm's packages (scripts/install-deps); leaves nothing.
#
# Node runs with --single-threaded-gc (NODE_FLAGS overrides it): the client
# and the daemon share this host's CPUs, and V8's concurrent marking threads,
# which the SDK's megabyte buffers set off, would otherwise take the CPU the
# daemon needs while a request is in flight (perf: the slow kills of the SDK
# runs had both CPUs in V8's ConcurrentMarking). Both paths run under the
# same flag; the client's GC time stays in its scenario's figures.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$repo/$BUILD"
dir=$(mktemp -d "${BENCH_TMP:-/tmp}/corral-bench-e2b-XXXXXX")
cat >"$dir/serve.yaml" <<'YAML'
serve:
  e2b:
    network: none
sandbox:
  disk_limit: 256Mi
  memory_limit: 512Mi
YAML
"$BUILD/corral" serve --config "$dir/serve.yaml" --data-dir "$dir/data" --socket "$dir/corral.sock" \
  --listen 127.0.0.1:0 >"$dir/serve.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$dir"' EXIT
url=
for _ in $(seq 100); do
  url=$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$dir/serve.log" | sed 's/listening on //' || true)
  [[ -n $url ]] && break
  sleep 0.1
done
[[ -n $url ]] || { cat "$dir/serve.log"; exit 1; }
echo "== corral E2B facade benchmark: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), node ${NODE_FLAGS---single-threaded-gc}"
NODE_PATH="$repo/tests/npm/node_modules" CORRAL_URL="$url" CORRAL_KEY="$(cat "$dir/data/api-key")" \
  node ${NODE_FLAGS---single-threaded-gc} "$here/e2b.mjs" "$@"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
