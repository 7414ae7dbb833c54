#!/usr/bin/env bash
# Replicas that meet only at some steps (parallel/step.h) take the steps in between
# locally, without the ranks' agreement and the gradient norm, which cost every step
# two latencies of the slowest link: DiLoCo between its outer steps, streaming
# DiLoCo between its fragments' syncs, easgd between its averagings.
#  - On 2 ranks the losses are bit-identical to a run that agrees at every step
#    (--clip 1e9 needs the norm every step and never clips), and the gradient norm
#    is logged exactly at the meetings and the last step.
#  - A non-finite gradient in a local step (rank 1, step 2) is reported at the next
#    agreement: exit 1, one line naming rank 1 and step 2.
source "$(dirname "$0")/lib.sh"

A=("${TINY_GPT[@]}" --log-every 1 --steps 10)
check() { # name, expected steps with a norm, options...
  local name=$1 want=$2
  shift 2
  launch 2 "$BP" train "${A[@]}" "$@" --out "$WORK/$name" >/dev/null 2>"$WORK/err" ||
    fail "$name: the run failed: $(cat "$WORK/err")"
  launch 2 "$BP" train "${A[@]}" "$@" --clip 1e9 --out "$WORK/$name-every" >/dev/null 2>"$WORK/err" ||
    fail "$name with --clip: the run failed: $(cat "$WORK/err")"
  same "$name: local steps vs agreeing every step" "$WORK/$name/metrics.jsonl" \
    "$WORK/$name-every/metrics.jsonl" step loss 0
  local got
  got=$(values "$WORK/$name/metrics.jsonl" step grad_norm | awk '$2 != "null" {printf "%s ", $1}')
  [ "$got" = "$want" ] || fail "$name: gradient norms at steps [$got], expected at $want"
  [ "$(values "$WORK/$name-every/metrics.jsonl" step grad_norm | grep -c null)" -eq 0 ] ||
    fail "$name --clip: a step without its gradient norm"
}
# the outer step after every 4th step past a warm-up of 1
check diloco "1 5 9 10 " --dp-algo diloco --inner-steps 4 --outer-warmup 1
# fragment 0 after steps 2, 6; fragment 1 after 4, 8 (offsets (f + 1) H / F mod H)
check streaming "2 4 6 8 10 " --dp-algo streaming-diloco --inner-steps 4 --fragments 2
check easgd "3 6 9 10 " --dp-algo easgd --ea-period 3

rc=0
launch 2 "$BP" train "${A[@]}" --dp-algo diloco --inner-steps 4 --fault-nan-rank 1 \
  --fault-at-step 2 --out "$WORK/nan" >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 1 ] || fail "a NaN in a local step: exit $rc, expected 1: $(cat "$WORK/err")"
[ "$(grep -c '^bagpipe:' "$WORK/err")" -eq 1 ] || fail "not one line: $(cat "$WORK/err")"
grep -q "^bagpipe: \[rank 1\] error: rank 1, step 2: non-finite gradient of tensor" "$WORK/err" ||
  fail "said: $(cat "$WORK/err")"
echo ok
