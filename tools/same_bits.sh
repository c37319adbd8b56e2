#!/bin/bash
# Runs two train_gpt binaries over the same small configurations and compares
# the parameters' SHA-256 each prints at the end ("params sha256 ..."): a
# refactor that claims the same bits shows it here, configuration by
# configuration. Exit status 1 if any digest differs or a run fails.
#
#   tools/same_bits.sh OLD_TRAIN_GPT NEW_TRAIN_GPT [extra flags...]
#
# Small on purpose (a shared machine): a 2-layer GPT, 6 steps, one compute
# thread per rank. The rank counts cover the communicator's three
# reduce-scatter algorithms on one host: latency (small units), direct (up to
# 4 ranks) and ring (5).
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 OLD_TRAIN_GPT NEW_TRAIN_GPT [extra train_gpt flags]" >&2
  exit 2
fi
old=$1
new=$2
shift 2
base=(--layers=2 --d_model=64 --heads=4 --vocab=256 --seq_len=32 --micro_batch=2
      --matmul_backend=onednn --steps=6 --threads=1 "$@")

configs=(
  "--nproc=1 --precision=bf16"
  "--nproc=2 --precision=bf16 --strategy=full_shard"
  "--nproc=2 --precision=bf16 --strategy=no_shard"
  "--nproc=2 --precision=bf16 --strategy=shard_optimizer"
  "--nproc=2 --precision=bf16 --strategy=full_shard --activation_checkpointing=all"
  "--nproc=2 --precision=bf16 --strategy=no_shard --activation_checkpointing=every:2"
  "--nproc=2 --precision=bf16 --strategy=full_shard --seq_len=100"
  "--nproc=3 --precision=bf16 --strategy=full_shard --seq_len=100 --micro_batch=1"
  "--nproc=3 --precision=bf16 --strategy=no_shard --seq_len=100 --micro_batch=1"
  "--nproc=2 --precision=bf16 --strategy=full_shard --attention=flash"
  "--nproc=4 --precision=bf16 --strategy=hybrid_shard --group_size=2"
  "--nproc=4 --precision=bf16 --strategy=full_shard"
  "--nproc=5 --precision=bf16 --strategy=full_shard --micro_batch=1"
  "--nproc=5 --precision=bf16 --strategy=no_shard --micro_batch=1 --accum=2"
  "--nproc=2 --precision=bf16 --strategy=shard_grad_op --accum=2"
  "--nproc=2 --precision=bf16 --strategy=no_shard --accum=2"
  "--nproc=2 --precision=bf16 --strategy=full_shard --accum=2"
  "--nproc=1 --precision=bf16 --reduce_dtype=fp32"
  "--nproc=2 --precision=bf16 --reduce_dtype=fp32 --strategy=no_shard"
  "--nproc=2 --precision=bf16 --reduce_dtype=fp32 --strategy=shard_optimizer"
  "--nproc=2 --precision=bf16 --reduce_dtype=fp32 --strategy=full_shard"
  "--nproc=4 --precision=bf16 --reduce_dtype=fp32 --strategy=hybrid_shard --group_size=2"
  "--nproc=1 --precision=fp32"
  "--nproc=2 --precision=fp32 --strategy=no_shard"
  "--nproc=2 --precision=fp32 --strategy=shard_optimizer"
  "--nproc=2 --precision=fp32 --strategy=shard_grad_op"
  "--nproc=2 --precision=fp32 --strategy=full_shard"
  "--nproc=2 --precision=fp32 --strategy=hybrid_shard --group_size=1"
  "--nproc=2 --precision=fp32 --strategy=full_shard --accum=2 --attention=flash"
  "--nproc=4 --precision=fp32 --strategy=hybrid_shard --group_size=2"
  "--nproc=3 --precision=fp32 --strategy=shard_grad_op --seq_len=100 --micro_batch=1"
)

digest() {  # binary, flags...: the params sha256, or FAILED
  local bin=$1
  shift
  local out
  out=$("$bin" "$@" 2>&1)
  local d
  d=$(printf '%s\n' "$out" | grep -o 'params sha256 [0-9a-f]*' | tail -1 | awk '{print $3}')
  if [ -z "$d" ]; then
    echo FAILED
    printf '%s\n' "$out" | tail -5 >&2
  else
    echo "$d"
  fi
}

status=0
for c in "${configs[@]}"; do
  read -r -a flags <<<"$c"
  a=$(digest "$old" "${base[@]}" "${flags[@]}")
  b=$(digest "$new" "${base[@]}" "${flags[@]}")
  if [ "$a" = "$b" ] && [ "$a" != FAILED ]; then
    echo "same      ${a:0:16}  $c"
  else
    echo "DIFFERENT old=${a:0:16} new=${b:0:16}  $c"
    status=1
  fi
done
exit $status
