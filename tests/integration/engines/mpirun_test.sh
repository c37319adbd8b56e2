#!/usr/bin/env bash
# Open MPI's mpirun as the engine, with no MASTER_ADDR, MASTER_PORT or --nproc:
# the ranks take their world from OMPI_COMM_WORLD_* and rank 0's store
# address through PMIx, which mpirun serves (comm/rendezvous/pmix_session.h).
#   1. mpirun -np 4 collective_worker --scenario=all (every collective, in
#      flight, sub-communicators), each rank checked against the reference;
#   2. mpirun -np 4 train_gpt --strategy=full_shard: the same params_sha256 as
#      train_gpt --nproc=4 through the built-in launcher;
#   3. a rank killed (FSDP_FAULTS): mpirun aborts the job; the loop of
#      docs/failures.md ("Under the engines") starts it again at 3 ranks,
#      which end with the digest of the --exact job that never failed.
# Skipped (with a SKIPPED line) when mpirun is not installed.
set -uo pipefail
train_gpt="$1"
worker="$2"
source "$(dirname "$0")/skip.sh"
command -v mpirun >/dev/null || skip "mpirun is not installed (tools/setup.sh installs openmpi-bin)"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"

mpi=(mpirun --oversubscribe -np 4)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
# No MASTER_* and no launcher variables: the engine's own environment only.
clean=(env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE -u FSDP_JOB_TOKEN)

echo "--- mpirun -np 4 collective_worker --scenario=all"
if ! "${clean[@]}" timeout 300 "${mpi[@]}" "$worker" --scenario=all >"$tmp/coll.txt" 2>&1; then
  echo "mpirun_test: the collective scenarios failed under mpirun:" >&2
  cat "$tmp/coll.txt"; exit 1
fi
passes=$(grep -c ' PASS ' "$tmp/coll.txt")
grep ' PASS ' "$tmp/coll.txt"
# grid, inflight and split on each of 4 ranks.
if [ "$passes" -ne 12 ] || grep -q ' FAIL ' "$tmp/coll.txt"; then
  echo "mpirun_test: expected 12 PASS lines (3 scenarios x 4 ranks) and no FAIL, got $passes" >&2
  cat "$tmp/coll.txt"; exit 1
fi

# No --matmul_backend: the default backend is a rule of the machine, so the
# jobs under each launcher compute with the same one and end with one digest.
flags=(--strategy=full_shard --steps=6 --warmup_steps=1 --threads=1 --hang_timeout_s=10)
echo "--- mpirun -np 4 train_gpt ${flags[*]}"
if ! "${clean[@]}" timeout 300 "${mpi[@]}" "$train_gpt" "${flags[@]}" >"$tmp/mpi.txt" 2>&1; then
  echo "mpirun_test: train_gpt failed under mpirun:" >&2; cat "$tmp/mpi.txt"; exit 1
fi
under_mpirun=$(grep -o 'params sha256 [0-9a-f]*' "$tmp/mpi.txt" | head -n 1)
# No MASTER_* variables: rank 0's store address must have come through PMIx.
grep -m1 'through PMIx' "$tmp/mpi.txt" ||
  { echo "mpirun_test: train_gpt did not bootstrap through PMIx:" >&2; cat "$tmp/mpi.txt"; exit 1; }
grep -q 'nproc=4 ' "$tmp/mpi.txt" || { echo "mpirun_test: world size is not 4:" >&2; cat "$tmp/mpi.txt"; exit 1; }
grep -q 'matmul backend [a-z]* (default: ' "$tmp/mpi.txt" ||
  { echo "mpirun_test: the job did not take the default backend:" >&2; cat "$tmp/mpi.txt"; exit 1; }
launcher=$("${clean[@]}" timeout 300 "$train_gpt" --nproc=4 "${flags[@]}" 2>&1 | grep -o 'params sha256 [0-9a-f]*' | head -n 1)
echo "mpirun -np 4:       ${under_mpirun}"
echo "train_gpt --nproc=4: ${launcher}"
if [ -z "$under_mpirun" ] || [ "$under_mpirun" != "$launcher" ]; then
  echo "mpirun_test: mpirun and the built-in launcher ended with different parameters" >&2
  cat "$tmp/mpi.txt"; exit 1
fi

# 3. mpirun when a rank dies, and a relaunch at one rank fewer.
exact=(--layers=2 --d_model=64 --heads=2 --vocab=64 --seq_len=32 --micro_batch=2 --accum=3
  --strategy=full_shard --steps=12 --warmup_steps=2 --threads=1 --seed=5 --exact --hang_timeout_s=10)
whole=$("${clean[@]}" timeout 300 "$train_gpt" --nproc=4 "${exact[@]}" 2>&1 | grep -o 'params sha256 [0-9a-f]*')
ckpt=$(mktemp -d)
handover=$(mktemp -d /dev/shm/fsdp-handover-mpirun.XXXXXX)
trap 'rm -rf "$ckpt" "$handover"' EXIT
echo "--- mpirun relaunch loop, rank 2 killed at its operation 900"
n=4
attempt=0
while [ "$n" -ge 2 ]; do
  if FSDP_FAULTS=kill=2@900 FSDP_HANDOVER_DIR="$handover" FSDP_RESTART_COUNT=$attempt \
    "${clean[@]}" timeout 300 mpirun --oversubscribe -np "$n" \
    $([ "$(id -u)" -eq 0 ] && echo --allow-run-as-root) \
    -x FSDP_FAULTS -x FSDP_HANDOVER_DIR -x FSDP_RESTART_COUNT \
    "$train_gpt" --nproc=4 --min_nproc=2 "${exact[@]}" --buddy_every=1 \
    --checkpoint_dir="$ckpt" --checkpoint_every=2 >>"$tmp/relaunch.txt" 2>&1; then
    break
  fi
  echo "relaunch: attempt $attempt at $n ranks failed; going on with $((n - 1))" >>"$tmp/relaunch.txt"
  n=$((n - 1))
  attempt=$((attempt + 1))
done
grep -E 'kills itself|mpirun noticed|relaunch:|elastic job|resumed from' "$tmp/relaunch.txt" | cut -c1-200
relaunched=$(grep -o 'params sha256 [0-9a-f]*' "$tmp/relaunch.txt")
echo "no fault:            ${whole}"
echo "relaunched at $n:     ${relaunched}"
grep -q 'relaunch: attempt 0 at 4 ranks failed' "$tmp/relaunch.txt" ||
  { echo "mpirun_test: the first attempt did not fail:" >&2; cat "$tmp/relaunch.txt"; exit 1; }
if [ "$n" -ne 3 ] || [ -z "$whole" ] || [ "$relaunched" != "$whole" ]; then
  echo "mpirun_test: the relaunch at 3 ranks did not end with the faultless digest" >&2
  cat "$tmp/relaunch.txt"; exit 1
fi
echo PASS
