#!/usr/bin/env bash
# The rendezvous store under attack (issue 13): while a real 4-rank
# full_shard job forms and trains over loopback, store_attacker.py sends it
# a bounded number of bad clients (random bytes, a frame announcing 2 GiB, a
# garbage frame, a heartbeat before a join, another job's token) and holds
# silent connections open. The job must end with the same params sha256 as
# the same job unattacked; every bad client must be closed by the store or,
# once the job formed and the store stopped listening, refused by the kernel,
# and the store's own count (rank 0's last line) must equal the attacker's
# clients that reached it.
# Prints both runs' throughput.
set -uo pipefail
train_gpt="$1"
attacker="$2"
rounds="${3:-40}"
silent="${4:-8}"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; }
trap cleanup EXIT

free_port() {
  python3 -c 'import random,socket
for _ in range(200):
    p=random.randrange(12000,32000); s=socket.socket()
    try: s.bind(("127.0.0.1",p)); s.close(); print(p); break
    except OSError: s.close()'
}

# Long enough (steps) that the store's 5 s first-message deadline passes
# while the job runs: the default model trains at up to ~85,000 tokens/s
# here (2,048 per step), so 600 steps last at least ~15 s. (120 steps lasted
# only 3 s once the kernels got faster, and the silent clients outlived the
# job, uncounted.)
flags=(--strategy=full_shard --steps=600 --warmup_steps=1 --threads=1 --hang_timeout_s=10)

# run_job NAME PORT [GATE]: 4 ranks as real processes, torchrun-style
# environment. With GATE, ranks 1-3 start only once that file says "rounds
# done" (the attacker's, at most 90 s): the store listens only while the job
# forms, so that is when it is attacked.
run_job() {
  local name=$1 port=$2 gate=${3:-} r status=0 rank_pids=() waited=0
  for r in 0 1 2 3; do
    if [ "$r" -eq 1 ] && [ -n "$gate" ]; then
      until grep -q 'rounds done' "$gate" 2>/dev/null || [ "$waited" -ge 900 ]; do
        sleep 0.1; waited=$((waited + 1))
      done
    fi
    env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT="$port" FSDP_JOB_TOKEN="attack-test-$$-$name" \
      timeout 240 "$train_gpt" "${flags[@]}" >"$tmp/$name.$r.out" 2>"$tmp/$name.$r.err" &
    rank_pids+=($!)
    pids+=($!)
  done
  if [ -n "$gate" ]; then
    # Once the job trains, the store no longer listens: the kernel refuses.
    until grep -q '^step ' "$tmp/$name.0.out" 2>/dev/null || [ "$waited" -ge 1800 ]; do
      sleep 0.1; waited=$((waited + 1))
    done
    if python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)' \
        "$port" 2>/dev/null; then
      echo "store_attack_test: the store still listens while the job trains" >&2; status=1
    fi
  fi
  for r in 0 1 2 3; do wait "${rank_pids[$r]}" || status=1; done
  return $status
}

port=$(free_port)
if ! run_job quiet "$port"; then
  echo "store_attack_test: the unattacked job failed" >&2; cat "$tmp"/quiet.*.err; exit 1
fi

port=$(free_port)
python3 "$attacker" "$port" "$rounds" "$silent" >"$tmp/attacker.txt" 2>&1 &
attacker_pid=$!
pids+=($attacker_pid)
job_status=0
run_job attacked "$port" "$tmp/attacker.txt" || job_status=1
attacker_status=0
wait "$attacker_pid" || attacker_status=$?
cat "$tmp/attacker.txt"
if [ "$job_status" -ne 0 ]; then
  echo "store_attack_test: the attacked job failed" >&2; cat "$tmp"/attacked.*.err; exit 1
fi

quiet_digest=$(grep -o 'params sha256 [0-9a-f]*' "$tmp/quiet.0.out")
attacked_digest=$(grep -o 'params sha256 [0-9a-f]*' "$tmp/attacked.0.out")
# train_gpt's last line: "done, N steps, loss a -> b, R tok/s, ...".
quiet_rate=$(grep -o 'done, .* tok/s' "$tmp/quiet.0.out" | grep -o '[0-9]* tok/s$')
attacked_rate=$(grep -o 'done, .* tok/s' "$tmp/attacked.0.out" | grep -o '[0-9]* tok/s$')
store_line=$(grep 'rendezvous store on rank 0 (port [0-9]*): [0-9]* refused' "$tmp/attacked.0.err" | tail -n 1)
echo "unattacked: ${quiet_digest}, ${quiet_rate}"
echo "attacked:   ${attacked_digest}, ${attacked_rate}"
echo "store:      ${store_line}"
echo "refusals logged one by one: $(grep -c 'refused 127.0.0.1' "$tmp/attacked.0.err")"
if [ -z "$quiet_digest" ] || [ "$quiet_digest" != "$attacked_digest" ]; then
  echo "store_attack_test: the attack changed the job's result" >&2; exit 1
fi
if [ "$attacker_status" -ne 0 ]; then
  echo "store_attack_test: a bad client was not refused" >&2; exit 1
fi
tried=$(sed -n 's/^attacker: tried \([0-9]*\),.*/\1/p' "$tmp/attacker.txt")
# Clients the kernel refused once the store stopped listening (after the
# roster) never reached it.
at_connect=$(sed -n 's/^attacker: .*, \([0-9]*\) refused at connect,.*/\1/p' "$tmp/attacker.txt")
store_total=$(echo "$store_line" | sed -n 's/.*: \([0-9]*\) refused:.*/\1/p')
if [ -z "$tried" ] || [ -z "$at_connect" ] || [ "$((tried - at_connect))" != "${store_total:-0}" ]; then
  echo "store_attack_test: the attacker tried ${tried:-?} (${at_connect:-?} refused at connect)" \
    "but the store counted ${store_total:-none}" >&2
  cat "$tmp/attacked.0.err"; exit 1
fi
echo PASS
