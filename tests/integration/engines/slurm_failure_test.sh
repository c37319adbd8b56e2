#!/usr/bin/env bash
# What Slurm does when a rank dies, and what the framework does then, on a
# one-node cluster of this test's own (slurm_cluster.sh). The rank is killed
# by the transport's fault injection (FSDP_FAULTS, comm/fault_injection.h):
#   1. srun -n 4 train_gpt with rank 2 killing itself: the other ranks exit
#      within milliseconds naming it, srun reports the task killed and ends
#      the step, non-zero, within 30 s of the kill (about 1 s here);
#   2. examples/slurm_relaunch.sbatch: the same job goes on at 3 tasks from
#      the survivors' memory or the newest checkpoint, and ends with the
#      digest of the --exact job that never failed (train_gpt --nproc=4).
# Skipped (with a SKIPPED line) when not root or Slurm/munge are not installed.
set -uo pipefail
train_gpt="$1"
relaunch="$2"
here="$(dirname "$0")"
source "$here/skip.sh"
source "$here/slurm_cluster.sh"
if reason=$(slurm_cluster_missing); then skip "$reason"; fi
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
cluster=$(mktemp -d /tmp/fsdp-slurm.XXXXXX)
ckpt=$(mktemp -d /tmp/fsdp-slurm-ckpt.XXXXXX)
trap 'slurm_cluster_stop; rm -rf "$cluster" "$ckpt"' EXIT
slurm_cluster_start "$cluster" || { echo "slurm_failure_test: the cluster did not come up" >&2; exit 1; }
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE FSDP_JOB_TOKEN FSDP_HANDOVER_DIR FSDP_RESTART_COUNT

# 24 sequences a step: 2 x 3 x 4 ranks, 2 x 4 x 3.
flags=(--layers=2 --d_model=64 --heads=2 --vocab=64 --seq_len=32 --micro_batch=2 --accum=3
  --strategy=full_shard --steps=12 --warmup_steps=2 --threads=1 --seed=5 --exact
  --hang_timeout_s=10)
whole=$(timeout 300 "$train_gpt" --nproc=4 "${flags[@]}" 2>&1 | grep -o 'params sha256 [0-9a-f]*')
echo "train_gpt --nproc=4, no fault: ${whole}"
[ -n "$whole" ] || { echo "slurm_failure_test: the faultless run printed no digest" >&2; exit 1; }
# Operation 900 of rank 2 falls in step 5 (about 200 operations a step).
fault="kill=2@900"

echo "--- FSDP_FAULTS=$fault srun -n 4 --overcommit train_gpt"
FSDP_FAULTS="$fault" timeout 300 srun -n 4 --overcommit --time=5 "$train_gpt" "${flags[@]}" \
  >"$tmp/killed.txt" 2>&1 &
srun_pid=$!
# From the rank's death (its own last line) to the end of the step.
while kill -0 "$srun_pid" 2>/dev/null && ! grep -q 'kills itself' "$tmp/killed.txt"; do
  sleep 0.05
done
killed_at=$(date +%s.%N)
wait "$srun_pid"
code=$?
took=$(awk -v a="$killed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "srun exited with $code, ${took} s after the kill"
grep -E 'kills itself|died|srun: ' "$tmp/killed.txt" | cut -c1-200
grep -q 'kills itself' "$tmp/killed.txt" ||
  { echo "slurm_failure_test: no rank killed itself:" >&2; cat "$tmp/killed.txt"; exit 1; }
[ "$code" -ne 0 ] || { echo "slurm_failure_test: srun succeeded with a rank killed" >&2; cat "$tmp/killed.txt"; exit 1; }
[ "$code" -ne 124 ] || { echo "slurm_failure_test: srun hung after the kill" >&2; cat "$tmp/killed.txt"; exit 1; }
awk -v t="$took" 'BEGIN { exit !(t < 30) }' ||
  { echo "slurm_failure_test: the step took ${took} s to end after the kill" >&2; exit 1; }
grep -q 'rank 2 died' "$tmp/killed.txt" ||
  { echo "slurm_failure_test: no rank named rank 2 dead:" >&2; cat "$tmp/killed.txt"; exit 1; }
grep -q 'task 2: Killed' "$tmp/killed.txt" ||
  { echo "slurm_failure_test: srun did not report task 2 killed:" >&2; cat "$tmp/killed.txt"; exit 1; }
if grep -q 'train_gpt: done' "$tmp/killed.txt"; then
  echo "slurm_failure_test: a rank finished after another died" >&2; cat "$tmp/killed.txt"; exit 1
fi

echo "--- sbatch --ntasks=4 slurm_relaunch.sbatch train_gpt --nproc=4 --min_nproc=2 ..."
if ! FSDP_FAULTS="$fault" timeout 300 sbatch --wait --ntasks=4 --overcommit --time=5 \
  --output="$tmp/relaunch.txt" "$relaunch" "$train_gpt" --nproc=4 --min_nproc=2 "${flags[@]}" \
  --buddy_every=1 --checkpoint_dir="$ckpt" --checkpoint_every=2 >"$tmp/submit.txt" 2>&1; then
  echo "slurm_failure_test: the relaunching batch job failed:" >&2
  cat "$tmp/submit.txt" "$tmp/relaunch.txt"; exit 1
fi
grep -E 'kills itself|slurm_relaunch|elastic job|resumed from' "$tmp/relaunch.txt" | cut -c1-200
relaunched=$(grep -o 'params sha256 [0-9a-f]*' "$tmp/relaunch.txt")
echo "relaunched at 3 tasks: ${relaunched}"
grep -q 'slurm_relaunch: attempt 0 at 4 tasks failed; going on with 3' "$tmp/relaunch.txt" ||
  { echo "slurm_failure_test: the script did not go on at 3 tasks:" >&2; cat "$tmp/relaunch.txt"; exit 1; }
grep -q 'elastic job, attempt 1 at 3 ranks' "$tmp/relaunch.txt" ||
  { echo "slurm_failure_test: the second step was not 3 ranks:" >&2; cat "$tmp/relaunch.txt"; exit 1; }
[ "$relaunched" = "$whole" ] ||
  { echo "slurm_failure_test: the relaunched job's digest differs" >&2; cat "$tmp/relaunch.txt"; exit 1; }
if ls -d /dev/shm/fsdp-handover-*.* 2>/dev/null | grep -q .; then
  echo "slurm_failure_test: the batch script left its memory copies behind:" >&2
  ls -la /dev/shm >&2; exit 1
fi
echo PASS
