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

# Ranks that pass different counts: every rank ends within seconds, and a rank
# that received from a disagreeing peer names both counts (before, the larger
# message was written past the smaller buffer: a heap overflow under ASan).
run mismatch allreduce
[ "$rc" -eq 1 ] || fail "mismatched allreduce ended with $rc, not 1"
[ "$elapsed" -lt 20 ] || fail "the mismatched job took ${elapsed}s"
# Both ranks see it; the first to abort may end the other before it prints.
grep -qF -e "rank 0 of group 'world': allreduce (C_FP_S): 1000 floats here but 100000 on rank 1: every rank must pass the same count" \
  -e "rank 1 of group 'world': allreduce (C_FP_S): 100000 floats here but 1000 on rank 0: every rank must pass the same count" \
  <<<"$out" || fail "no line names both counts"
echo "ok: mismatched allreduce ended after ${elapsed}s naming both counts"

run mismatch bcast
want="rank 1 of group 'world': bcast: 5000 floats here but 1000 on rank 0: every rank must pass the same count"
[ "$rc" -eq 1 ] || fail "bcast into a larger buffer ended with $rc, not 1"
[ "$elapsed" -lt 20 ] || fail "the mismatched bcast took ${elapsed}s"
grep -qF "$want" <<<"$out" || fail "missing line: $want"
echo "ok: bcast into a larger buffer failed after ${elapsed}s"

# Ranks in different collectives (another kind; one collective more on one rank,
# as ranks given different step counts): ended within seconds, naming both (before:
# a hang until the watchdog).
run mismatch kind
want="rank 1 of group 'world': bcast: 1000 floats here, but rank 0 called allreduce (C_FP_S) of 1000 floats: the ranks must call the same collectives in the same order"
[ "$rc" -eq 1 ] || fail "mismatched kinds ended with $rc, not 1"
[ "$elapsed" -lt 20 ] || fail "the mismatched kinds took ${elapsed}s"
grep -qF "$want" <<<"$out" || fail "missing line: $want"
echo "ok: allreduce against bcast ended after ${elapsed}s naming both"
run mismatch steps
want="rank 1 of group 'world': allreduce (C_FP_S): 1000 floats here, but rank 0 called barrier of 0 floats: the ranks must call the same collectives in the same order"
[ "$rc" -eq 1 ] || fail "an extra collective ended with $rc, not 1"
[ "$elapsed" -lt 20 ] || fail "the extra collective took ${elapsed}s"
grep -qF "$want" <<<"$out" || fail "missing line: $want"
echo "ok: an extra allreduce against a barrier ended after ${elapsed}s naming both"

run abort 5
[ "$rc" -eq 5 ] || fail "bp_comm_abort(5) ended the job with $rc"
echo "ok: abort ended the job with exit 5"
