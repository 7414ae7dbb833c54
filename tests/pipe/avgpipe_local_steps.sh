#!/usr/bin/env bash
# AvgPipe's replicas meet only at the elastic averaging every --ea-period (tau)
# steps, so the steps in between are local (parallel/step.h): no agreement over all
# ranks and no gradient norm over the stages, the barrier that flushed every step.
#  - On 2 stages with 2 pipelines and tau 4, the losses are bit-identical to a run
#    that agrees at every step (--clip 1e9 needs the norm every step and never clips),
#    and the gradient norm is logged exactly at the agreeing steps: 4, 8 and the last.
#  - A non-finite gradient in a local step (rank 1, step 2) is reported at the next
#    agreement: exit 1 on every rank, one line naming the rank and step 2 (rank 0
#    sees the NaN in step 3, after it spread, and stays silent).
source "$(dirname "$0")/lib.sh"

A=(--layers 2 --embd 16 --heads 2 --seq-len 16 --data "$TEXT" --progress none --log-every 1
  --eval-every 0 --batch 8 --pp 2 --micro-batches 2 --pipelines 2 --ea-period 4 --steps 10)

launch 2 "$BP" train "${A[@]}" --out "$WORK/local" >/dev/null 2>"$WORK/err" ||
  fail "the run failed: $(cat "$WORK/err")"
launch 2 "$BP" train "${A[@]}" --clip 1e9 --out "$WORK/every" >/dev/null 2>"$WORK/err" ||
  fail "the run with --clip failed: $(cat "$WORK/err")"
same "local steps vs agreeing every step" "$WORK/local/metrics.jsonl" "$WORK/every/metrics.jsonl" \
  step loss 0
got=$(values "$WORK/local/metrics.jsonl" step grad_norm | awk '$2 != "null" {printf "%s ", $1}')
[ "$got" = "4 8 10 " ] || fail "gradient norms at steps [$got], expected at 4 8 10"
[ "$(values "$WORK/every/metrics.jsonl" step grad_norm | grep -c null)" -eq 0 ] ||
  fail "--clip: a step without its gradient norm"

rc=0
launch 2 "$BP" train "${A[@]}" --fault-nan-rank 1 --fault-at-step 2 --out "$WORK/nan" \
  >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 1 ] || fail "a NaN in a local step: exit $rc, expected 1: $(cat "$WORK/err")"
[ "$(grep -c '^bagpipe:' "$WORK/err")" -eq 1 ] || fail "not one line: $(cat "$WORK/err")"
grep -q "^bagpipe: \[rank 1\] error: rank 1, step 2: non-finite gradient of tensor" "$WORK/err" ||
  fail "said: $(cat "$WORK/err")"
echo ok
