#!/usr/bin/env bash
# SIGTERM in the middle of a long step (many accumulated micro-batches) is acted on
# between micro-batches, not at the step's end: the step is abandoned on every
# rank, the checkpoint of the last completed step is saved within seconds (a
# scheduler's grace period is often 30 s), the ranks exit 3, and --resume goes on
# with the losses of an uninterrupted run, pipelines included (the stages agree at
# the same micro-batch and drop the activations still on their way).
source "$(dirname "$0")/lib.sh"

# A step of 4096 micro-batches of the default model: a minute or more here.
LONG=(--data "$TEXT" --grad-accum 4096 --steps 1 --eval-every 0 --progress none)

# stopped_soon PID OUT WHAT: PID ends within 15 s with exit code 3, and OUT's
# checkpoint is that of step 0 (the abandoned step 1 never happened).
stopped_soon() {
  local pid=$1 out=$2 what=$3 rc=0
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    pkill -KILL -P "$pid" || true
    kill -KILL "$pid" || true
    fail "$what: still running 15 s after SIGTERM"
  fi
  wait "$pid" || rc=$?
  [ "$rc" -eq 3 ] || fail "$what: exit code $rc after SIGTERM, expected 3: $(cat "$WORK/out")"
  [ "$(cat "$out/latest")" = ckpt-00000000 ] || fail "$what: checkpoint $(cat "$out/latest"), expected step 0's"
  grep -q "stopped by a signal after step 0" "$WORK/out" || fail "$what: no stop message: $(cat "$WORK/out")"
}

"$BP" train "${LONG[@]}" --out "$WORK/one" >"$WORK/out" 2>&1 &
pid=$!
term_rank "$WORK/one"
stopped_soon "$pid" "$WORK/one" "1 rank"

# shellcheck disable=SC2086
timeout -k 5 600 $BP_MPIEXEC $BP_MPIEXEC_FLAGS -n 2 "$BP" train "${LONG[@]}" --dp 2 \
  --out "$WORK/dp2" >"$WORK/out" 2>&1 &
pid=$!
term_rank "$WORK/dp2"
stopped_soon "$pid" "$WORK/dp2" "dp 2 (one rank signalled)"

# Exactness on 2 stages: signalled after the first step, the run stops within a
# later one (or, rarely, between two), and the resumed run ends as the
# uninterrupted one does, step by step. Enough steps that an idle machine is still
# running when the signal comes.
PP_STEPS=20
P=("${TINY[@]}" --layers 2 --embd 32 --data "$TEXT" --eval-every 0 --log-every 1 --pp 2
  --partition 2,2 --micro-batches 2 --grad-accum 128 --steps "$PP_STEPS")
# shellcheck disable=SC2086
timeout -k 5 300 $BP_MPIEXEC $BP_MPIEXEC_FLAGS -n 2 "$BP" train "${P[@]}" --out "$WORK/pp" \
  >"$WORK/out" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q '"type":"step"' "$WORK/pp/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
sleep 0.3
victim=$(pgrep -f "$BP train .*--out $WORK/pp" | tail -n 1 || true)
[ -n "$victim" ] && kill -TERM "$victim"
rc=0
wait "$pid" || rc=$?
if [ "$rc" -eq 3 ]; then
  grep -q "stopped by a signal after step" "$WORK/out" || fail "pp: no stop message: $(cat "$WORK/out")"
  run_np 2 300 "${P[@]}" --resume "$WORK/pp" --out "$WORK/pp_res"
  [ "$rc" -eq 0 ] || fail "pp: resume failed: $(cat "$WORK/out")"
  run_np 2 300 "${P[@]}" --out "$WORK/pp_full"
  done_steps=$(sed -E 's/ckpt-0*//' "$WORK/pp/latest")
  diff <(losses "$WORK/pp_full/metrics.jsonl" | tail -n "$((PP_STEPS - done_steps))") \
    <(losses "$WORK/pp_res/metrics.jsonl") || fail "pp: resumed losses differ from the uninterrupted run"
else
  [ "$rc" -eq 0 ] || fail "pp: exit code $rc: $(cat "$WORK/out")"
  echo "pp: the run ended before the signal; exactness not exercised"
fi
echo OK
