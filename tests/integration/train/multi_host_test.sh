#!/usr/bin/env bash
# Two "hosts" on one machine: each rank of a 2-rank full_shard job runs in its
# own network namespace, joined by a veth pair, and the ranks meet over TCP
# (rendezvous on rank 0's address, UCX forced to its tcp transport, as between
# machines). The job must train and end with the same parameters, bit for bit,
# as the same job over loopback shared memory through the launcher.
#
# Needs root (ip netns). Namespaces, the veth pair and the ranks are removed on
# exit, pass or fail. Addresses are the test's own (10.231.N.0/24 inside its
# namespaces); no traffic leaves them.
set -euo pipefail

train_gpt="$1"
# shellcheck source=tests/integration/two_hosts.sh
source "$(dirname "$0")/../two_hosts.sh"
make_two_hosts fsdp_test 10.231
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
id=$$

# --threads=1 on both runs: OpenBLAS's summation order depends on its thread
# count, and bit-for-bit equality needs the same arithmetic.
flags=(--nproc=2 --strategy=full_shard --steps=5 --warmup_steps=1 --threads=1)
port=$((29000 + id % 1000))
rank_env=(WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR="$addr_a"
          MASTER_PORT="$port" FSDP_JOB_TOKEN="multi-host-${id}" UCX_TLS=tcp,self)

ip netns exec "$ns_a" env RANK=0 "${rank_env[@]}" timeout 120 "$train_gpt" "${flags[@]}" \
  > "$tmp/rank0.txt" 2>&1 &
pids+=($!)
ip netns exec "$ns_b" env RANK=1 "${rank_env[@]}" timeout 120 "$train_gpt" "${flags[@]}" \
  > "$tmp/rank1.txt" 2>&1 &
pids+=($!)
status=0
wait "${pids[0]}" || status=$?
wait "${pids[1]}" || status=$?
pids=()
if [ "$status" -ne 0 ]; then
  echo "multi_host_test: a rank failed (exit $status)" >&2
  echo "--- rank 0:"; cat "$tmp/rank0.txt"; echo "--- rank 1:"; cat "$tmp/rank1.txt"
  exit 1
fi

across_hosts=$(grep -o 'params sha256 [0-9a-f]*' "$tmp/rank0.txt" || true)
over_loopback=$("$train_gpt" "${flags[@]}" 2>&1 | grep -o 'params sha256 [0-9a-f]*' || true)
echo "across namespaces (TCP): ${across_hosts}"
echo "over loopback (shm):     ${over_loopback}"
if [ -z "$across_hosts" ] || [ "$across_hosts" != "$over_loopback" ]; then
  echo "multi_host_test: the two runs ended with different parameters" >&2
  cat "$tmp/rank0.txt"
  exit 1
fi
echo "PASS"
