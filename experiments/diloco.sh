#!/usr/bin/env bash
# DiLoCo's variants (plain, streaming, compressed outer gradients) against allreduce:
# the validation loss after STEPS steps of the default gpt on 2 ranks (and a few on 4),
# and the bytes each rank sends (bench/dp/diloco.py); then the settings tried toward
# the target, the reduce-scatter exchange and a short sweep on 4 ranks, and the steps
# to loss that the registry's efficiencies declare (gpt and mlp); 4 ranks x 3000
# steps, and top-k with the residual kept. About 5 hours with 2 cores. The time to
# loss on emulated links is experiments/diloco_emu.sh's section.
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
  --keep "$RUNS" --json "$OUT/diloco.json" | tee "$RUNS/log.txt"
# allreduce's final loss and bytes from a JSON of bench/dp/diloco.py (its runs are
# deterministic: the later tables reuse them).
allreduce_of() {
  /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["allreduce"]
print("%r,%r" % (d["val_loss"], d["mb_per_step_rank"]))' "$1"
}
# Toward the target, 2 ranks: the outer optimizer, 3 fragments, 2-bit outer
# gradients at a shorter H.
S="streaming-diloco --inner-steps 100 --fragments 2 --outer-compress minmax4"
S3="streaming-diloco --inner-steps 100 --fragments 3 --outer-compress minmax4"
M2="--outer-compress minmax2"
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --steps "$STEPS" \
  --allreduce "$(allreduce_of "$OUT/diloco.json")" \
  --variant "$S --outer-lr 1.0 --outer-momentum 0" --variant "$S --outer-momentum 0.5" \
  --variant "$S --outer-momentum 0.95" --variant "$S --outer-lr 1.0" \
  --variant "$S3" --variant "$S3 --outer-lr 1.0" \
  --variant "streaming-diloco --inner-steps 50 --fragments 2 $M2" \
  --variant "streaming-diloco --inner-steps 50 --fragments 2 $M2 --outer-lr 1.0" \
  --variant "streaming-diloco --inner-steps 50 --fragments 3 $M2" \
  --variant "streaming-diloco --inner-steps 40 --fragments 2 $M2" \
  --keep "$RUNS/target" --json "$OUT/target.json" | tee "$RUNS/log_target.txt"
# The setting that meets the target, with another seed (initialization and data
# order), allreduce beside.
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --steps "$STEPS" \
  --variant "streaming-diloco --inner-steps 40 --fragments 2 $M2" --keep "$RUNS/seed7" \
  --json "$OUT/seed7.json" -- --seed 7 | tee "$RUNS/log_seed7.txt"
# 4 ranks (the same global batch, 4 rows each), the variants closest to the target,
# the compressed ones by allgather and by reduce-scatter.
RS="--outer-exchange reduce-scatter"
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --ranks 4 --steps "$STEPS" \
  --variant "diloco --inner-steps 50" --variant "streaming-diloco --inner-steps 50 --fragments 2" \
  --variant "streaming-diloco --inner-steps 100 --fragments 2 --outer-compress minmax4" \
  --variant "streaming-diloco --inner-steps 100 --fragments 2 --outer-compress minmax4 $RS" \
  --variant "streaming-diloco --inner-steps 50 --fragments 2 $M2 $RS" \
  --variant "streaming-diloco --inner-steps 40 --fragments 2 $M2 $RS" \
  --keep "$RUNS/4ranks" --json "$OUT/diloco4.json" | tee "$RUNS/log4.txt"
# 4 ranks, a short sweep from the closest setting (H 40, 2 fragments, 2 bits by
# reduce-scatter): the outer lr and momentum, more fragments, a shorter H, the merge's
# mixing factor and a warm-up.
S4="--outer-compress minmax2 $RS"
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --ranks 4 --steps "$STEPS" \
  --allreduce "$(allreduce_of "$OUT/diloco4.json")" \
  --variant "streaming-diloco --inner-steps 40 --fragments 2 $S4 --outer-lr 1.0" \
  --variant "streaming-diloco --inner-steps 40 --fragments 2 $S4 --outer-momentum 0.8" \
  --variant "streaming-diloco --inner-steps 40 --fragments 2 $S4 --outer-mix 0.3" \
  --variant "streaming-diloco --inner-steps 40 --fragments 4 $S4" \
  --variant "streaming-diloco --inner-steps 40 --fragments 4 $S4 --outer-lr 0.5" \
  --variant "streaming-diloco --inner-steps 40 --fragments 4 $S4 --outer-mix 0.3" \
  --variant "streaming-diloco --inner-steps 40 --fragments 4 $S4 --outer-mix 0.1" \
  --variant "streaming-diloco --inner-steps 40 --fragments 4 $S4 --outer-mix 0" \
  --variant "streaming-diloco --inner-steps 40 --fragments 4 $S4 --outer-mix 0.3 --outer-momentum 0.95" \
  --variant "streaming-diloco --inner-steps 40 --fragments 4 $S4 --outer-warmup 20" \
  --variant "streaming-diloco --inner-steps 60 --fragments 6 $S4" \
  --variant "streaming-diloco --inner-steps 20 --fragments 2 $S4" \
  --keep "$RUNS/sweep4" --json "$OUT/sweep4.json" | tee "$RUNS/log_sweep4.txt"
# 4 ranks, 3000 steps (the issue's length): allreduce and the sweep's closest setting
# under gpt's constant lr and under a cosine schedule (100 warm-up steps), each against
# allreduce under the same schedule; the constant one again with another seed.
B4="streaming-diloco --inner-steps 40 --fragments 4 $S4 --outer-mix 0.3"
for sched in constant cosine; do
  W=(); [ "$sched" = cosine ] && W=(--warmup 100)
  /usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --ranks 4 --steps 3000 \
    --variant "$B4" --keep "$RUNS/ranks4_3000_$sched" --json "$OUT/ranks4_3000_$sched.json" \
    -- --lr-schedule "$sched" "${W[@]}" | tee "$RUNS/log_ranks4_3000_$sched.txt"
done
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --ranks 4 --steps 3000 \
  --allreduce "$(allreduce_of "$OUT/ranks4_3000_cosine.json")" \
  --variant "streaming-diloco --inner-steps 40 --fragments 4 --outer-mix 0.3" \
  --variant "diloco --inner-steps 10 --outer-compress topk2 --outer-residual keep $RS" \
  --keep "$RUNS/ranks4_3000_cosine_more" --json "$OUT/ranks4_3000_cosine_more.json" \
  -- --lr-schedule cosine --warmup 100 | tee "$RUNS/log_ranks4_3000_cosine_more.txt"
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --ranks 4 --steps 3000 \
  --variant "$B4" --keep "$RUNS/ranks4_3000_seed7" --json "$OUT/ranks4_3000_seed7.json" \
  -- --seed 7 | tee "$RUNS/log_ranks4_3000_seed7.txt"
# Top-k with 2-bit values, the residual kept in the replicas' weights (--outer-residual
# keep) against fed back (the first table's rows), SparseLoCo's outer step (lr 1, no
# momentum) with the residual fed back; 2 ranks, against the first table's allreduce;
# H 10 again with seed 7.
K="--outer-compress topk2"
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --steps "$STEPS" \
  --allreduce "$(allreduce_of "$OUT/diloco.json")" \
  --variant "diloco --inner-steps 50 $K --outer-residual keep" \
  --variant "diloco --inner-steps 10 $K --outer-residual keep" \
  --variant "diloco --inner-steps 50 $K --outer-lr 1 --outer-momentum 0" \
  --keep "$RUNS/topk_keep" --json "$OUT/topk_keep.json" | tee "$RUNS/log_topk_keep.txt"
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --steps "$STEPS" \
  --allreduce "$(allreduce_of "$OUT/seed7.json")" \
  --variant "diloco --inner-steps 10 $K --outer-residual keep" --keep "$RUNS/topk_keep_seed7" \
  --json "$OUT/topk_keep_seed7.json" -- --seed 7 | tee "$RUNS/log_topk_keep_seed7.txt"
# The efficiencies of the registry (src/parallel/dp/diloco.c, streaming_diloco.c): the
# steps to bagua_convergence's target 1.882 at the defaults, evaluations every 100
# steps, allreduce beside; and on the default mlp (mlp_convergence's settings: one
# epoch, evaluations every 47 steps, its target 0.4228).
/usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --steps 1000 --eval-every 100 \
  --reach 1.882 --variant diloco --variant streaming-diloco --keep "$RUNS/efficiency" \
  --json "$OUT/efficiency.json" | tee "$RUNS/log_efficiency.txt"
for algo in allreduce diloco streaming-diloco; do
  "$ROOT/scripts/mpirun.sh" -np 2 "$BP" train --model mlp --eval-every 47 --progress none \
    --overwrite --out "$RUNS/mlp.$algo" --dp-algo "$algo" | grep '^done'
done
/usr/bin/python3 - "$RUNS" <<'PY' | tee "$RUNS/log_mlp.txt"
import json, sys
for algo in ("allreduce", "diloco", "streaming-diloco"):
    pts = [(d["step"], d["val_loss"]) for d in map(json.loads, open(f"{sys.argv[1]}/mlp.{algo}/metrics.jsonl"))
           if d.get("type") == "eval"]
    hit = next((i for i, (_, l) in enumerate(pts) if l <= 0.4228), None)
    steps = None if hit is None else pts[hit][0] if hit == 0 else \
        pts[hit - 1][0] + (pts[hit - 1][1] - 0.4228) / (pts[hit - 1][1] - pts[hit][1]) * (pts[hit][0] - pts[hit - 1][0])
    print(f"mlp {algo}: final {pts[-1][1]:.4f}, steps to 0.4228: {'never' if steps is None else f'{steps:.1f}'}")
PY
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

Scaled to the machine it ran on (2 cores shared with other work): 2 ranks (4 for three
variants),
$STEPS steps (not 3000; H = 500 synchronizes only twice); the time to loss on emulated
links is the section of experiments/diloco_emu.sh below; the losses do not depend on
the load (every run is deterministic).

TXT
  sed -n '/^| variant/,/^$/p' "$RUNS/log.txt"
  printf '\n'
  cat <<'TXT'
## Toward the target (2 ranks, 1000 steps)

The outer optimizer, more fragments, and 2-bit outer gradients (`--outer-compress
minmax2`, MinMax with 2 bits and error feedback) at a shorter H, against the same
allreduce (its numbers from the table above: every run is deterministic):
TXT
  printf '\n'
  sed -n '/^| variant/,/^$/p' "$RUNS/log_target.txt"
  printf '\nThe setting that meets the target, with another seed (`--seed 7`: another\ninitialization and data order), allreduce beside:\n\n'
  sed -n '/^| variant/,/^$/p' "$RUNS/log_seed7.txt"
  cat <<'TXT'
## 4 ranks, and the reduce-scatter exchange

The same global batch of 16, 4 rows per rank; the compressed variants by the
allgather and with `--outer-exchange reduce-scatter`:
TXT
  printf '\n'
  sed -n '/^| variant/,/^$/p' "$RUNS/log4.txt"
  cat <<'TXT'
### 4 ranks: a short sweep

From the closest setting (H 40, 2 fragments, 2 bits by reduce-scatter), one change
or two at a time, against the same allreduce:
TXT
  printf '\n'
  sed -n '/^| variant/,/^$/p' "$RUNS/log_sweep4.txt"
  cat <<'TXT'
## Efficiency

The steps factors that `bagpipe plan` uses (src/parallel/dp/diloco.c,
streaming_diloco.c): each algorithm at its defaults (H 100, float32; streaming with 2
fragments), evaluated every 100 steps, the steps to bagua_convergence's target 1.882
(linear between evaluations) over allreduce's in the same study
(`bench/dp/diloco.py --eval-every 100 --reach 1.882`); and on the default mlp with
mlp_convergence's settings (one epoch of 937 steps, evaluations every 47) and
target 0.4228:
TXT
  grep '^  steps to' "$RUNS/log_efficiency.txt"
  grep '^mlp ' "$RUNS/log_mlp.txt"
  cat <<'TXT'

(allreduce's final losses: gpt 1.7862, mlp 0.4083. With evaluations every 100 steps
the bytes per step count the evaluations' averaging too, so the bytes are the first
table's, not these runs'.)

TXT
  # The 3000-step and top-k sections (tables written from the JSONs above by hand),
  # kept from the page this replaces.
  sed -n '/^<!-- 3000 steps and top-k -->/,/^<!-- \/3000 steps and top-k -->/p' \
    "$ROOT/docs/results/diloco/README.md"
  # experiments/diloco_emu.sh's section, kept from the page this replaces.
  if [ -f "$ROOT/docs/results/diloco/time_to_loss.md" ]; then
    cp "$ROOT/docs/results/diloco/time_to_loss."{md,json} "$OUT/"
    printf '<!-- time to loss -->\n'
    cat "$OUT/time_to_loss.md"
    printf '<!-- /time to loss -->\n'
  fi
  cat <<'TXT'

## What it shows, at this scale

- **One setting meets the target on 2 ranks**: streaming-diloco with H 40, 2
  fragments and 2-bit outer gradients, +1.74% against allreduce's validation loss with
  650x fewer bytes per rank. With another seed it meets again
  (+1.68%, 650x). The margin is small (0.3% of loss under the 2%), and both are
  single runs of 1000 steps.
- What got it there: a shorter H (each fragment every 40 steps) bought with 2-bit
  outer gradients, whose error feedback costs little loss (H 50: +2.10% against
  float32's +1.75%, for 16x fewer bytes). More fragments help at equal bytes (H 100,
  4 bits: 3 fragments +3.14%, 2 fragments +3.79%), 3 at H 50 no more than 2.
- The outer optimizer: DiLoCo's lr 0.7 with Nesterov 0.9 is near the best here.
  Less momentum is worse (0.5: +5.24%; plain averaging, lr 1 and no momentum:
  +5.79%), more is worse (0.95: +3.97%); a larger outer lr helps at H 100 (1.0:
  +2.80% with 2 fragments, +2.46% with 3) but hurts at H 50 (+4.67%), where the
  momentum builds over twice as many outer steps.
- A synchronous warm-up (`--outer-warmup N`, added for this study) cannot help the
  byte target at 1000 steps: N steps of allreduce send N/1000 of allreduce's bytes,
  so even N = 1 caps the saving below 1000x, and N = 2 below 500x; it belongs to
  runs of tens of thousands of steps, as in the papers, which this machine cannot
  afford. On 4 ranks 20 steps of it did not help either (+7.73% against +7.18%
  without, 4 fragments) and cut the saving to 51x.
- On 4 ranks (4 rows per replica) no setting comes within 2%: the first variants sit
  +6.8% to +9.5% above allreduce, the closest compressed one +7.87% (H 40, 2 bits).
  The batch of 4 per replica makes each inner step noisier, and the replicas drift
  further in H steps. The short sweep narrows the gap at the same 640x to **+4.92%**
  with 4 fragments (each synchronized every 10 steps) and a merge that keeps less of
  the local weights (`--outer-mix 0.3`: local = 0.3 local + 0.7 global). The merge
  matters most (4 fragments: mix 0.5 +7.18%, 0.3 +4.92%, 0.1 +5.17%, 0 +6.47%; 2
  fragments at 0.3: +5.26%); momentum 0.95 with it is no better (+4.97%); the outer
  lr (1.0: +29%, 0.5: +7.9%), momentum 0.8 (+8.2%) and 6 fragments at H 60 (+9.1%)
  are worse; H 20 (+5.6%) halves the saving. Still 2.9% short of the target.
- The reduce-scatter exchange keeps the saving on 4 ranks: 835x for H 100 with 4
  bits, against the allgather's 419x (2 ranks: 837x), at the same loss (+9.54%
  against +9.44%: the owner's second encoding, with its error feedback, costs
  0.1%). Each rank sends 2 (p - 1) / p of the encoded model, as the ring allreduce
  does of the float32 one, so the ratio to allreduce no longer falls with p.
- Top-k with 2-bit values still fails (first table), and DiLoCo's variants need
  more steps than allreduce to reach the same loss (x1.22 to x1.35 above): they win
  where bytes, not steps, cost; Bagua's family ([bagua_convergence](../bagua_convergence/README.md):
  qadam +0.3%, decentralized +2.0%, powersgd +4.0%, easgd +4.9% at 0.31 MB/step/rank
  or more) wins on loss at equal steps, DiLoCo's on bytes (0.004 to 0.005 MB/step/rank
  here, 60 to 80 times fewer than theirs).
- **Time to loss on slow links** (the section above, 2 emulated V100s): at 20
  Mbit/s and 20 ms the setting that meets the target reaches 1.882 nats 231.6x sooner
  than allreduce and 37x sooner than the best of Bagua's family there (powersgd,
  6.3x); at 100 Mbit/s and 10 ms 109.3x sooner than allreduce, 29x sooner than the
  best of Bagua's (async, 3.8x). Even DiLoCo's defaults (H 100, float32) beat every
  Bagua algorithm on both links by 10x or more. Its inner steps are local: they leave
  out the ranks' per-step agreement on non-finite values, with which an inner step
  took 55.7 ms here (H 100) against 0.8 ms of device work and the best setting was
  31.7x sooner than allreduce.
- Not done here: 3000-step runs, H 500 beyond two outer steps, the time to loss on 4
  ranks, and a top-k variant that keeps the replicas' progress.
TXT
  cat <<TXT

Plots (\`bagpipe report\` of the first table's runs, [index](plots/index.html)).
TXT
} >"$OUT/README.md"
study_end
