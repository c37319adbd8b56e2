#!/usr/bin/env bash
# The batch-size report on the GPT of the fortunes quick start's size (the
# quick start itself now trains a Llama of that size): tokenizes the
# corpus once into the quick start's private directory (as
# tools/train_fortunes.sh does), then runs //examples:batch_report at global
# batches 4..64, scaled and fixed learning rate, 2.4M tokens each (about two
# epochs) with 30 validations per run.
#
#   tools/batch_report.sh                       # the defaults
#   tools/batch_report.sh --batches=8,16,32     # any batch_report flag
#
# The report goes to $FSDP_EXAMPLE_DIR/batch_report (default
# ~/.cache/fsdp-fortunes/batch_report). Took 16.5 min on a quiet 2-core
# Intel Xeon (docs/batch-size.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/private_dir.sh
out=${FSDP_EXAMPLE_DIR:-${XDG_CACHE_HOME:-${HOME:?set HOME or FSDP_EXAMPLE_DIR}/.cache}/fsdp-fortunes}
private_dir "$out"
if [[ ! -f "$out/fortunes_train.bin" ]]; then
  bazel run -c opt //examples:tokenize -- --input=/usr/share/games/fortunes \
      --out="$out/fortunes" --vocab=512
fi
bazel build -c opt //examples:batch_report
exec bazel-bin/examples/batch_report --out_dir="$out/batch_report" --tokens=2400000 \
    --val_points=30 "$@" -- \
    --data="$out/fortunes_train.bin" --val_data="$out/fortunes_val.bin" --vocab=512 \
    --layers=4 --d_model=128 --heads=4 --min_lr=3e-4
