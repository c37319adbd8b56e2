# Sourced by scripts that keep a user's files in a directory of their own
# (tools/train_fortunes.sh). Defines:
#   private_dir DIR   creates DIR (mode 0700, parents as needed) or accepts
#                     an existing one only if it is a real directory (not a
#                     symlink) owned by this user that no one else may write
#                     to; otherwise prints why and what to do, and returns 1.
# A fixed name in a shared directory such as /tmp can be created first by
# anyone, who then owns the data, tokenizer and outputs found there (issue
# #39); `mkdir -p` alone accepts such a directory.

private_dir() {
  local dir=$1
  if [[ ! -e "$dir" && ! -L "$dir" ]]; then
    mkdir -p -- "$(dirname -- "$dir")" || return 1
    # Fails if someone else created it in between; the checks below then run.
    mkdir -m 0700 -- "$dir" 2>/dev/null
  fi
  if [[ -L "$dir" ]]; then
    echo "private_dir: $dir is a symbolic link; remove it or choose another directory" >&2
    return 1
  fi
  if [[ ! -d "$dir" ]]; then
    echo "private_dir: $dir exists and is not a directory; remove it or choose another" >&2
    return 1
  fi
  local owner mode
  owner=$(stat -c %u -- "$dir") || return 1
  mode=$(stat -c %a -- "$dir") || return 1
  if [[ "$owner" != "$(id -u)" ]]; then
    echo "private_dir: $dir belongs to user $(stat -c %U -- "$dir"), not to you;" \
         "choose a directory of your own" >&2
    return 1
  fi
  # Group or others may write (and so replace files): 0o020 or 0o002 set.
  if (( (8#$mode & 8#022) != 0 )); then
    echo "private_dir: $dir (mode $mode) may be written by others;" \
         "run chmod go-w '$dir' or choose another directory" >&2
    return 1
  fi
}
