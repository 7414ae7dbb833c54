#!/usr/bin/env bash
# A NaN on one rank stops every rank with a line naming the step and the tensor,
# or, with --skip-nonfinite, drops that step on every rank and trains on. With
# async the averaging thread must be released on that path too (it used to hang).
source "$(dirname "$0")/lib.sh"

opts=("${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 12 --fault-nan-rank 1 --fault-at-step 6)
for algo in allreduce bytegrad decentralized async; do
  run_np 2 60 "${opts[@]}" --dp-algo "$algo" --out "$WORK/nan-$algo"
  [ "$rc" -eq 1 ] || fail "$algo: exit $rc after a NaN, expected 1: $(cat "$WORK/out")"
  grep -qE "rank 1, step 6: non-finite gradient of tensor [a-z_.0-9]+ \(--skip-nonfinite" "$WORK/out" \
    || fail "$algo: no line naming step and tensor: $(cat "$WORK/out")"
  [ "$(grep -c 'error' "$WORK/out")" -eq 1 ] || fail "$algo: expected one error line: $(cat "$WORK/out")"
  ! grep -q "MPI_ABORT" "$WORK/out" || fail "$algo: ranks stopped together, no abort expected"

  run_np 2 60 "${opts[@]}" --dp-algo "$algo" --skip-nonfinite --out "$WORK/skip-$algo"
  [ "$rc" -eq 0 ] || fail "$algo: --skip-nonfinite run failed: $(cat "$WORK/out")"
  grep -q '"step":6,"loss":null' "$WORK/skip-$algo/metrics.jsonl" || fail "$algo: step 6 not logged as skipped"
  losses "$WORK/skip-$algo/metrics.jsonl" | awk '$1 > 6 && $2 == "null" { exit 1 }' || fail "$algo: NaN after the skip"
  grep -q "^done: 12 steps (1 skipped: a non-finite loss or gradient)" "$WORK/out" ||
    fail "$algo: the done line does not count the skipped step: $(grep '^done' "$WORK/out")"
done
# async agrees every --async-agree-every steps: a NaN of step 6 is reported at step 8,
# naming step 6 and its rank, after step 7 ran and was logged (its loss not finite).
run_np 2 60 "${opts[@]}" --dp-algo async --async-agree-every 4 --log-every 1 --out "$WORK/async-agree"
[ "$rc" -eq 1 ] || fail "async, agreeing every 4 steps: exit $rc after a NaN: $(cat "$WORK/out")"
grep -qE "rank 1, step 6: non-finite gradient of tensor" "$WORK/out" ||
  fail "async, agreeing every 4 steps: no line naming step 6: $(cat "$WORK/out")"
[ "$(losses "$WORK/async-agree/metrics.jsonl" | tail -n 1)" = "7 null" ] ||
  fail "async, agreeing every 4 steps: expected step 7 logged last, got: $(losses "$WORK/async-agree/metrics.jsonl")"

# Every step skipped: said on the done line (before: "done: 1 steps" and no count).
run_np 2 60 "${opts[@]}" --dp-algo bytegrad --skip-nonfinite --steps 1 --fault-at-step 1 --out "$WORK/all"
[ "$rc" -eq 0 ] || fail "every step skipped: exit $rc: $(cat "$WORK/out")"
grep -q "^done: 1 steps (all skipped: a non-finite loss or gradient; nothing was trained)" "$WORK/out" ||
  fail "every step skipped: $(grep '^done' "$WORK/out")"

# decentralized's exchange starts on the communication thread when the step starts.
# A stop at the step's end used to let a rank whose thread had not taken the exchange
# up yet quit, while its peer waited in the exchange for ever: on busy cores about one
# run in three hung. Eight runs beside two busy loops.
busy=()
trap 'kill "${busy[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in 1 2; do (while :; do :; done) & busy+=($!); done
for i in 1 2 3 4 5 6 7 8; do
  run_np 2 30 "${opts[@]}" --dp-algo decentralized --out "$WORK/busy-$i"
  [ "$rc" -eq 1 ] || fail "decentralized on busy cores, run $i: exit $rc"
done
kill "${busy[@]}"
busy=()

# Weights that became non-finite (a step that diverged, the following ones skipped)
# are never saved: the run fails naming the tensor, and no checkpoint is written.
run_np 1 30 "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 20 --skip-nonfinite \
  --checkpoint-every 4 --fault-nan-weights-rank 0 --fault-at-step 6 --out "$WORK/diverged"
[ "$rc" -eq 1 ] || fail "diverged weights: exit $rc, expected 1: $(cat "$WORK/out")"
grep -qE "error: step [0-9]+: weights of tensor [a-z_.0-9]+ are not finite; not saved" "$WORK/out" ||
  fail "diverged weights: no line naming the tensor: $(cat "$WORK/out")"
bad=$(sed -nE 's/.*error: step ([0-9]+): weights.*/\1/p' "$WORK/out")
[ "$bad" = 8 ] || fail "diverged weights: failed at step '$bad', expected the save of step 8"
[ ! -e "$WORK/diverged/ckpt-00000008" ] || fail "diverged weights of step 8 were saved"
[ "$(cat "$WORK/diverged/latest")" = ckpt-00000004 ] || fail "latest is not the last good checkpoint"

# One process, async: the stop path releases the averaging thread's lock.
run_np 1 30 "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 10 --dp-algo async \
  --fault-nan-rank 0 --fault-at-step 3 --out "$WORK/async1"
[ "$rc" -eq 1 ] || fail "async on 1 rank: exit $rc after a NaN, expected 1: $(cat "$WORK/out")"
grep -q "rank 0, step 3: non-finite gradient" "$WORK/out" || fail "async on 1 rank: $(cat "$WORK/out")"
echo "ok"
