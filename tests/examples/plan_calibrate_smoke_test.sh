#!/bin/bash
# //examples:plan_calibrate end to end: it measures this host and writes a
# description that the planner reads: one-thread product rates for fp32 and
# bf16 at every shape class, the same at every core as one rank's threads
# (when there is more than one), a measured collectives' share of compute,
# the links; and a bad flag is refused by name. The figures are this host's
# under whatever else runs, so only their shape is checked.
set -u
CALIBRATE=$1
REPORT=$2
TMP=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*"; exit 1; }

"$CALIBRATE" --matmul_backend=openblas --out="$TMP/here.textproto" > "$TMP/out.txt" 2>&1 ||
  { cat "$TMP/out.txt"; fail "plan_calibrate failed"; }
grep -q '^# This machine, measured by //examples:plan_calibrate on ' "$TMP/here.textproto" ||
  fail "no header with the date"
one_thread=$(grep -c 'min_dimension' "$TMP/here.textproto")
threaded=$(grep -c '^  threads: ' "$TMP/here.textproto")
cores=$(nproc)
if [ "$cores" -gt 1 ]; then
  [ "$one_thread" -eq 28 ] && [ "$threaded" -eq 14 ] ||
    fail "expected 7 shape classes x 2 dtypes at 1 thread and at $cores: $one_thread entries, $threaded threaded"
  grep -q "^  threads: $cores\$" "$TMP/here.textproto" || fail "the threaded entries are not at $cores threads"
else
  [ "$one_thread" -eq 14 ] && [ "$threaded" -eq 0 ] || fail "one core: 14 one-thread entries expected"
fi
share=$(sed -n 's/^  collective_compute_share: //p' "$TMP/here.textproto")
[ -n "$share" ] || { cat "$TMP/here.textproto"; fail "no collective_compute_share"; }
awk -v s="$share" 'BEGIN { exit !(s >= 0 && s <= 0.95) }' || fail "collective_compute_share $share out of [0, 0.95]"
grep -q 'compute while 64 MiB all-gathers run' "$TMP/out.txt" || fail "the share is not printed"
grep -q 'checkpoint_cost' "$TMP/here.textproto" && fail "a calibration wrote checkpoint_cost (measured separately)"

# The planner reads it.
"$REPORT" --layers=2 --d_model=64 --ranks=1,2 --strategies=full_shard \
    --cluster="$TMP/here.textproto" > "$TMP/plan.txt" 2>&1 ||
  { cat "$TMP/plan.txt"; fail "plan_report refused the calibrated description"; }
grep -q '^full_shard  *2 ' "$TMP/plan.txt" || { cat "$TMP/plan.txt"; fail "no 2-rank row"; }

"$CALIBRATE" --ranks=1 --out="$TMP/bad.textproto" > "$TMP/bad.txt" 2>&1 && fail "--ranks=1 accepted"
grep -q -- '--ranks must be at least 2' "$TMP/bad.txt" || { cat "$TMP/bad.txt"; fail "no clear error for --ranks=1"; }
[ ! -e "$TMP/bad.textproto" ] || fail "a refused run wrote its output"
echo "PASS"
