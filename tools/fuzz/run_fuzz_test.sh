#!/usr/bin/env bash
# Runs a libFuzzer binary as a test (the sh_test of cc_fuzz_test in
# tools/fuzz/fuzz.bzl):
#   run_fuzz_test.sh --fuzzer=BIN --max_total_time=SECONDS [--dict=FILE] [SEED...]
# The seeds are copied into a writable corpus directory (libFuzzer adds the
# inputs it finds there), run first, then BIN fuzzes for SECONDS. Exit 0 if
# nothing crashed. Otherwise exit 1 and print, for each input that crashed,
# leaked, timed out or ran out of memory: where the file is, where Bazel keeps
# it after the test, its bytes in base64 (for crashes found on CI machines one
# cannot log in to), and the command that replays it.
set -uo pipefail

fuzzer=""
max_total_time=""
dict=""
seeds=()
for arg in "$@"; do
  case "$arg" in
    --fuzzer=*) fuzzer=${arg#--fuzzer=} ;;
    --max_total_time=*) max_total_time=${arg#--max_total_time=} ;;
    --dict=*) dict=${arg#--dict=} ;;
    --*) echo "run_fuzz_test: unknown flag $arg" >&2; exit 2 ;;
    *) seeds+=("$arg") ;;
  esac
done
if [[ -z "$fuzzer" || ! -x "$fuzzer" ]]; then
  echo "run_fuzz_test: --fuzzer=BIN must name an executable (got '$fuzzer')" >&2
  exit 2
fi
if ! [[ "$max_total_time" =~ ^[0-9]+$ ]]; then
  echo "run_fuzz_test: --max_total_time must be a whole number of seconds" >&2
  exit 2
fi

tmp=${TEST_TMPDIR:-$(mktemp -d)}
corpus="$tmp/corpus"
mkdir -p "$corpus"
for seed in "${seeds[@]+"${seeds[@]}"}"; do
  cp "$seed" "$corpus/"
done
# Bazel keeps TEST_UNDECLARED_OUTPUTS_DIR after the test (zipped into
# bazel-testlogs/<package>/<target>/test.outputs/outputs.zip).
artifacts=${TEST_UNDECLARED_OUTPUTS_DIR:-$tmp/artifacts}
mkdir -p "$artifacts"

flags=(
  -max_total_time="$max_total_time"
  -timeout=10                 # one input running 10 s is a hang: report it
  -rss_limit_mb=2048
  -artifact_prefix="$artifacts/"
  -print_final_stats=1
)
[[ -n "$dict" ]] && flags+=(-dict="$dict")

echo "run_fuzz_test: $fuzzer ${flags[*]} $corpus (${#seeds[@]} seeds)"
start=$SECONDS
"$fuzzer" "${flags[@]}" "$corpus"
rc=$?
echo "run_fuzz_test: fuzzer exited with $rc after $((SECONDS - start)) s; corpus now $(ls "$corpus" | wc -l) inputs"

shopt -s nullglob
found=("$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-* \
       "$artifacts"/slow-unit-*)
shopt -u nullglob
reproducers=()
for f in "${found[@]+"${found[@]}"}"; do
  [[ "$(basename "$f")" == slow-unit-* ]] || reproducers+=("$f")
done

if [[ $rc -eq 0 && ${#reproducers[@]} -eq 0 ]]; then
  echo "run_fuzz_test: PASS"
  exit 0
fi

target=${TEST_TARGET:-//<package>:<fuzz test>}
target_path=$(echo "${target#//}" | tr ':' '/')   # //a/b:c -> a/b/c
echo
echo "run_fuzz_test: FAIL (fuzzer exit code $rc)"
for f in "${reproducers[@]+"${reproducers[@]}"}"; do
  name=$(basename "$f")
  echo "run_fuzz_test: reproducer: $f"
  echo "run_fuzz_test:   kept by Bazel as $name in bazel-testlogs/$target_path/test.outputs/outputs.zip"
  echo "run_fuzz_test:   base64: $(base64 -w0 "$f")"
  echo "run_fuzz_test:   replay: echo '$(base64 -w0 "$f")' | base64 -d > /tmp/$name &&" \
       "bazel build ${target}_bin && bazel-bin/${target_path}_bin /tmp/$name"
done
if [[ ${#reproducers[@]} -eq 0 ]]; then
  echo "run_fuzz_test: the fuzzer failed without saving an input (see its output above)"
fi
exit 1
