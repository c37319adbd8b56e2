#!/usr/bin/env bash
# Open MPI's mpirun as the engine, with no MASTER_ADDR, MASTER_PORT or --nproc:
# the ranks take their world from OMPI_COMM_WORLD_* and rank 0's store
# address through PMIx, which mpirun serves (comm/rendezvous/pmix_session.h).
#   1. mpirun -np 4 collective_worker --scenario=all (every collective, in
#      flight, sub-communicators), each rank checked against the reference;
#   2. mpirun -np 4 train_gpt --strategy=full_shard: the same params_sha256 as
#      train_gpt --nproc=4 through the built-in launcher.
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
echo PASS
