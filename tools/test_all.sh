#!/usr/bin/env bash
# The whole test suite: installs what is missing, runs `bazel test //...`, and
# ends with the plain line "N passed, N failed" computed from Bazel's results.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh || exit 1

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The denominator: every test target `bazel test //...` runs (manual ones excluded),
# so a test that fails to build counts as failed.
total=$(bazel query 'tests(//...) except attr(tags, manual, tests(//...))' 2>/dev/null | grep -c '^//')
bazel test //... --test_summary=short "$@" 2>&1 | tee "$log"
bazel_rc=${PIPESTATUS[0]}

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$((total - passed))
echo "${passed} passed, ${failed} failed"
if [ "$bazel_rc" -ne 0 ] || [ "$failed" -ne 0 ]; then
  exit 1
fi
exit 0
