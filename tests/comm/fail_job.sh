#!/usr/bin/env bash
# Jobs that must fail, and how (see fail_job.c), on 2 ranks:
# - the watchdog ends a hung job within seconds (not after the 30 s that rank 1
#   sleeps), with exactly one line naming rank, group and operation;
# - bp_comm_abort ends the job with the code it was given.
set -u
exe=$1
fail() { echo "FAIL: $*"; echo "--- output (exit $rc, ${elapsed}s):"; echo "$out"; exit 1; }
run() {
  local start
  start=$(date +%s)
  out=$($BP_MPIEXEC $BP_MPIEXEC_FLAGS -np 2 "$exe" "$@" 2>&1)
  rc=$?
  elapsed=$(($(date +%s) - start))
}

run hang 1
want="bagpipe: watchdog: rank 0 of group 'dp' (world rank 0): allreduce (C_FP_S) of 4099 floats has not finished after 1.0 s waiting for world rank 1; aborting the job"
[ "$rc" -ne 0 ] || fail "the hung job succeeded"
[ "$rc" -ne 3 ] || fail "the watchdog did not fire"
[ "$elapsed" -lt 15 ] || fail "the hung job took ${elapsed}s"
[ "$(grep -c '^bagpipe: watchdog:' <<<"$out")" -eq 1 ] || fail "not exactly one watchdog line"
grep -qxF "$want" <<<"$out" || fail "missing line: $want"
echo "ok: watchdog fired after ${elapsed}s with exit $rc"

run abort 5
[ "$rc" -eq 5 ] || fail "bp_comm_abort(5) ended the job with $rc"
echo "ok: abort ended the job with exit 5"
