#!/usr/bin/env bash
# The whole test suite: installs what is missing, runs `bazel test //...`, and
# ends with the plain line "N passed, N failed" computed from Bazel's results.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh || exit 1

log=$(mktemp)
trap 'rm -f "$log"' EXIT
bazel test //... --test_summary=short "$@" 2>&1 | tee "$log"
bazel_rc=${PIPESTATUS[0]}

total=$(bazel query 'tests(//...)' 2>/dev/null | grep -c '^//')
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$((total - passed))
echo "${passed} passed, ${failed} failed"
if [ "$bazel_rc" -ne 0 ] || [ "$failed" -ne 0 ]; then
  exit 1
fi
exit 0
