#!/usr/bin/env bash
# Runs one libFuzzer binary for a bounded time from its seed corpus
# (ctest fuzz_smoke.<name>, `make fuzz-smoke`; tests/fuzz/README.md).
#
#   run_fuzzer.sh FUZZER CORPUS_DIR MAX_LEN
#
# Environment:
#   CORRAL_FUZZ_SECONDS    how long (default 25)
#   CORRAL_FUZZ_ARTIFACTS  where a crashing input is kept (default
#                          fuzz-artifacts/ next to the fuzzer's build dir)
#   CORRAL_FUZZ_GROWN      if set, a directory that receives the inputs this
#                          run found new coverage with (to merge into the
#                          corpus by hand); by default they are thrown away
#
# The seed corpus is only read: libFuzzer writes what it finds into the first
# directory it is given, a temporary one here, so a run never changes files
# under git. Fails when the fuzzer finds a crash, a leak, a timeout (an input
# taking over 10 s), an out-of-memory or a broken property (a trap).
set -euo pipefail

fuzzer=$1
corpus=$2
max_len=$3
seconds=${CORRAL_FUZZ_SECONDS:-25}
name=$(basename "$fuzzer")
name=${name#corral_fuzz_}
artifacts=${CORRAL_FUZZ_ARTIFACTS:-$(dirname "$fuzzer")/fuzz-artifacts}/$name-$(date +%Y%m%d-%H%M%S)
mkdir -p "$artifacts"

tmp=$(mktemp -d "/tmp/corral-fuzz-$name-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
work=$tmp/new
log=$tmp/log
mkdir "$work"

# One worker, one job: ctest runs two fuzzers at a time on two cores.
# -rss_limit_mb stays below the default so that two runs fit in CI's memory.
status=0
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "$fuzzer" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=1536 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "$corpus" >"$log" 2>&1 ||
  status=$?

# The summary lines, and all of it on failure.
if ((status != 0)); then
  tail -n 200 "$log"
  echo
  echo "FUZZER FAILED: $name (exit $status)"
  for f in "$artifacts"/*; do
    [[ -f $f ]] || continue
    echo "  input kept: $f"
    echo "  reproduce:  $fuzzer $f"
  done
  echo "Fix the bug, then copy the input into $corpus (tests/fuzz/README.md)."
else
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added)' \
    "$log" || tail -3 "$log"
  echo "corpus: $(ls "$corpus" | wc -l) seeds, $(ls "$work" | wc -l) new inputs this run"
  if [[ -n ${CORRAL_FUZZ_GROWN:-} ]]; then
    mkdir -p "$CORRAL_FUZZ_GROWN/$name"
    cp -n "$work"/* "$CORRAL_FUZZ_GROWN/$name/" 2>/dev/null || true
  fi
fi
rmdir "$artifacts" 2>/dev/null || true
exit "$status"
