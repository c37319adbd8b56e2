#!/bin/bash
# Issue 41's parity: examples/pytorch_reference/llama_parity.py, an
# independent PyTorch Llama written from docs/model.md, trains 5 AdamW steps
# from train_gpt's initial weights on train_gpt's batches and compares the
# per-step losses (1e-5 relative) and the trained weights (fp32 noise) with
# train_gpt --model=llama under no_shard and full_shard at 2 ranks. Debian's
# PyTorch (python3-torch, installed by tools/setup.sh) lives with
# /usr/bin/python3.
set -u
TRAIN_GPT=$1
TOKENIZE=$2
PARITY=$3
TMP=${TEST_TMPDIR:-$(mktemp -d)}
PYTHON=/usr/bin/python3
fail() { echo "FAIL: $*"; exit 1; }

"$PYTHON" -c "import torch" > "$TMP/torch.txt" 2>&1 ||
  { cat "$TMP/torch.txt"; fail "no PyTorch for $PYTHON: run tools/setup.sh (it installs python3-torch)"; }
"$TOKENIZE" --input=/usr/share/games/fortunes --vocab=300 --out="$TMP/fortunes" > "$TMP/tokenize.txt" 2>&1 ||
  { cat "$TMP/tokenize.txt"; fail "tokenize failed (tools/setup.sh installs the fortunes corpus)"; }
"$PYTHON" "$PARITY" --train_gpt="$TRAIN_GPT" --data="$TMP/fortunes_train.bin" --vocab=300 \
    --workdir="$TMP/parity" > "$TMP/parity.txt" 2>&1
status=$?
cat "$TMP/parity.txt"
[ "$status" -eq 0 ] || fail "llama_parity.py exited with $status"
# Both strategies, every step and the weights, checked and passed.
[ "$(grep -c '^no_shard step [1-5]: .* ok$' "$TMP/parity.txt")" -eq 5 ] || fail "no_shard steps"
[ "$(grep -c '^full_shard step [1-5]: .* ok$' "$TMP/parity.txt")" -eq 5 ] || fail "full_shard steps"
[ "$(grep -c 'trained weights, largest difference .* ok$' "$TMP/parity.txt")" -eq 2 ] || fail "weights"
tail -1 "$TMP/parity.txt" | grep -qx PASS || fail "no PASS line"
echo "PASS"
