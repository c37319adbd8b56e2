#!/usr/bin/env bash
# The main example end to end: installs what is missing (tools/setup.sh),
# tokenizes the fortunes corpus once (//examples:tokenize: byte-level BPE,
# vocabulary 512, 10% held out), then trains a small GPT with full_shard on
# 2 ranks, printing training and validation loss and samples as it goes,
# and ends with the summary, a sample and a plot of the curves.
#
#   tools/train_fortunes.sh                      # the README's first command
#   tools/train_fortunes.sh --steps=2000 --d_model=192   # any train_gpt flag overrides
#
# Output goes to $FSDP_EXAMPLE_DIR (default ~/.cache/fsdp-fortunes, under
# $XDG_CACHE_HOME if set): the token files and tokenizer, metrics.jsonl,
# curves.png (+ curves.png.gp). The directory is private (created mode 0700;
# one that is a symlink, belongs to someone else or that others may write to
# is refused: tools/private_dir.sh), so no other user can plant the data or
# tokenizer this script would reuse.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/private_dir.sh

out=${FSDP_EXAMPLE_DIR:-${XDG_CACHE_HOME:-${HOME:?set HOME or FSDP_EXAMPLE_DIR}/.cache}/fsdp-fortunes}
private_dir "$out"
tools/setup.sh
if [ ! -f "$out/fortunes_train.bin" ] || [ ! -f "$out/fortunes_val.bin" ] ||
   [ ! -f "$out/fortunes.tokenizer" ]; then
  bazel run -c opt //examples:tokenize -- --input=/usr/share/games/fortunes \
      --out="$out/fortunes" --vocab=512
fi
# The model (docs/train_gpt.md, "The quick-start run"): 4 blocks of width
# 128, 0.9 M parameters, 128-token context, 16 sequences per step.
exec bazel run -c opt //examples:train_gpt -- \
    --nproc=2 --strategy=full_shard \
    --data="$out/fortunes_train.bin" --val_data="$out/fortunes_val.bin" \
    --tokenizer="$out/fortunes.tokenizer" --vocab=512 \
    --layers=4 --d_model=128 --heads=4 --seq_len=128 --micro_batch=8 \
    --steps=1200 --warmup_steps=20 --lr=3e-3 --min_lr=3e-4 \
    --val_every=150 --val_batches=8 \
    --sample_every=300 --sample_tokens=160 \
    --metrics_out="$out/metrics.jsonl" --plot="$out/curves.png" \
    "$@"
