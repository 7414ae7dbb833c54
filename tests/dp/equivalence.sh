#!/usr/bin/env bash
# Data parallelism changes nothing but the speed: `bagpipe train --dp-algo allreduce`
# on 2 and 4 ranks with global batch B (B/W rows per rank) logs the same loss at
# each of 50 steps as one process with batch B, within a relative 1e-4, for a tiny
# gpt (AdamW) and a small mlp (SGD with momentum, cosine schedule), and with
# --grad-accum 2 (two micro-batches of B per step, the same on every W).
#
# Why 1e-4 holds and is tight: both runs see the same rows, and the averaged
# gradient differs from the one-process gradient only in float rounding (sums in
# another order); after 50 steps the logged losses differ by at most 1.4e-7 relative
# (measured), while a rank that averaged the wrong rows, or a missing average,
# changes the loss from the first step on by 1e-2 or more.
source "$(dirname "$0")/lib.sh"

STEPS=50

# compare NAME W OPTIONS...: W ranks against one process, both with OPTIONS.
compare() {
  local name=$1 w=$2
  shift 2
  [ -s "$WORK/$name-1/metrics.jsonl" ] ||
    launch 1 "$BP" train "$@" --steps $STEPS --out "$WORK/$name-1" >/dev/null ||
    fail "$name: the one-process run failed"
  launch "$w" "$BP" train "$@" --steps $STEPS --dp "$w" --dp-algo allreduce \
    --out "$WORK/$name-$w" >/dev/null || fail "$name: the run on $w ranks failed"
  grep -q "\"world\":$w," "$WORK/$name-$w/metrics.jsonl" || fail "$name: not a $w-rank run"
  losses "$WORK/$name-1/metrics.jsonl" >"$WORK/a"
  losses "$WORK/$name-$w/metrics.jsonl" >"$WORK/b"
  [ "$(wc -l <"$WORK/a")" -eq $STEPS ] || fail "$name: one process logged $(wc -l <"$WORK/a") steps"
  [ "$(wc -l <"$WORK/b")" -eq $STEPS ] || fail "$name: $w ranks logged $(wc -l <"$WORK/b") steps"
  # Largest relative difference over the steps, and the step where it is.
  local worst
  worst=$(paste "$WORK/a" "$WORK/b" | awk -v name="$name" -v w="$w" '
    $1 != $3 { print "steps out of order: " $1 " vs " $3; exit 1 }
    { d = $2 - $4; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2);
      if (r > worst) { worst = r; at = $1 } }
    END { printf "%.3g at step %d", worst, at; if (worst > 1e-4) exit 1 }') ||
    fail "$name: $w ranks vs one process: relative loss difference $worst (limit 1e-4)"
  echo "$name: $w ranks vs one process: largest relative loss difference $worst"
}

for w in 2 4; do
  compare gpt $w "${TINY_GPT[@]}"
  compare gpt-accum2 $w "${TINY_GPT[@]}" --grad-accum 2
  compare mlp $w "${SMALL_MLP[@]}"
  compare mlp-accum2 $w "${SMALL_MLP[@]}" --grad-accum 2
done

# The comparison can fail: the same gpt with another seed differs by far more.
launch 2 "$BP" train "${TINY_GPT[@]}" --steps $STEPS --seed 99 --out "$WORK/other" >/dev/null
paste <(losses "$WORK/gpt-1/metrics.jsonl") <(losses "$WORK/other/metrics.jsonl") |
  awk '{ d = $2 - $4; if (d < 0) d = -d; if (d / $2 > 1e-4) n++ } END { exit !(n > 0) }' ||
  fail "another seed gave the same losses: the comparison cannot fail"
echo "ok"
