#!/bin/bash
# //examples:plan_report end to end: the CSV's columns and rows, a bad
# cluster description named by its field, a model that fits nowhere.
set -u
REPORT=$1
TMP=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*"; exit 1; }

"$REPORT" --layers=2 --d_model=64 --ranks=1,2,4 --csv="$TMP/plan.csv" > "$TMP/out.txt" 2>&1 ||
  { cat "$TMP/out.txt"; fail "plan_report failed on the shipped description"; }
head -1 "$TMP/plan.csv" | grep -q '^strategy,ranks,group_size,step_s,tokens_per_s,mfu,peak_bytes,fits,goodput,' ||
  fail "CSV header: $(head -1 "$TMP/plan.csv")"
# 4 strategies at every rank count, hybrid_shard only at 4 ranks (groups of 2).
rows=$(($(wc -l < "$TMP/plan.csv") - 1))
[ "$rows" -eq 13 ] || fail "expected 13 rows, got $rows"
grep -q '^hybrid_shard,4,2,' "$TMP/plan.csv" || fail "no hybrid_shard row at 4 ranks in groups of 2"
# Every step time positive.
awk -F, 'NR > 1 && !($4 > 0) { exit 1 }' "$TMP/plan.csv" || fail "a step time is not positive"

# A recommendation with its reason at every rank count.
[ "$(grep -c '^# recommended at [124] ranks: .* Why: ' "$TMP/out.txt")" -eq 3 ] ||
  { cat "$TMP/out.txt"; fail "no recommendation with a reason per rank count"; }

# A measured noise scale: the recommendations whose global batch (8 x ranks)
# is above it say so (2 and 4 ranks), the one below does not; a negative one
# is refused.
"$REPORT" --layers=2 --d_model=64 --ranks=1,2,4 --noise_scale=12 > "$TMP/noise.txt" 2>&1 ||
  { cat "$TMP/noise.txt"; fail "plan_report --noise_scale failed"; }
[ "$(grep -c 'is above the measured gradient noise scale (12)' "$TMP/noise.txt")" -eq 2 ] ||
  { cat "$TMP/noise.txt"; fail "expected the noise-scale remark at 2 and 4 ranks only"; }
grep -q 'global batch, 16 sequences' "$TMP/noise.txt" || fail "the 2-rank global batch is not named"
"$REPORT" --layers=2 --d_model=64 --noise_scale=-1 > "$TMP/neg.txt" 2>&1 && fail "--noise_scale=-1 accepted"
grep -q -- '--noise_scale=-1: give the measured noise scale' "$TMP/neg.txt" || { cat "$TMP/neg.txt"; fail "no clear error for a negative noise scale"; }

# A preset by name, its source printed; a model flag overrides it; the plot drawn.
"$REPORT" --model=llama3-8b --seq_len=2048 --micro_batch=1 --precision=bf16 --ranks=64,128 \
    --strategies=full_shard,hybrid_shard --cluster=fsdp/plan/clusters/a100_ib200.textproto \
    --plot="$TMP/plan.png" > "$TMP/preset.txt" 2>&1 || { cat "$TMP/preset.txt"; fail "--model failed"; }
grep -q '^# plan_report: layers=32 d_model=4256 heads=32 vocab=128256 seq_len=2048 ' "$TMP/preset.txt" ||
  { head -3 "$TMP/preset.txt"; fail "the preset's dimensions (or the seq_len override) are not used"; }
grep -q '^# model llama3-8b: Dubey et al. 2024' "$TMP/preset.txt" || fail "the preset's source is not printed"
[ -s "$TMP/plan.png" ] && [ -s "$TMP/plan.png.gp" ] || fail "no plot or no script"
if "$REPORT" --model=gpt5 > "$TMP/nomodel.txt" 2>&1; then fail "an unknown preset was accepted"; fi
grep -q 'no model preset "gpt5"; presets are gpt3-175b, llama3-8b, llama3-70b, llama3-405b' "$TMP/nomodel.txt" ||
  { cat "$TMP/nomodel.txt"; fail "the unknown preset's error does not list the presets"; }

# Another framework's kernels (torchtitan's eager Llama) make the same step slower
# than this runtime's count; an unknown software is refused.
for kernels in this_runtime pytorch_eager fused; do
  "$REPORT" --model=llama3-8b --micro_batch=1 --precision=bf16 --attention=flash --ranks=64 \
      --strategies=full_shard --cluster=fsdp/plan/clusters/a100_ib200.textproto \
      --kernels=$kernels --csv="$TMP/$kernels.csv" > "$TMP/$kernels.txt" 2>&1 ||
    { cat "$TMP/$kernels.txt"; fail "--kernels=$kernels failed"; }
done
grep -q ', kernels pytorch_eager$' "$TMP/pytorch_eager.txt" || fail "the kernels are not printed"
step() { awk -F, 'NR == 2 { print $4 }' "$TMP/$1.csv"; }
awk -v own="$(step this_runtime)" -v eager="$(step pytorch_eager)" -v fused="$(step fused)" \
  'BEGIN { exit !(fused < eager && own < eager) }' ||
  fail "steps: this_runtime $(step this_runtime), pytorch_eager $(step pytorch_eager), fused $(step fused)"
if "$REPORT" --kernels=jax > "$TMP/jax.txt" 2>&1; then fail "--kernels=jax was accepted"; fi
grep -q -- '--kernels=jax: valid are this_runtime, pytorch_eager and fused' "$TMP/jax.txt" ||
  { cat "$TMP/jax.txt"; fail "no clear error for an unknown --kernels"; }

sed 's/bandwidth_bytes_per_s: 50e9/bandwidth_bytes_per_s: -50e9/' \
  fsdp/plan/clusters/h100_nvlink_ib400.textproto > "$TMP/bad.textproto"
if "$REPORT" --cluster="$TMP/bad.textproto" > "$TMP/bad.txt" 2>&1; then fail "a negative bandwidth was accepted"; fi
grep -q 'field inter_node.bandwidth_bytes_per_s is -5e+10; it must be a positive number' "$TMP/bad.txt" ||
  { cat "$TMP/bad.txt"; fail "the error does not name the field"; }

if "$REPORT" --layers=8 --d_model=8192 --heads=8 --ranks=2 --strategies=no_shard \
    --cluster=fsdp/plan/clusters/a100_ib200.textproto > "$TMP/big.txt" 2>&1; then
  fail "a model that fits nowhere was accepted"
fi
grep -q 'no configuration fits: the smallest, no_shard at 2 ranks, needs' "$TMP/big.txt" ||
  { cat "$TMP/big.txt"; fail "the error does not name the limit"; }
echo PASS
