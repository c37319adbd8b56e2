#!/usr/bin/env bash
# File: tests/integration/comm/multi_host_grid_test.sh
#
# Two "hosts" of two ranks each on one machine: ranks 0-1 run in one network
# namespace and ranks 2-3 in another, joined by a veth pair; they meet over
# TCP (rendezvous on rank 0's address, UCX forced to its tcp transport, as
# between machines) and run collective_worker's whole scenario: the grid
# (every collective x counts x fp32/bf16 x algorithms auto, ring, latency and
# direct), collectives in flight together, and sub-communicators. Each host
# has its own host name, so the world is not on one host and kAuto takes the
# ring; the forced direct reduce-scatter opens 3 flows per rank across hosts,
# which the 2-rank multi-host training test (tests/integration/train) never
# does. Then the same 4 ranks again, with rank 3 (on the second host) killing
# itself after posting a 64 MiB all-reduce: ranks 0-2 must fail with
# UNAVAILABLE or DEADLINE_EXCEEDED naming rank 3, within their 5 s Wait()
# deadline, and exit.
#
# Needs root (ip netns). Namespaces, the veth pair and the ranks are removed
# on exit, pass or fail. Addresses are the test's own (10.232.N.0/24 inside
# its namespaces); no traffic leaves them.
#
# Usage (Bazel passes it): multi_host_grid_test.sh <path of collective_worker>
set -euo pipefail

worker="$1"
# shellcheck source=tests/integration/two_hosts.sh
source "$(dirname "$0")/../two_hosts.sh"
make_two_hosts fsdp_grid 10.232
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
id=$$

# start_ranks <job name> <port> <log prefix> <time limit, s> <worker flags...>:
# ranks 0-1 on the first host, 2-3 on the second, over TCP, each killed if it
# outlives the limit; their pids go to `pids`.
start_ranks() {
  local job="$1" port="$2" log="$3" limit="$4"
  shift 4
  local rank ns
  for rank in 0 1 2 3; do
    ns="$ns_a"
    [ "$rank" -ge 2 ] && ns="$ns_b"
    # Each "host" also gets its own host name (a UTS namespace), as two
    # machines would have: the communicator tells hosts apart by it.
    ip netns exec "$ns" unshare --uts env RANK="$rank" LOCAL_RANK=$((rank % 2)) \
      WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR="$addr_a" MASTER_PORT="$port" \
      FSDP_JOB_TOKEN="${job}-${id}" UCX_TLS=tcp,self HOST_NAME="${ns//_/-}" \
      sh -c 'hostname "$HOST_NAME" && exec "$@"' sh \
      timeout -s KILL "$limit" "$worker" "$@" > "$tmp/${log}${rank}.txt" 2>&1 &
    pids+=($!)
  done
}

port=$((30000 + id % 1000))
start=$(date +%s)
start_ranks multi-host-grid "$port" rank 300 --scenario=all --timeout_ms=60000 \
  --bf16_rounding=per_hop
failed=()
for rank in 0 1 2 3; do
  wait "${pids[$rank]}" || failed+=("$rank (exit $?)")
done
pids=()
echo "4 ranks on 2 namespaces over TCP: finished in $(( $(date +%s) - start )) s"
if [ "${#failed[@]}" -ne 0 ]; then
  echo "multi_host_grid_test: rank(s) ${failed[*]} failed" >&2
  for rank in 0 1 2 3; do echo "--- rank $rank:"; tail -40 "$tmp/rank${rank}.txt"; done
  exit 1
fi
for rank in 0 1 2 3; do
  if ! grep -q "joined in .* ms, on one host: no" "$tmp/rank${rank}.txt"; then
    echo "multi_host_grid_test: rank $rank does not see two hosts" >&2
    cat "$tmp/rank${rank}.txt"
    exit 1
  fi
  for part in grid inflight split; do
    if ! grep -q "\] PASS ${part}:" "$tmp/rank${rank}.txt"; then
      echo "multi_host_grid_test: rank $rank exited 0 but did not print PASS ${part}" >&2
      cat "$tmp/rank${rank}.txt"
      exit 1
    fi
  done
  cat "$tmp/rank${rank}.txt"
done

# A rank dies mid-collective on the other host.
start=$(date +%s)
# The victim dies once ranks 0-2 have posted (markers in a directory both
# namespaces see), so they fail in the all-reduce, not in the barrier before it.
mkdir -p "$tmp/kill-posted"
start_ranks multi-host-kill $((port + 1)) kill 60 --scenario=kill --victim=3 --victim_posts \
  --timeout_ms=5000 --rendezvous_timeout_ms=20000 --posted_dir="$tmp/kill-posted"
codes=()
for rank in 0 1 2 3; do
  code=0
  wait "${pids[$rank]}" || code=$?
  codes+=("$code")
done
pids=()
echo "kill part: finished in $(( $(date +%s) - start )) s"
kill_failed=0
kill_fail() { echo "multi_host_grid_test (kill): $*" >&2; kill_failed=1; }
[ "${codes[3]}" -eq 137 ] || kill_fail "rank 3 exited ${codes[3]}, expected 137 (SIGKILL)"
grep -q "raising SIGKILL" "$tmp/kill3.txt" || kill_fail "rank 3 died before its kill point"
for rank in 0 1 2; do
  [ "${codes[$rank]}" -eq 3 ] || kill_fail "rank $rank exited ${codes[$rank]}, expected 3"
  line="$(grep " STATUS " "$tmp/kill${rank}.txt" | head -1)"
  echo "rank $rank: $line"
  echo "$line" | grep -Eq " STATUS (UNAVAILABLE|DEADLINE_EXCEEDED) " ||
    kill_fail "rank $rank: no UNAVAILABLE / DEADLINE_EXCEEDED status line"
  echo "$line" | grep -q "rank 3" || kill_fail "rank $rank: the error does not name rank 3"
  after_ms="$(echo "$line" | sed -n 's/.* after \([0-9]*\) ms.*/\1/p')"
  if [ -z "$after_ms" ] || [ "$after_ms" -gt 7000 ]; then
    kill_fail "rank $rank: reported after '${after_ms}' ms, expected within 5 s (+2 s)"
  fi
done
if [ "$kill_failed" -ne 0 ]; then
  for rank in 0 1 2 3; do echo "--- rank $rank:"; cat "$tmp/kill${rank}.txt"; done
  exit 1
fi
echo "PASS"
