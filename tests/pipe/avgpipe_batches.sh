#!/usr/bin/env bash
# AvgPipe's batches (--avgpipe-batch, own by default): with --pipelines N each
# pipeline trains on its own batch of --batch samples, drawn in turn from the data
# stream (pipeline j takes the j-th of the step's N batches).
#  - Own batches of B rows are exactly the split of one batch of N x B rows (the
#    text stream draws rows one by one, so N draws of B rows are one draw of N x B;
#    one dp replica): the same losses at every step and the same evaluation, on
#    2 stages with 2 micro-batches per pipeline (the validation set is
#    --eval-batches x --batch windows: 4 x 8 against 2 x 16). A run that gave every pipeline the
#    same batch, or drew one batch per step, differs from the first step on.
#  - items_per_s counts the N batches: items_per_s x step_ms = N x batch x seq-len.
#  - --pipelines 1 --ea-alpha 0 is plain 1f1b (bit-identical losses).
#  - The data stream resumes from a checkpoint: at --lr 0 the weights never change,
#    so each step's loss depends only on its N batches, and a run resumed at step 5
#    logs the losses of the uninterrupted run (bit-identical). (A checkpoint holds
#    the replicas' average, so with lr > 0 the resumed pipelines start from it.)
source "$(dirname "$0")/lib.sh"

B=(--layers 2 --embd 16 --heads 2 --seq-len 16 --data "$TEXT" --progress none --log-every 1
  --eval-batches 2)

run() { # run NAME W OPTIONS...
  local name=$1 w=$2
  shift 2
  launch "$w" "$BP" train "${B[@]}" "$@" --out "$WORK/$name" >/dev/null 2>"$WORK/err" ||
    fail "$name: the run failed: $(cat "$WORK/err")"
}

P=(--pp 2 --micro-batches 2 --pipelines 2 --steps 12 --eval-every 6)
run own 2 "${P[@]}" --batch 8 --eval-batches 4
run split 2 "${P[@]}" --batch 16 --avgpipe-batch split
same "own batches of 8 vs one split batch of 16" "$WORK/own/metrics.jsonl" \
  "$WORK/split/metrics.jsonl" step loss 0
same "own vs split evaluation" "$WORK/own/metrics.jsonl" "$WORK/split/metrics.jsonl" eval val_loss 0

grep '"type":"step"' "$WORK/own/metrics.jsonl" |
  sed -nE 's/.*"step_ms":([0-9.eE+-]+).*"items_per_s":([0-9.eE+-]+).*/\1 \2/p' |
  awk '{ r = $1 * $2 / 1000 / (2 * 8 * 16); if (r < 0.99 || r > 1.01) { print "ratio " r; exit 1 } n++ }
    END { if (n != 12) { print n " records"; exit 1 } }' ||
  fail "items_per_s does not count both pipelines' batches"

run plain 1 --batch 8 --steps 10 --eval-every 10
run one 1 --batch 8 --steps 10 --eval-every 10 --pipelines 1 --ea-alpha 0
same "--pipelines 1 --ea-alpha 0 vs 1f1b" "$WORK/plain/metrics.jsonl" "$WORK/one/metrics.jsonl" \
  step loss 0

R=(--batch 8 --pipelines 2 --lr 0 --eval-every 0)
run full 1 "${R[@]}" --steps 10
run half 1 "${R[@]}" --steps 5
run resumed 1 "${R[@]}" --steps 10 --resume "$WORK/half"
values "$WORK/full/metrics.jsonl" step loss | tail -n 5 >"$WORK/full5"
values "$WORK/resumed/metrics.jsonl" step loss >"$WORK/res5"
[ "$(wc -l <"$WORK/res5")" -eq 5 ] || fail "the resumed run logged $(wc -l <"$WORK/res5") steps"
diff "$WORK/full5" "$WORK/res5" || fail "the resumed data stream differs"
# The stream moves: consecutive steps see other batches (the losses differ).
[ "$(cut -d' ' -f2 "$WORK/full5" | sort -u | wc -l)" -eq 5 ] || fail "steps repeat their batches"
echo "resumed at step 5: the next 5 losses are bit-identical"
echo ok
