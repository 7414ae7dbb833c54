#!/usr/bin/env bash
# Jobs that must fail, and how (see fail_job.c), on 2 ranks:
# - the watchdog ends a hung job within seconds (not after the 30 s that rank 1
#   sleeps), with exactly one line naming rank, group and operation;
# - ranks that disagree on a collective's count end within seconds, naming both;
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

# mismatched OP LINE...: `fail_job mismatch OP` ends with exit 1 within seconds and
# prints one of the LINEs (each rank that sees the mismatch prints its own; the first
# to abort may end the others before they print).
mismatched() {
  local op=$1 lines=()
  shift
  for l in "$@"; do lines+=(-e "$l"); done
  run mismatch "$op"
  [ "$rc" -eq 1 ] || fail "mismatch $op ended with $rc, not 1"
  [ "$elapsed" -lt 20 ] || fail "mismatch $op took ${elapsed}s"
  grep -qF "${lines[@]}" <<<"$out" || fail "mismatch $op: no line names both"
  echo "ok: mismatch $op ended after ${elapsed}s naming both"
}
same="every rank must pass the same count"
order="the ranks must call the same collectives in the same order"
# Ranks that pass different counts (before: the larger message was written past the
# smaller buffer, a heap overflow under ASan), a bcast into a larger buffer (before:
# filled in part, returned normally), ranks in different collectives: another kind,
# or one collective more on one rank, as ranks given different step counts (before:
# a hang until the watchdog).
mismatched allreduce \
  "rank 0 of group 'world': allreduce (C_FP_S): 1000 floats here but 100000 on rank 1: $same" \
  "rank 1 of group 'world': allreduce (C_FP_S): 100000 floats here but 1000 on rank 0: $same"
mismatched bcast "rank 1 of group 'world': bcast: 5000 floats here but 1000 on rank 0: $same"
mismatched kind \
  "rank 1 of group 'world': bcast: 1000 floats here, but rank 0 called allreduce (C_FP_S) of 1000 floats: $order"
mismatched steps \
  "rank 1 of group 'world': allreduce (C_FP_S): 1000 floats here, but rank 0 called barrier of 0 floats: $order"

run abort 5
[ "$rc" -eq 5 ] || fail "bp_comm_abort(5) ended the job with $rc"
echo "ok: abort ended the job with exit 5"
