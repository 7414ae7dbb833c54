#!/usr/bin/env bash
# A Python job whose rank 1 hangs, or dies, ends within the watchdog's bound, as
# the CLI's does: the hung one with exactly one watchdog line naming the bucket's
# group and the rank waited for, well before the 120 s that rank 1 sleeps end
# (the bound of 60 s includes starting Python and torch on a loaded machine).
# One whose rank 1 raises an exception nobody catches ends at once, with its
# traceback, not through the watchdog.
set -u
here=$(dirname "$0")
fail() { echo "FAIL: $*"; echo "--- output (exit $rc, ${elapsed}s):"; echo "$out"; exit 1; }
run() {
  local start
  start=$(date +%s)
  out=$($BP_MPIEXEC $BP_MPIEXEC_FLAGS -np 2 "$BP_PYTHON" "$here/faults.py" "$@" 2>&1)
  rc=$?
  elapsed=$(($(date +%s) - start))
}
"$BP_PYTHON" -c "import torch" 2>/dev/null || {
  echo "skipped: no torch for $BP_PYTHON"; exit 77; }

run hang
[ "$rc" -ne 0 ] || fail "the hung job succeeded"
[ "$elapsed" -lt 60 ] || fail "the hung job took ${elapsed}s"
[ "$(grep -c '^bagpipe: watchdog:' <<<"$out")" -eq 1 ] || fail "not exactly one watchdog line"
grep -qE "^bagpipe: watchdog: rank 0 of group 'ddp-hook' \(world rank 0\): allreduce_lp \(C_LP_S\) of [0-9]+ floats has not finished after 5.0 s waiting for world rank 1; aborting the job$" <<<"$out" \
  || fail "no watchdog line for the hook's bucket"
grep -q "Traceback\|Segmentation" <<<"$out" && fail "the interpreter crashed"
echo "ok: hung rank: the watchdog ended the job after ${elapsed}s with exit $rc"

run raise
[ "$rc" -ne 0 ] || fail "the job with a raising rank succeeded"
[ "$elapsed" -lt 30 ] || fail "the job with a raising rank took ${elapsed}s (the watchdog's 60 s ended it?)"
grep -q "^RuntimeError: rank 1 fails on purpose$" <<<"$out" || fail "no traceback of the exception"
grep -q "watchdog" <<<"$out" && fail "the watchdog ended the job, not the exception"
echo "ok: raising rank: the job ended after ${elapsed}s with exit $rc"

run die
[ "$rc" -ne 0 ] || fail "the job with a dead rank succeeded"
[ "$elapsed" -lt 60 ] || fail "the job with a dead rank took ${elapsed}s"
grep -q "Segmentation" <<<"$out" && fail "the interpreter crashed"
echo "ok: dead rank: the job ended after ${elapsed}s with exit $rc"
