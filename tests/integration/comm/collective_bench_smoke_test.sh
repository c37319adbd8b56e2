#!/bin/bash
# File: tests/integration/comm/collective_bench_smoke_test.sh
#
# Smoke test of //examples:collective_bench: a tiny 2-rank sweep through the
# launcher library must exit 0 (so no element was wrong), print the nccl-tests
# tables, and write a CSV with the documented header and one row per
# (collective, size); bad flags must fail with exit code 2 and name the flag.
# Timing values are not checked (no timing assertions in tests).
#
# Also runs //examples:cma_bandwidth once at 1 MiB and //examples:work_floors
# at 96 KiB when their paths are given.
#
# Usage (Bazel passes it):
#   collective_bench_smoke_test.sh <path of collective_bench> [<path of cma_bandwidth>
#                                  [<path of work_floors>]]
set -u
bench="$1"
cma="${2:-}"
floors="${3:-}"
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
# In place, 4 KiB pages, 3 ranks above the latency threshold (ring
# all-gather, direct reduce-scatter), and the forced direct algorithm: every
# run checks its results and exits 1 on a wrong element.
out="$("$bench" --nproc 3 --min_bytes 256K --max_bytes 256K --iters 1 --warmup 1 \
        --in_place --huge_pages=false --collectives all_gather,reduce_scatter 2>&1)"
code=$?
echo "$out"
[ "$code" -eq 0 ] || fail "3-rank in-place run exited $code"
echo "$out" | grep -q "# all_gather  ranks: 3 .*in place  4 KiB pages" ||
  fail "the in-place table header does not say 'in place  4 KiB pages'"
out="$("$bench" --nproc 4 --min_bytes 1M --max_bytes 1M --iters 1 --warmup 1 \
        --algorithm direct --dtype bf16 --collectives reduce_scatter,all_reduce 2>&1)"
code=$?
echo "$out"
[ "$code" -eq 0 ] || fail "4-rank direct bf16 run exited $code"

# //examples:cma_bandwidth: four cases, each with a best and a median.
if [ -n "$cma" ]; then
  out="$("$cma" --mib 1 --iters 2 2>&1)"
  code=$?
  echo "$out"
  [ "$code" -eq 0 ] || fail "cma_bandwidth exited $code"
  lines="$(echo "$out" | grep -c "best .* GB/s   median .* GB/s")"
  [ "$lines" -eq 4 ] || fail "cma_bandwidth printed $lines result lines, expected 4"
  "$cma" --mib 0 >/dev/null 2>&1
  [ "$?" -eq 2 ] || fail "cma_bandwidth --mib 0 did not exit 2"
fi

# //examples:work_floors: the point-to-point floor and four per rank count
# (each floor checks the bytes it moved); bad flags exit 2.
if [ -n "$floors" ]; then
  out="$("$floors" --nproc 2,3 --bytes 96K --iters 2 --in_place 2>&1)"
  code=$?
  echo "$out"
  [ "$code" -eq 0 ] || fail "work_floors exited $code"
  lines="$(echo "$out" | grep -c " us .* GB/s busbw")"
  [ "$lines" -eq 9 ] || fail "work_floors printed $lines floors, expected 1 + 2 x 4 = 9"
  for flags in "--bytes 64K --nproc 3" "--nproc 1" "--bytes abc" "--iters 0"; do
    # shellcheck disable=SC2086
    "$floors" $flags >/dev/null 2>&1
    [ "$?" -eq 2 ] || fail "work_floors $flags did not exit 2"
  done
fi

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
