#!/usr/bin/env bash
# AvgPipe without a flush between local steps (--avgpipe-flush average): the steps
# between two meeting points run as one stream per stage, each pipeline's update
# inline (parallel/step.h, bp_schedule_stream). On 2 and 3 stages with 2 pipelines,
# tau 4 and an evaluation at step 6 (between averagings):
#  - per-step losses, validation losses and the final checkpoint's files are
#    bit-identical to flushing every step (--avgpipe-flush step);
#  - the steps did run as streams: a stream's time is shared out evenly, so steps
#    1-4, 5-6 and 7-8 each log one step_ms (streams end at the averaging of step 4,
#    the evaluation of step 6 and the averaging of step 8);
#  - the most micro-batches a stage held (the stages record) is within what
#    `bagpipe simulate` predicts for the same run;
#  - average is refused (exit 2, one line) with --clip, --skip-nonfinite and
#    without --pipelines.
source "$(dirname "$0")/lib.sh"

A=(--layers 2 --embd 16 --heads 2 --seq-len 16 --batch 8 --micro-batches 2 --pipelines 2
  --ea-period 4 --steps 10)
T=(--data "$TEXT" --progress none --log-every 1 --eval-every 6 --eval-batches 2)

# the partition fixed: balanced by timing, it could differ between the two runs
declare -A CUT=([2]=2,2 [3]=2,1,1)
for S in 2 3; do
  for f in step average; do
    launch "$S" "$BP" train "${A[@]}" "${T[@]}" --pp "$S" --partition "${CUT[$S]}" --avgpipe-flush "$f" \
      --out "$WORK/$S-$f" >/dev/null 2>"$WORK/err" || fail "$S stages, $f: $(cat "$WORK/err")"
  done
  a=$WORK/$S-step b=$WORK/$S-average
  same "$S stages: losses" "$a/metrics.jsonl" "$b/metrics.jsonl" step loss 0
  same "$S stages: validation" "$a/metrics.jsonl" "$b/metrics.jsonl" eval val_loss 0
  [ "$(values "$b/metrics.jsonl" eval val_loss | wc -l)" -ge 2 ] || fail "no evaluation at step 6"
  for file in "$a"/ckpt-00000010/*; do
    cmp -s "$file" "$b/ckpt-00000010/$(basename "$file")" ||
      fail "$S stages: checkpoint file $(basename "$file") differs"
  done
  got=$(values "$b/metrics.jsonl" step step_ms | awk '$1 <= 8 {print $2}' | uniq -c | awk '{printf "%d ", $1}')
  [ "$got" = "4 2 2 " ] || fail "$S stages: steps per stream [$got], expected 4 2 2"
  held=$(field "$b/metrics.jsonl" stages peak_stash | tr ',' '\n' | sort -n | tail -n 1)
  predicted=$("$BP" simulate "${A[@]}" --pp "$S" --partition "${CUT[$S]}" --device-flops 1e10 --device-bw 1e10 | awk '$1 == "peak_stash" {print $2}')
  [ -n "$held" ] && [ -n "$predicted" ] && [ "$held" -le "$predicted" ] ||
    fail "$S stages: held $held micro-batches, simulate predicts $predicted"
  echo "$S stages: bit-identical; streams of 4 2 2 steps; held $held <= predicted $predicted"
done

refused 2 "^bagpipe: \[rank 0\] error: option --avgpipe-flush: average cannot run with --clip, which needs the gradient norm of every stage at every step$" \
  -- "${A[@]}" "${T[@]}" --pp 2 --avgpipe-flush average --clip 1
refused 1 "^bagpipe: error: option --avgpipe-flush: average cannot run with --skip-nonfinite, which needs the verdict of every stage at every step$" \
  -- "${A[@]}" "${T[@]}" --avgpipe-flush average --skip-nonfinite
refused 1 "^bagpipe: error: option --avgpipe-flush: average is for AvgPipe \(--pipelines\)$" \
  -- --layers 2 --embd 16 --heads 2 --seq-len 16 --batch 8 "${T[@]}" --avgpipe-flush average
echo ok
