#!/usr/bin/env bash
# The watchdog ends a hung job: 2 ranks, rank 1 never joins rank 0's allreduce in
# group "dp"; with a 1 s timeout the job must fail within seconds (not after the
# 30 s rank 1 sleeps), print exactly one watchdog line naming rank, group and
# operation, and not exit with 3 (the code of "the watchdog did not fire").
set -u
exe=$1
start=$(date +%s)
out=$($BP_MPIEXEC $BP_MPIEXEC_FLAGS -np 2 "$exe" 1 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
want="bagpipe: watchdog: rank 0 of group 'dp' (world rank 0): allreduce (C_FP_S) of 4099 floats has not finished after 1.0 s; aborting the job"
fail() { echo "FAIL: $*"; echo "--- output (exit $rc, ${elapsed}s):"; echo "$out"; exit 1; }
[ "$rc" -ne 0 ] || fail "the job succeeded"
[ "$rc" -ne 3 ] || fail "the watchdog did not fire"
[ "$elapsed" -lt 15 ] || fail "the job took ${elapsed}s"
[ "$(grep -c '^bagpipe: watchdog:' <<<"$out")" -eq 1 ] || fail "not exactly one watchdog line"
grep -qxF "$want" <<<"$out" || fail "missing line: $want"
echo "ok: watchdog fired after ${elapsed}s with exit $rc"
