#!/usr/bin/env bash
# A one-node Slurm cluster started and stopped by this test (munged,
# slurmctld, slurmd of its own: slurm_cluster.sh), then, with no MASTER_ADDR,
# MASTER_PORT or --nproc:
#   1. srun -n 4 --overcommit train_gpt --strategy=full_shard (the store at
#      a host and port derived from the step: no PMIx without --mpi=pmix),
#   2. the same with srun --mpi=pmix (the store's address through PMIx), and
#   3. the same as an sbatch script (sbatch --wait),
# each ending with the params_sha256 of train_gpt --nproc=4 (built-in launcher).
# Skipped (with a SKIPPED line) when not root or Slurm/munge are not installed.
set -uo pipefail
train_gpt="$1"
here="$(dirname "$0")"
source "$here/skip.sh"
source "$here/slurm_cluster.sh"
if reason=$(slurm_cluster_missing); then skip "$reason"; fi
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
# munged's socket path must fit in 108 bytes: TEST_TMPDIR is too deep.
cluster=$(mktemp -d /tmp/fsdp-slurm.XXXXXX)
trap 'slurm_cluster_stop; rm -rf "$cluster"' EXIT
slurm_cluster_start "$cluster" || { echo "slurm_test: the cluster did not come up" >&2; exit 1; }
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE FSDP_JOB_TOKEN

# No --matmul_backend: the default backend is a rule of the machine, so the
# jobs under each launcher compute with the same one and end with one digest.
flags=(--strategy=full_shard --steps=6 --warmup_steps=1 --threads=1 --hang_timeout_s=10)
launcher=$(timeout 300 "$train_gpt" --nproc=4 "${flags[@]}" 2>&1 | grep -o 'params sha256 [0-9a-f]*' | head -n 1)
echo "train_gpt --nproc=4: ${launcher}"
[ -n "$launcher" ] || { echo "slurm_test: the built-in launcher's run printed no digest" >&2; exit 1; }

echo "--- srun -n 4 --overcommit train_gpt ${flags[*]}"
if ! timeout 300 srun -n 4 --overcommit --time=5 "$train_gpt" "${flags[@]}" >"$tmp/srun.txt" 2>&1; then
  echo "slurm_test: srun failed:" >&2; cat "$tmp/srun.txt"; tail -20 "$cluster/log/slurmctld.log"; exit 1
fi
under_srun=$(grep -o 'params sha256 [0-9a-f]*' "$tmp/srun.txt" | head -n 1)
echo "srun -n 4:           ${under_srun}"
grep -q 'nproc=4 ' "$tmp/srun.txt" || { echo "slurm_test: world size is not 4:" >&2; cat "$tmp/srun.txt"; exit 1; }
[ "$under_srun" = "$launcher" ] || { echo "slurm_test: srun's digest differs" >&2; cat "$tmp/srun.txt"; exit 1; }
grep -q 'matmul backend [a-z]* (default: ' "$tmp/srun.txt" ||
  { echo "slurm_test: srun's job did not take the default backend:" >&2; cat "$tmp/srun.txt"; exit 1; }
if grep -q 'through PMIx' "$tmp/srun.txt"; then
  echo "slurm_test: plain srun (no --mpi=pmix) used PMIx:" >&2; cat "$tmp/srun.txt"; exit 1
fi

echo "--- srun --mpi=pmix -n 4 --overcommit train_gpt ${flags[*]}"
if ! timeout 300 srun --mpi=pmix -n 4 --overcommit --time=5 "$train_gpt" "${flags[@]}" \
    >"$tmp/pmix.txt" 2>&1; then
  echo "slurm_test: srun --mpi=pmix failed:" >&2; cat "$tmp/pmix.txt"; exit 1
fi
grep -m1 'through PMIx' "$tmp/pmix.txt" ||
  { echo "slurm_test: srun --mpi=pmix did not bootstrap through PMIx:" >&2; cat "$tmp/pmix.txt"; exit 1; }
under_pmix=$(grep -o 'params sha256 [0-9a-f]*' "$tmp/pmix.txt" | head -n 1)
echo "srun --mpi=pmix:     ${under_pmix}"
[ "$under_pmix" = "$launcher" ] || { echo "slurm_test: srun --mpi=pmix's digest differs" >&2; cat "$tmp/pmix.txt"; exit 1; }

# The batch script a user writes (docs/comm-transport.md has the multi-node one).
cat >"$tmp/train.sbatch" <<SB
#!/usr/bin/env bash
#SBATCH --ntasks=4
#SBATCH --overcommit
#SBATCH --time=5
#SBATCH --output=$tmp/sbatch.txt
srun "$train_gpt" ${flags[*]}
SB
echo "--- sbatch --wait train.sbatch"
if ! timeout 300 sbatch --wait "$tmp/train.sbatch" >"$tmp/sbatch_submit.txt" 2>&1; then
  echo "slurm_test: the batch job failed:" >&2; cat "$tmp/sbatch_submit.txt" "$tmp/sbatch.txt"; exit 1
fi
under_sbatch=$(grep -o 'params sha256 [0-9a-f]*' "$tmp/sbatch.txt" | head -n 1)
echo "sbatch (srun -n 4):  ${under_sbatch}"
[ "$under_sbatch" = "$launcher" ] || { echo "slurm_test: sbatch's digest differs" >&2; cat "$tmp/sbatch.txt"; exit 1; }

# The mistake of a batch script that runs the program without srun: it sees
# SLURM_NTASKS=4 but is no task of a step. It must fail at once, saying so,
# rather than wait out the rendezvous timeout for ranks nobody starts.
cat >"$tmp/nosrun.sbatch" <<SB
#!/usr/bin/env bash
#SBATCH --ntasks=4
#SBATCH --overcommit
#SBATCH --time=5
#SBATCH --output=$tmp/nosrun.txt
"$train_gpt" ${flags[*]}
SB
echo "--- sbatch --wait nosrun.sbatch (train_gpt without srun)"
start=$SECONDS
timeout 120 sbatch --wait "$tmp/nosrun.sbatch" >"$tmp/nosrun_submit.txt" 2>&1
took=$((SECONDS - start))
grep -m1 'not a task of an srun step' "$tmp/nosrun.txt" ||
  { echo "slurm_test: without srun, no error naming the missing step:" >&2; cat "$tmp/nosrun.txt"; exit 1; }
[ "$took" -lt 30 ] || { echo "slurm_test: without srun the job took ${took} s to fail" >&2; exit 1; }
echo PASS
