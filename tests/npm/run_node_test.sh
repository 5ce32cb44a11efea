#!/usr/bin/env bash
# Runs one node:test file of tests/npm against the corral under test
# (CORRAL_BIN). Skips (exit 77) with the reason when Node.js or the pinned
# packages are missing; under CORRAL_MUST_WORK=1 that is a failure.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
skip() {
  echo "$1: skipped: $2"
  [[ ${CORRAL_MUST_WORK:-0} == 1 ]] && { echo "CORRAL_MUST_WORK=1: a skip is a failure" >&2; exit 1; }
  exit 77
}
command -v node >/dev/null || skip "$1" "node is not installed (apt-get install nodejs)"
for pkg in ${NODE_TEST_PACKAGES:-e2b}; do
  [[ -d $here/node_modules/$pkg ]] || skip "$1" "tests/npm/node_modules/$pkg is missing (scripts/install-deps)"
done
cd "$here"
exec node --test --test-reporter=spec "$1"
