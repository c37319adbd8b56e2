#!/bin/bash
# Predicted against measured step time on this machine (docs/planning.md):
# for two GPT sizes, fp32 and bf16, no_shard and full_shard, at 1, 2 and 4
# ranks, plan_report's step_s against train_gpt's (global tokens per step /
# the final tokens/s, which leaves out the warm-up step). Before each run it
# waits (up to WAIT_S seconds) for the 1-minute load average to fall below
# MAX_LOAD, and records the load it started at: the machine is shared.
#
#   bazel build -c opt //examples:train_gpt //examples:plan_report //examples:plan_calibrate
#   bazel-out/k8-opt/bin/examples/plan_calibrate --matmul_backend=openblas \
#       --out=$PWD/fsdp/plan/clusters/this_machine.textproto
#   tools/plan_validate.sh > /tmp/validate.csv
set -u
BIN=${BIN:-bazel-out/k8-opt/bin/examples}
CLUSTER=${CLUSTER:-fsdp/plan/clusters/this_machine.textproto}
MAX_LOAD=${MAX_LOAD:-2.5}
WAIT_S=${WAIT_S:-120}
# Both sides on one matmul backend: train_gpt's auto choice times both at
# start, and on a busy host it flips between runs.
BACKEND=${BACKEND:-openblas}
STOP_AT=${STOP_AT:-0}  # epoch seconds after which no new run starts (0: none)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

load() { cut -d' ' -f1 /proc/loadavg; }
wait_quiet() {
  local waited=0
  while awk -v l="$(load)" -v m="$MAX_LOAD" 'BEGIN{exit !(l > m)}' && [ "$waited" -lt "$WAIT_S" ]; do
    sleep 5; waited=$((waited + 5))
  done
}

# MODE=checkpoint: the save and restart costs instead (docs/planning.md,
# "Goodput"): per model size, one rank, train_gpt saves a checkpoint after
# its last step (the "stall" it prints: the time training stops), then a
# second process resumes from it; the restart is the wall time from that
# process's launch to its "resumed from" line (start-up, plan, matmul
# backend choice, reading the shard). Prints a table and the least-squares
# fit of each cost as fixed seconds + bytes / bandwidth, the description's
# checkpoint_cost message.
if [ "${MODE:-}" = checkpoint ]; then
  CK_SIZES=("S --layers=2 --d_model=128 --heads=4"
            "M --layers=4 --d_model=256 --heads=4"
            "L --layers=8 --d_model=512 --heads=8"
            "XL --layers=12 --d_model=768 --heads=12")
  echo "size,parameters,checkpoint_bytes,save_stall_s,restart_s,load_before"
  for size in "${CK_SIZES[@]}"; do
    name=${size%% *}; flags="${size#* } --vocab=256 --seq_len=64 --micro_batch=1 --warmup_steps=0"
    wait_quiet
    before=$(load)
    rm -rf "$TMP/ck"
    export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1
    timeout 300 $BIN/train_gpt $flags --steps=2 --checkpoint_dir=$TMP/ck > $TMP/save.txt 2>&1 || {
      echo "# $name: the saving run failed:" >&2; tail -3 $TMP/save.txt >&2; continue; }
    params=$(sed -n 's/^train_gpt: \([0-9]*\) parameters.*/\1/p' $TMP/save.txt)
    stall=$(sed -n 's/.*; stall \([0-9.]*\) ms).*/\1/p' $TMP/save.txt | tail -1)
    bytes=$(du -sb $TMP/ck/step-00000002 | cut -f1)
    start=$EPOCHREALTIME
    restart=""
    while IFS= read -r line; do
      if [ -z "$restart" ] && [[ "$line" == *"resumed from"* ]]; then
        restart=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.3f", b - a}')
      fi
    done < <(timeout 300 $BIN/train_gpt $flags --steps=3 --checkpoint_dir=$TMP/ck --resume 2>&1)
    unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
    [ -n "$restart" ] || { echo "# $name: the resumed run printed no 'resumed from'" >&2; continue; }
    echo "$name,$params,$bytes,$(awk -v s="$stall" 'BEGIN{printf "%.3f", s / 1000}'),$restart,$before"
  done | tee $TMP/ck.csv
  # The fit goes through the smallest and the largest checkpoint: the fixed
  # cost is the smallest's time less its bytes at the bandwidth the span
  # between them gives (a least-squares line can cross zero below the
  # smallest size when the largest runs slower per byte, as under load).
  awk -F, 'NR > 1 { if (!n++ || $3 < lo) { lo = $3; slo = $4; rlo = $5 }
                    if ($3 > hi) { hi = $3; shi = $4; rhi = $5 } }
    function fit(tlo, thi, label,   slope, fixed) {
      slope = (thi - tlo) / (hi - lo); if (slope <= 0) slope = 1e-12
      fixed = tlo - slope * lo; if (fixed < 0) fixed = 0
      printf "# %s: %.3f s + bytes / %.4g bytes/s\n", label, fixed, (1 / slope)
    }
    END { if (n >= 2 && hi > lo) { fit(slo, shi, "save (stall)"); fit(rlo, rhi, "restart (launch to resumed)") } }' $TMP/ck.csv
  exit 0
fi

SIZES=("S --layers=2 --d_model=128 --heads=4 --vocab=256 --seq_len=64 --micro_batch=8 --steps=20"
       "M --layers=4 --d_model=256 --heads=4 --vocab=256 --seq_len=128 --micro_batch=4 --steps=6")
ONLY=${ONLY:-}  # a size name (S or M) to run only that one
echo "size,precision,strategy,ranks,predicted_s,measured_s,error,load_before,load_after"
for size in "${SIZES[@]}"; do
  name=${size%% *}; flags=${size#* }
  [ -n "$ONLY" ] && [ "$ONLY" != "$name" ] && continue
  model_flags=$(echo "$flags" | sed 's/ --steps=[0-9]*//')
  mb=$(echo "$flags" | sed 's/.*--micro_batch=\([0-9]*\).*/\1/')
  seq=$(echo "$flags" | sed 's/.*--seq_len=\([0-9]*\).*/\1/')
  for precision in fp32 bf16; do
    for strategy in no_shard full_shard; do
      for ranks in 1 2 4; do
        $BIN/plan_report $model_flags --precision=$precision --ranks=$ranks \
            --strategies=$strategy --cluster=$CLUSTER --csv=$TMP/p.csv > /dev/null || exit 1
        predicted=$(awk -F, 'NR==2{print $4}' $TMP/p.csv)
        if [ "$STOP_AT" -gt 0 ] && [ "$(date +%s)" -gt "$STOP_AT" ]; then
          echo "# out of time before $name $precision $strategy $ranks" >&2; exit 0
        fi
        wait_quiet
        before=$(load)
        rm -f $TMP/m.jsonl
        timeout 120 $BIN/train_gpt --nproc=$ranks $flags --precision=$precision \
            --strategy=$strategy --matmul_backend=$BACKEND --metrics_out=$TMP/m.jsonl > $TMP/out.txt 2>&1 || {
          echo "# $name $precision $strategy $ranks failed:" >&2; tail -3 $TMP/out.txt >&2; continue; }
        after=$(load)
        tps=$(grep '"final":true' $TMP/m.jsonl | sed 's/.*"tokens_per_s":\([0-9.e+]*\).*/\1/')
        measured=$(awk -v t="$tps" -v n=$ranks -v b=$mb -v s=$seq 'BEGIN{printf "%.4f", b*s*n/t}')
        error=$(awk -v p="$predicted" -v m="$measured" 'BEGIN{printf "%+.1f%%", 100*(p-m)/m}')
        echo "$name,$precision,$strategy,$ranks,$predicted,$measured,$error,$before,$after"
      done
    done
  done
done
