#!/usr/bin/env bash
# SIGTERM to any one rank: every rank stops after the same step, a checkpoint of
# that step is written, the ranks exit with code 3, and --resume continues with the
# losses an uninterrupted run has.
source "$(dirname "$0")/lib.sh"

opts=("${TINY[@]}" --data "$TEXT" --eval-every 0 --log-every 1)
for n in 2 4; do
  out="$WORK/sig$n"
  # shellcheck disable=SC2086
  timeout -k 5 60 $BP_MPIEXEC $BP_MPIEXEC_FLAGS -n "$n" "$BP" train "${opts[@]}" --steps 100000000 \
    --out "$out" >"$WORK/out" 2>&1 &
  launcher=$!
  term_rank "$out"
  rc=0
  wait "$launcher" || rc=$?
  [ "$rc" -eq 3 ] || fail "exit code $rc after SIGTERM, expected 3: $(cat "$WORK/out")"
  grep -q "stopped by a signal after step" "$WORK/out" || fail "no stop message"
  step=$(sed -E 's/ckpt-0*//' "$out/latest")
  [ "$(losses "$out/metrics.jsonl" | tail -n 1 | cut -d' ' -f1)" = "$step" ] || fail "checkpoint is not at the last step"
  # Resume for 5 more steps and compare with an uninterrupted run to the same step.
  total=$((step + 5))
  run_np "$n" 60 "${opts[@]}" --steps "$total" --resume "$out" --out "$WORK/res$n"
  [ "$rc" -eq 0 ] || fail "resume failed: $(cat "$WORK/out")"
  run_np "$n" 60 "${opts[@]}" --steps "$total" --out "$WORK/full$n"
  diff <(losses "$WORK/full$n/metrics.jsonl" | tail -n 5) <(losses "$WORK/res$n/metrics.jsonl") \
    || fail "resumed losses differ from the uninterrupted run"
done

# A SIGTERM that comes before the handlers exist (here: pending, blocked, across
# the exec, as a launcher may start us) stops the run after its first step like
# any other (before: exit 143 with no checkpoint, or never acted on when blocked).
rc=0
timeout -k 5 60 python3 -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
os.kill(os.getpid(), signal.SIGTERM)
os.execv(sys.argv[1], sys.argv[1:])' "$BP" train "${opts[@]}" --steps 50 --out "$WORK/early" \
  >"$WORK/out" 2>&1 || rc=$?
[ "$rc" -eq 3 ] || fail "SIGTERM at the start: exit $rc, expected 3: $(cat "$WORK/out")"
grep -q "stopped by a signal after step 1;" "$WORK/out" || fail "SIGTERM at the start: $(cat "$WORK/out")"
[ "$(cat "$WORK/early/latest")" = ckpt-00000001 ] || fail "SIGTERM at the start: no checkpoint of step 1"

# A signal during a long evaluation (a replica of one rank) cuts it short: the run
# stops after the next step instead of finishing thousands of evaluation batches
# (10000, the most --eval-batches takes, of 64 sequences).
timeout -k 5 60 "$BP" train "${opts[@]}" --steps 100 --eval-every 1 --eval-batches 10000 --batch 64 \
  --out "$WORK/eval" >"$WORK/out" 2>&1 &
job=$!
for _ in $(seq 100); do [ -s "$WORK/eval/metrics.jsonl" ] && break; sleep 0.1; done
sleep 1
t0=$SECONDS
kill -TERM "$job"
rc=0
wait "$job" || rc=$?
[ "$rc" -eq 3 ] || fail "SIGTERM during an evaluation: exit $rc, expected 3: $(cat "$WORK/out")"
[ $((SECONDS - t0)) -lt 20 ] || fail "SIGTERM during an evaluation took $((SECONDS - t0)) s"
grep -q "evaluation at step 1 cut short by a signal" "$WORK/out" || fail "no note of the cut: $(cat "$WORK/out")"
! grep -q '"type":"eval"' "$WORK/eval/metrics.jsonl" || fail "a cut evaluation was logged"
echo "ok"
