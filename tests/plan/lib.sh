# shellcheck shell=bash disable=SC2034
# Helpers for the plan tests: a small gpt, and the check of an option plan refuses.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
TINY=(--layers 2 --embd 32 --heads 2 --seq-len 16 --batch 8 --steps 20)

# bad PATTERN plan-options...: exit 2, one line matching PATTERN, no JSON written.
bad() {
  local pattern=$1 rc=0
  shift
  "$BP" plan "$@" --json "$WORK/bad.json" >"$WORK/out" 2>"$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "plan $* exited $rc, not 2: $(cat "$WORK/err")"
  [ "$(grep -c '^bagpipe' "$WORK/err")" -eq 1 ] || fail "plan $*: not one line: $(cat "$WORK/err")"
  grep -qE -- "$pattern" "$WORK/err" || fail "plan $*: '$(cat "$WORK/err")' does not match '$pattern'"
  [ ! -e "$WORK/bad.json" ] || fail "plan $*: wrote a JSON"
}
