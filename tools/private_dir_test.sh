#!/usr/bin/env bash
# Checks private_dir (tools/private_dir.sh): it creates a directory of mode
# 0700, accepts it again, and refuses a symlink, a file, a directory others
# may write to and (where the test can make one: as root) a directory that
# belongs to someone else.
#   private_dir_test.sh PRIVATE_DIR_SH
set -uo pipefail
source "$1"
base=$(mktemp -d "${TEST_TMPDIR:-/tmp}/private_dir_test.XXXXXX")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

dir="$base/cache/fsdp-fortunes"
private_dir "$dir" || fail "a new directory was refused"
[[ "$(stat -c %a "$dir")" == 700 ]] || fail "new directory has mode $(stat -c %a "$dir"), want 700"
private_dir "$dir" || fail "the directory it made was refused the second time"

expect_refused() {  # expect_refused NAME DIR WORDS
  local out
  if out=$(private_dir "$2" 2>&1); then fail "$1: accepted"; return; fi
  [[ "$out" == *"$3"* ]] || fail "$1: message '$out' lacks '$3'"
}

ln -s "$dir" "$base/link"
expect_refused symlink "$base/link" "symbolic link"
touch "$base/file"
expect_refused file "$base/file" "not a directory"
mkdir -m 0777 "$base/open" && chmod 0777 "$base/open"
expect_refused world_writable "$base/open" "chmod go-w"
mkdir -m 0770 "$base/group" && chmod 0770 "$base/group"
expect_refused group_writable "$base/group" "chmod go-w"
if [[ "$(id -u)" == 0 ]] && id nobody >/dev/null 2>&1; then
  mkdir -m 0700 "$base/theirs" && chown nobody "$base/theirs"
  expect_refused other_owner "$base/theirs" "belongs to user nobody"
else
  echo "skipped: a directory of another user (needs root to make one)"
fi

if (( failures > 0 )); then echo "$failures failure(s)"; exit 1; fi
echo PASS
