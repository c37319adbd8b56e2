#!/usr/bin/env bash
# Checks that run_fuzz_test.sh fails a fuzz test whose seed crashes, and
# prints a reproducer that exists and holds the crashing bytes: once for an
# AddressSanitizer report, once for UndefinedBehaviorSanitizer.
#   run_fuzz_test_test.sh RUNNER FUZZER HEAP_SEED UB_SEED
set -uo pipefail
runner=$1 fuzzer=$2 heap_seed=$3 ub_seed=$4
failures=0

check() {  # check NAME SEED SANITIZER_WORDS
  local name=$1 seed=$2 words=$3
  local out="$TEST_TMPDIR/$name"
  mkdir -p "$out/tmp" "$out/outputs"
  TEST_TMPDIR="$out/tmp" TEST_UNDECLARED_OUTPUTS_DIR="$out/outputs" \
    TEST_TARGET=//tools/fuzz:planted \
    "$runner" --fuzzer="$fuzzer" --max_total_time=10 "$seed" > "$out/log" 2>&1
  local rc=$?
  local ok=1
  if [[ $rc -ne 1 ]]; then echo "$name: runner exited $rc, want 1"; ok=0; fi
  if ! grep -q "$words" "$out/log"; then echo "$name: no '$words' in the output"; ok=0; fi
  local reproducer
  reproducer=$(sed -n 's/^run_fuzz_test: reproducer: //p' "$out/log" | head -1)
  if [[ -z "$reproducer" ]]; then
    echo "$name: no 'reproducer:' line"; ok=0
  elif ! cmp -s "$reproducer" "$seed"; then
    echo "$name: reproducer $reproducer missing or not the seed's bytes"; ok=0
  fi
  if ! grep -q "base64: $(base64 -w0 "$seed")\$" "$out/log"; then
    echo "$name: no base64 of the input"; ok=0
  fi
  if ! grep -q "replay: .*bazel-bin/tools/fuzz/planted_bin" "$out/log"; then
    echo "$name: no replay command"; ok=0
  fi
  if [[ $ok -eq 1 ]]; then
    echo "$name: ok (reproducer $reproducer)"
  else
    failures=$((failures + 1))
    echo "--- $name: runner output ---"; cat "$out/log"; echo "---"
  fi
}

check heap "$heap_seed" "ERROR: AddressSanitizer: heap-buffer-overflow"
check ub "$ub_seed" "runtime error: signed integer overflow"
exit $((failures > 0))
