#!/usr/bin/env bash
# The main example end to end: installs what is missing (tools/setup.sh),
# tokenizes the fortunes corpus once (//examples:tokenize: byte-level BPE,
# vocabulary 512, 10% held out), then trains a small Llama (grouped-query
# attention: 4 query heads, 2 key/value heads) with full_shard on 2 ranks, printing training and validation loss and samples as it goes,
# and ends with the summary, a sample, a plot of the curves, the saved
# model and the command that samples from it.
#
#   tools/train_fortunes.sh                      # the README's first command
#   tools/train_fortunes.sh --model=gpt          # the same run with the GPT-2-style model
#   tools/train_fortunes.sh --steps=2000 --d_model=192   # any train_gpt flag overrides
#
# Output goes to $FSDP_EXAMPLE_DIR (default ~/.cache/fsdp-fortunes, under
# $XDG_CACHE_HOME if set): the token files and tokenizer, and per model
# family (gpt/, llama/) the last run's metrics.jsonl, curves.png
# (+ curves.png.gp), checkpoints/ (sharded, after the last step) and
# model.safetensors (+ config.json for a Llama). The directories are
# private (created mode 0700; one that is a symlink, belongs to someone
# else or that others may write to is refused: tools/private_dir.sh), so no
# other user can plant the data or tokenizer this script would reuse.
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
# The run's outputs go beside the data, one directory per model family.
# The Llama is the default: on this corpus it reached the GPT's final
# validation loss in about half the GPT's time (docs/train_gpt.md, "The
# quick-start run").
model=llama
for arg in "$@"; do
  case "$arg" in --model=*) model=${arg#--model=} ;; esac
done
if [[ ! "$model" =~ ^[a-z0-9_]+$ ]]; then
  echo "train_fortunes.sh: --model=$model is not a model family name (gpt, llama)" >&2
  exit 2
fi
run="$out/$model"
private_dir "$run"
family_flags=()
[[ "$model" == llama ]] && family_flags=(--kv_heads=2)
# The model (docs/train_gpt.md, "The quick-start run"): 4 blocks of width
# 128, 1.1 M parameters (the GPT 0.9 M), 128-token context, 16 sequences
# per step.
bazel run -c opt //examples:train_gpt -- \
    --nproc=2 --strategy=full_shard --model="$model" "${family_flags[@]}" \
    --data="$out/fortunes_train.bin" --val_data="$out/fortunes_val.bin" \
    --tokenizer="$out/fortunes.tokenizer" --vocab=512 \
    --layers=4 --d_model=128 --heads=4 --seq_len=128 --micro_batch=8 \
    --steps=1200 --warmup_steps=20 --lr=3e-3 --min_lr=3e-4 \
    --val_every=150 --val_batches=8 \
    --sample_every=300 --sample_tokens=160 \
    --metrics_out="$run/metrics.jsonl" --plot="$run/curves.png" \
    --checkpoint_dir="$run/checkpoints" --export="$run/model.safetensors" \
    "$@"
echo
echo "Saved: $run/model.safetensors and $run/checkpoints. Sample more text from it with"
printf '  bazel run -c opt //examples:generate -- --safetensors=%q --tokenizer=%q --prompt=%q\n' \
    "$run/model.safetensors" "$out/fortunes.tokenizer" "The meaning of life"
