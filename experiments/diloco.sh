#!/usr/bin/env bash
# DiLoCo's variants (plain, streaming, compressed outer gradients) against allreduce:
# the validation loss after STEPS steps of the default gpt on 2 ranks, and the bytes
# each rank sends (bench/dp/diloco.py). About 30 minutes with 2 cores to itself.
# Environment: BAGPIPE (binary), STEPS (1000), RUNS_DIR (where run folders go).
source "$(dirname "$0")/lib.sh"
study_begin diloco "DiLoCo's variants: validation loss and bytes against allreduce"
STEPS=${STEPS:-1000}
V=()
for H in 10 50 100 500; do V+=(--variant "diloco --inner-steps $H"); done
for H in 50 100; do V+=(--variant "streaming-diloco --inner-steps $H --fragments 2"); done
for c in minmax8 minmax4 topk2; do V+=(--variant "diloco --inner-steps 50 --outer-compress $c"); done
V+=(--variant "diloco --inner-steps 100 --outer-compress minmax4")
V+=(--variant "diloco --inner-steps 10 --outer-compress topk2")
V+=(--variant "diloco --inner-steps 50 --outer-compress topk2 --outer-topk 0.05")
V+=(--variant "streaming-diloco --inner-steps 100 --fragments 2 --outer-compress minmax4")
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --steps "$STEPS" "${V[@]}" \
  --keep "$RUNS" --json "$OUT/diloco.json" | tee "$OUT/log.txt"
plots plots "$RUNS"/run*
{
  study_header
  cat <<TXT

The default gpt (4 layers, 128 channels, 64 bytes of context, 0.83 M parameters) on the
KJV text, global batch 16 on 2 ranks, $STEPS steps, AdamW inside (the run's defaults),
the outer SGD at DiLoCo's lr 0.7 and Nesterov momentum 0.9; streaming-diloco with its
defaults (tau 1, alpha 0.5), top-k sending 1% of each tensor unless --outer-topk says otherwise. One evaluation, at the
end, of the replicas' average: for diloco with H dividing $STEPS that is the global
model. Validation loss is in nats per byte; MB/step/rank counts what the algorithm
sends (the common start's broadcast and the evaluation's averaging left out);
"x fewer bytes" is allreduce's over the variant's. The target (DiLoCo's claim):
within 2% of allreduce's loss with at least 500x fewer bytes per rank.

Scaled to the machine it ran on (2 cores shared with other work): 2 ranks (not 4),
$STEPS steps (not 3000; H = 500 synchronizes only twice), no time-to-loss on emulated
links; the losses do not depend on the load (every run is deterministic).

TXT
  sed -n '/^| variant/,/^$/p' "$OUT/log.txt"
  cat <<TXT

Plots (\`bagpipe report\` of every run, [index](plots/index.html)).
TXT
} >"$OUT/README.md"
study_end
