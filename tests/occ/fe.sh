#!/usr/bin/env bash
# Fused embedding synchronization (--fused-embedding-sync) on dp 2 x pp 2, or with
# the argument dp2xpp4 on dp 2 x pp 4 (8 ranks; the middle stages hold no embedding):
#  - after every step the first and the last stage hold bit-identical tied
#    embeddings: a checkpoint is saved every step and `wte.weight` of the first and
#    the last stage's shard are compared byte for byte (and the embedding does
#    change from step to step, so the comparison is not of frozen weights);
#  - the losses (every step and the validation loss) equal those of the run without
#    it within float rounding (1e-5 relative): averaging over dp then summing over
#    the two stages, or summing over all 2 x dp at once, adds the same numbers in
#    another order;
#  - one collective for the embedding instead of two, from the bytes per axis: the
#    dp reduction no longer carries the embedding (its bytes drop by exactly a ring
#    allreduce of wte over dp on each of the 2 x dp ranks that hold it), and the
#    embedding axis carries exactly one allreduce over all 2 x dp of them instead
#    of one over the 2 ends of each pipeline. A ring allreduce of N floats over g
#    ranks sends 2 (g - 1) / g N floats from each.
# A tp case is one more line: fe NAME W DP PP --tp T (the embedding bytes are per
# tp shard, and the shards compared are stage<s>-tp<t>).
source "$(dirname "$0")/lib.sh"

STEPS=6

# ring_bytes RANKS G N: bytes that RANKS ranks send in allreduces of N floats over
# groups of G.
ring_bytes() {
  awk -v ranks="$1" -v g="$2" -v n="$3" 'BEGIN { printf "%d", ranks * 2 * (g - 1) / g * n * 4 }'
}

# fe NAME W DP PP [OPTIONS...]
fe() {
  local name=$1 w=$2 dp=$3 pp=$4
  shift 4
  local opts=("${SMALL_GPT[@]}" --dp "$dp" --pp "$pp" --micro-batches 2 --steps "$STEPS"
    --eval-every "$STEPS" --eval-batches 2 --checkpoint-every 1 --keep-checkpoints 100 "$@")
  train "$name-plain" "$w" "${opts[@]}"
  local plain=$F
  train "$name" "$w" "${opts[@]}" --fused-embedding-sync
  local fused=$F

  # Bit-identical embeddings on the first and the last stage after every step.
  local step ckpt tps t last_digest="" digest
  tps=$(ls "$WORK/$name/ckpt-00000001" | sed -nE 's/^stage0-tp([0-9]+)\.safetensors$/\1/p')
  [ -n "$tps" ] || fail "$name: no shard of stage 0 in $WORK/$name/ckpt-00000001"
  for step in $(seq 1 "$STEPS"); do
    ckpt=$(printf '%s/%s/ckpt-%08d' "$WORK" "$name" "$step")
    for t in $tps; do
      "${SHARDS[@]}" same "$ckpt/stage0-tp$t.safetensors" "$ckpt/stage$((pp - 1))-tp$t.safetensors" \
        wte.weight >"$WORK/same.out" ||
        fail "$name: step $step: the first and the last stage's wte.weight differ: $(cat "$WORK/same.out")"
    done
    digest=$("${SHARDS[@]}" digest "$ckpt/stage0-tp0.safetensors" wte.weight)
    [ "$digest" != "$last_digest" ] || fail "$name: step $step: the embedding did not change"
    last_digest=$digest
  done
  echo "$name: wte.weight bit-identical on stages 0 and $((pp - 1)) after each of $STEPS steps"

  # The same losses.
  same "$name" "$plain" "$fused" step loss 1e-5
  same "$name" "$plain" "$fused" eval val_loss 1e-5

  # One collective instead of two.
  local n ends dp_less embed_plain embed_fused
  n=$("${SHARDS[@]}" numel "$WORK/$name/ckpt-00000001/stage0-tp0.safetensors" wte.weight)
  ends=$((2 * dp * (w / (dp * pp)))) # ranks holding the embedding (x tp)
  dp_less=$(ring_bytes "$ends" "$dp" "$n")
  embed_plain=$(ring_bytes "$ends" 2 "$n")
  embed_fused=$(ring_bytes "$ends" $((2 * dp)) "$n")
  paste <(axis "$plain" dp) <(axis "$fused" dp) <(axis "$plain" embed) <(axis "$fused" embed) |
    awk -v less="$dp_less" -v ep="$embed_plain" -v ef="$embed_fused" -v steps="$STEPS" '
      $1 != $3 || $1 != $5 || $1 != $7 || $2 - $4 != less || $6 != ep || $8 != ef {
        printf "step %d: dp bytes %s -> %s (expected %d less), embed bytes %s -> %s (expected %d -> %d)\n",
          $1, $2, $4, less, $6, $8, ep, ef; bad = 1; exit 1 }
      { n++ } END { if (!bad && n != steps) { print "not " steps " steps"; exit 1 } }' ||
    fail "$name: the bytes do not show the embedding reduced once"
  echo "$name: per step, dp bytes $dp_less fewer (wte, $n floats, left out of the dp reduction" \
    "on $ends ranks); embedding bytes $embed_plain (one allreduce over 2 ranks per pipeline)" \
    "-> $embed_fused (one allreduce over $((2 * dp)) ranks)"
}

if [ "${1:-small}" = dp2xpp4 ]; then
  fe fe-dp2-pp4 8 2 4 --partition 1,1,1,1
else
  fe fe-dp2-pp2 4 2 2
fi
echo "ok"
