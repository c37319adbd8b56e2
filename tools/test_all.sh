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

# A test that cannot run here (not root, an engine not installed) exits 0
# after printing "SKIPPED: <why>" (tests/integration/engines/skip.sh): it is
# counted as skipped, not passed, and named.
passed=0
skipped=0
skipped_names=()
while read -r target; do
  testlog="bazel-testlogs/$(echo "${target#//}" | tr ':' '/')/test.log"
  if [ -f "$testlog" ] && grep -q '^SKIPPED: ' "$testlog"; then
    skipped=$((skipped + 1))
    skipped_names+=("$target: $(grep -m1 '^SKIPPED: ' "$testlog" | cut -d' ' -f3-)")
  else
    passed=$((passed + 1))
  fi
done < <(grep -oE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" | awk '{print $1}')
failed=$((total - passed - skipped))
for name in "${skipped_names[@]}"; do echo "skipped: $name"; done
echo "${skipped} skipped"
echo "${passed} passed, ${failed} failed"
if [ "$bazel_rc" -ne 0 ] || [ "$failed" -ne 0 ]; then
  exit 1
fi
exit 0
