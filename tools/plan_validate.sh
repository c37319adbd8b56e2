#!/bin/bash
# Predicted against measured step time on this machine (docs/planning.md,
# "Checked against this machine"): per GPT size (S, M, L), precision (fp32,
# bf16), strategy (all five; hybrid_shard in groups of 2 at 4 and 8 ranks) and rank
# count (1, 2, 4, 8), plan_report's step_s against train_gpt's (global tokens
# per step / the final tokens/s, which leaves out the warm-up step). Before
# each run it waits (up to WAIT_S seconds) for the 1-minute load average to
# fall below MAX_LOAD, and records the load before and after: the machine is
# shared. One command gives the whole table (CSV on stdout, with '#' lines:
# the date, CPU, binaries and description first, a summary of the errors
# last):
#
#   bazel build -c opt //examples:train_gpt //examples:plan_report //examples:plan_calibrate
#   bazel-out/k8-opt/bin/examples/plan_calibrate --matmul_backend=openblas \
#       --out=$PWD/fsdp/plan/clusters/this_machine.textproto
#   tools/plan_validate.sh > /tmp/validate.csv
#
# Narrower: SIZES_ONLY="S M", PRECISIONS="fp32", STRATEGIES="no_shard
# full_shard", RANKS="1 2"; TRAIN_GPT= / PLAN_REPORT= name other binaries.
# MODE=checkpoint measures save and restart costs instead (below).
set -u
BIN=${BIN:-bazel-out/k8-opt/bin/examples}
TRAIN_GPT=${TRAIN_GPT:-$BIN/train_gpt}
PLAN_REPORT=${PLAN_REPORT:-$BIN/plan_report}
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
    timeout 300 $TRAIN_GPT $flags --steps=2 --checkpoint_dir=$TMP/ck > $TMP/save.txt 2>&1 || {
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
    done < <(timeout 300 $TRAIN_GPT $flags --steps=3 --checkpoint_dir=$TMP/ck --resume 2>&1)
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
       "M --layers=4 --d_model=256 --heads=4 --vocab=256 --seq_len=128 --micro_batch=4 --steps=6"
       "L --layers=4 --d_model=512 --heads=8 --vocab=256 --seq_len=128 --micro_batch=4 --steps=6")
SIZES_ONLY=${SIZES_ONLY:-${ONLY:-}}  # size names to run (S M L), or all
PRECISIONS=${PRECISIONS:-fp32 bf16}
STRATEGIES=${STRATEGIES:-no_shard shard_optimizer shard_grad_op full_shard hybrid_shard}
RANKS=${RANKS:-1 2 4 8}
flag() { echo "$1" | sed -n "s/.*--$2=\([0-9]*\).*/\1/p"; }

echo "# plan_validate.sh $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
echo "# command: TRAIN_GPT=$TRAIN_GPT PLAN_REPORT=$PLAN_REPORT MAX_LOAD=$MAX_LOAD WAIT_S=$WAIT_S SIZES_ONLY='$SIZES_ONLY' PRECISIONS='$PRECISIONS' STRATEGIES='$STRATEGIES' RANKS='$RANKS' tools/plan_validate.sh"
echo "# train_gpt: $TRAIN_GPT; plan_report: $PLAN_REPORT; description: $CLUSTER; backend: $BACKEND"
echo "size,layers,d_model,heads,vocab,seq_len,micro_batch,precision,strategy,ranks,group_size,predicted_s,measured_s,error,load_before,load_after"
for size in "${SIZES[@]}"; do
  name=${size%% *}; flags=${size#* }
  [ -n "$SIZES_ONLY" ] && [[ " $SIZES_ONLY " != *" $name "* ]] && continue
  model_flags=$(echo "$flags" | sed 's/ --steps=[0-9]*//')
  mb=$(flag "$flags" micro_batch); seq=$(flag "$flags" seq_len)
  dims="$(flag "$flags" layers),$(flag "$flags" d_model),$(flag "$flags" heads),$(flag "$flags" vocab),$seq,$mb"
  for precision in $PRECISIONS; do
    for strategy in $STRATEGIES; do
      for ranks in $RANKS; do
        group=0
        if [ "$strategy" = hybrid_shard ]; then
          [ "$ranks" -ge 4 ] || continue  # a group strictly between 1 and the world
          group=2
        fi
        $PLAN_REPORT $model_flags --precision=$precision --ranks=$ranks \
            --strategies=$strategy --cluster=$CLUSTER --csv=$TMP/p.csv > $TMP/p.txt 2>&1 ||
          { cat $TMP/p.txt >&2; exit 1; }
        predicted=$(awk -F, -v g=$group 'NR > 1 && $3 == g {print $4}' $TMP/p.csv)
        if [ "$STOP_AT" -gt 0 ] && [ "$(date +%s)" -gt "$STOP_AT" ]; then
          echo "# out of time before $name $precision $strategy $ranks" >&2; break 4
        fi
        wait_quiet
        before=$(load)
        rm -f $TMP/m.jsonl
        group_flag=""; [ "$group" -gt 0 ] && group_flag="--group_size=$group"
        timeout 300 $TRAIN_GPT --nproc=$ranks $flags --precision=$precision \
            --strategy=$strategy $group_flag --matmul_backend=$BACKEND \
            --metrics_out=$TMP/m.jsonl > $TMP/out.txt 2>&1 || {
          echo "# $name $precision $strategy $ranks failed:" >&2; tail -3 $TMP/out.txt >&2; continue; }
        after=$(load)
        tps=$(grep '"final":true' $TMP/m.jsonl | sed 's/.*"tokens_per_s":\([0-9.e+]*\).*/\1/')
        measured=$(awk -v t="$tps" -v n=$ranks -v b=$mb -v s=$seq 'BEGIN{printf "%.4f", b*s*n/t}')
        error=$(awk -v p="$predicted" -v m="$measured" 'BEGIN{printf "%+.1f%%", 100*(p-m)/m}')
        echo "$name,$dims,$precision,$strategy,$ranks,$group,$predicted,$measured,$error,$before,$after"
      done
    done
  done
done | tee $TMP/table.csv
awk -F, '$1 !~ /^#/ && $14 ~ /%$/ { e = $14; sub(/%/, "", e); e += 0; if (e < 0) e = -e;
           n++; a[n] = e; if (e <= 15) in15++ }
  END { if (!n) exit
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        printf "# %d rows: |error| median %.1f%%, max %.1f%%, %d within 15%%\n", n, a[int((n + 1) / 2)], a[n], in15 }' $TMP/table.csv
