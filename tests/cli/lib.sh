# Helpers for the CLI tests (tests/lib.sh has the shared ones): run bagpipe, check
# its exit code and that it printed exactly one error line naming the problem.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# A small gpt that trains in well under a second per step.
TINY=(--layers 1 --embd 16 --heads 2 --seq-len 16 --batch 4 --eval-batches 2 --progress none)

# expect CODE PATTERN -- command...: exit code CODE, one stderr line matching PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 3
  local rc=0
  "$@" >"$WORK/stdout" 2>"$WORK/stderr" || rc=$?
  [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, expected $code; stderr: $(cat "$WORK/stderr")"
  local lines
  lines=$(wc -l <"$WORK/stderr")
  [ "$lines" -eq 1 ] || fail "'$*' printed $lines lines on stderr, expected 1: $(cat "$WORK/stderr")"
  grep -qE -- "$pattern" "$WORK/stderr" || fail "'$*' said '$(cat "$WORK/stderr")', expected /$pattern/"
}

# No temporary or partial file anywhere under a directory.
no_partial_files() {
  if find "$1" -name '*.tmp.*' | grep -q .; then fail "partial files left in $1"; fi
}
