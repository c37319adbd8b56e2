#!/bin/bash
# File: tests/integration/comm/collective_bench_smoke_test.sh
#
# Smoke test of //examples:collective_bench: a tiny 2-rank sweep through the
# launcher library must exit 0 (so no element was wrong), print the nccl-tests
# tables, and write a CSV with the documented header and one row per
# (collective, size); bad flags must fail with exit code 2 and name the flag.
# Timing values are not checked (no timing assertions in tests).
#
# Usage (Bazel passes it): collective_bench_smoke_test.sh <path of collective_bench>
set -u
bench="$1"
tmp="${TEST_TMPDIR:-/tmp}"
csv="$tmp/bench.csv"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out="$("$bench" --nproc 2 --min_bytes 4K --max_bytes 8K --iters 2 --warmup 1 \
        --csv="$csv" 2>&1)"
code=$?
echo "$out"
[ "$code" -eq 0 ] || fail "2-rank sweep exited $code"
for collective in all_gather reduce_scatter all_reduce broadcast; do
  echo "$out" | grep -q "# $collective  ranks: 2" || fail "no table for $collective"
done
header="$(head -1 "$csv" 2>/dev/null)"
[ "$header" = "collective,ranks,bytes,time_us,algbw_gbps,busbw_gbps" ] ||
  fail "CSV header is '$header'"
rows="$(tail -n +2 "$csv" 2>/dev/null | wc -l)"
[ "$rows" -eq 8 ] || fail "CSV has $rows rows, expected 4 collectives x 2 sizes = 8"
for collective in all_gather reduce_scatter all_reduce broadcast; do
  for bytes in 4096 8192; do
    grep -q "^$collective,2,$bytes," "$csv" || fail "no CSV row $collective,2,$bytes"
  done
done
ls "$tmp" | grep -q "bench.csv.tmp" && fail "temporary CSV left behind"

check_bad_flag() {
  local expected="$1"; shift
  local message
  message="$("$bench" "$@" 2>&1)"
  local status=$?
  [ "$status" -eq 2 ] || fail "'$*' exited $status, expected 2"
  echo "$message" | grep -q -- "$expected" || fail "'$*' said '$message', expected '$expected'"
}
check_bad_flag "--dtype=fp16" --dtype=fp16
check_bad_flag "--algorithm=tree" --algorithm=tree
check_bad_flag "larger than --max_bytes" --min_bytes=1M --max_bytes=4K
check_bad_flag "--min_bytes=abc" --min_bytes=abc
check_bad_flag "--nproc=0" --nproc=0
check_bad_flag "not writable" --csv=/nonexistent-dir/x.csv

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
