#!/usr/bin/env bash
# Compressed backpropagation in `bagpipe train` (test_occ_cb.c checks the codec and
# the pipeline's sends against a replay; this checks the trainer around them):
#  - epilogue-only: the `stages` record counts, over the run, M backward sends per
#    step on every stage s > 0 of which exactly min(M, S - s) compressed (M: micro-
#    batches of a step, x --grad-accum); all M with --cb alone, none without --cb,
#    none in the first step with --cb-warmup 1; under 1f1b, gpipe and afp:1, S = 4
#    with M = 4 and M = 2, on dp 2 x pp 2 and on dp 2 x pp 4 with FE and SC too;
#  - training with --cb converges (loss falls from 5.5 by more than 1.5 nats; the
#    validation loss within 5% of the run without compression, as are the run
#    without lazy error propagation, and CB+FE+SC on dp 2 x pp 4 (8 ranks), whose
#    global batch and so whose uncompressed losses are those of pp 2);
#  - the bytes on the pp axis: per step exactly the forward activations plus the
#    compressed gradients ((rows + C) * r floats per micro-batch instead of
#    rows * C), plus the few bytes of the gradient-norm reduction; the gradients'
#    bytes shrink by rows * C / ((rows + C) * r) = 6.4 for rank 4.
# A tp case is one more line (the counts are per pipeline stage whatever the tp).
source "$(dirname "$0")/lib.sh"
GRID=${1:-small} # dp2xpp4: the cases on 8 ranks instead (a test of their own: slow)

STEPS=3

# epilogue NAME W S M MODE OPTIONS...: on W ranks with --pp S, M micro-batches per
# step (after --grad-accum), MODE epilogue, all, warmup (all after one step) or off:
# the stages record.
epilogue() {
  local name=$1 w=$2 S=$3 M=$4 mode=$5
  shift 5
  local flags=()
  # rank 4: the default 12 would not shrink the small gpt's gradients (refused)
  case $mode in
  epilogue) flags=(--cb --cb-rank 4 --cb-epilogue-only) ;;
  all) flags=(--cb --cb-rank 4) ;;
  warmup) flags=(--cb --cb-rank 4 --cb-warmup 1) ;;
  esac
  train "$name" "$w" "${SMALL_GPT[@]}" --steps "$STEPS" --eval-every 0 --pp "$S" "${flags[@]}" "$@"
  local want_sends want_comp
  want_sends=$(awk -v S="$S" -v M="$M" -v n="$STEPS" 'BEGIN {
    for (s = 0; s < S; s++) printf "%s%d", s ? "," : "", s ? n * M : 0 }')
  want_comp=$(awk -v S="$S" -v M="$M" -v n="$STEPS" -v mode="$mode" 'BEGIN {
    for (s = 0; s < S; s++) {
      c = mode == "off" || s == 0 ? 0 : mode == "epilogue" ? (S - s < M ? S - s : M) : M
      printf "%s%d", s ? "," : "", (mode == "warmup" ? n - 1 : n) * c } }')
  local sends comp
  sends=$(field "$F" stages bwd_sends)
  comp=$(field "$F" stages bwd_compressed)
  [ "$sends" = "$want_sends" ] || fail "$name: backward sends per stage [$sends], expected [$want_sends]"
  [ "$comp" = "$want_comp" ] || fail "$name: compressed sends per stage [$comp], expected [$want_comp]"
  echo "$name: over $STEPS steps, backward sends [$sends], compressed [$comp]"
}

if [ "$GRID" = dp2xpp4 ]; then
  epilogue all-fe-sc-dp2-pp4-m2 8 4 2 all --micro-batches 2 --dp 2 --fused-embedding-sync \
    --sc-stages 2
else
  epilogue epi-pp4-m4-1f1b 4 4 4 epilogue --micro-batches 4 --schedule 1f1b
  epilogue epi-pp4-m4-gpipe 4 4 4 epilogue --micro-batches 4 --schedule gpipe
  epilogue epi-pp4-m2-afp1 4 4 2 epilogue --micro-batches 2 --schedule afp:1
  epilogue epi-pp4-m2x2-1f1b 4 4 4 epilogue --micro-batches 2 --grad-accum 2
  epilogue epi-dp2-pp2-m4 4 2 4 epilogue --micro-batches 4 --dp 2
  epilogue all-pp4-m4 4 4 4 all --micro-batches 4
  epilogue off-pp4-m4 4 4 4 off --micro-batches 4
  epilogue warmup-pp4-m4 4 4 4 warmup --micro-batches 4
fi

# Training: pp 2, micro-batches of 4 x 32 rows (rows = 128), C = 32, rank 4.
STEPS=60
C=32 T=32 B=8 M=2 R=4
GPT=(--layers 2 --embd "$C" --heads 2 --seq-len "$T" --batch "$B" --data "$TEXT" --progress none
  --log-every 1 --lr 3e-3 --steps "$STEPS" --eval-every "$STEPS" --eval-batches 4
  --micro-batches "$M")
train base 2 "${GPT[@]}" --pp 2
runs=(cb cb-nolep)
if [ "$GRID" = dp2xpp4 ]; then
  runs=(cb-fe-sc-dp2-pp4)
  train cb-fe-sc-dp2-pp4 8 "${GPT[@]}" --dp 2 --pp 4 --partition 1,1,1,1 --cb --cb-rank "$R" \
    --fused-embedding-sync --sc-stages 2
else
  train cb 2 "${GPT[@]}" --pp 2 --cb --cb-rank "$R"
  train cb-nolep 2 "${GPT[@]}" --pp 2 --cb --cb-rank "$R" --no-lep
fi

for run in "${runs[@]}"; do
  f="$WORK/$run/metrics.jsonl"
  values "$f" step loss | awk -v name="$run" '
    NR == 1 { first = $2 } NR > 40 { s += $2; n++ }
    END { printf "%s: loss %.3f at step 1, %.3f over the last 20 steps\n", name, first, s / n
          exit !(s / n < first - 1.5) }' || fail "$run: the loss did not fall"
  awk -v a="$(field "$WORK/base/metrics.jsonl" eval val_loss)" -v b="$(field "$f" eval val_loss)" \
    -v name="$run" 'BEGIN { printf "%s: validation loss %.4f, without compression %.4f\n", name, b, a
      exit !(b <= 1.05 * a) }' || fail "$run: validation loss too far from the uncompressed run"
done
if [ "$GRID" = dp2xpp4 ]; then
  echo "ok"
  exit 0
fi

# Bytes on the pp axis: forward F = M * rows * C floats per step, the uncompressed
# gradients as many, the compressed ones M * (rows + C) * R; what is left over is
# the gradient-norm reduction (a few bytes, the same in both runs).
rows=$((B / M * T))
fwd=$((M * rows * C * 4))
low=$((M * (rows + C) * R * 4))
paste <(axis "$WORK/base/metrics.jsonl" pp) <(axis "$WORK/cb/metrics.jsonl" pp) |
  awk -v fwd="$fwd" -v low="$low" -v steps="$STEPS" '
    { rest = $2 - 2 * fwd
      if ($1 != $3 || rest < 0 || rest > 64 || $4 != fwd + low + rest) {
        printf "step %d: pp bytes %s without, %s with --cb; expected %d + %d + %d\n", $1, $2, $4,
          fwd, low, rest; exit 1 }
      n++ }
    END { if (n != steps) { print "not " steps " steps"; exit 1 } }' ||
  fail "pp bytes are not the activations plus the compressed gradients"
awk -v rows="$rows" -v C="$C" -v R="$R" -v full=$((2 * fwd)) -v fwd="$fwd" -v low="$low" 'BEGIN {
  printf "pp bytes per step: %d without compression, %d with --cb-rank %d; gradients %.2fx smaller (rows * C / ((rows + C) * r) = %.2f)\n",
    full, fwd + low, R, fwd / low, rows * C / ((rows + C) * R) }'
echo "ok"
