#!/usr/bin/env bash
# Selective stage compression (--sc-stages k --sc-rank r --sc-warmup f): the dp
# gradients of stages below k are PowerSGD-compressed after the first f x steps,
# the other stages' are reduced in full precision.
#
# The metrics log has the dp bytes of all ranks together per step. Each stage's
# share follows from its tensors (read from its checkpoint shard): with dp 2 a
# rank of a stage sends its gradient's floats once in full precision, or P and Q
# ((rows + cols) r per 2-D tensor, 1-D tensors whole) when compressed. For every
# step after the first (which also broadcasts the initial weights) the measured dp
# bytes must equal the sum for exactly one set of compressing stages, and that set
# must be: none during the warm-up, then the stages below k. Each case also checks
# that no other set of stages gives the same number (stages whose compressed share
# equals the full one aside), so the bytes do tell which stages compressed. With --fused-embedding-sync the tied embedding is in neither.
# Cases: dp 2 x pp 2 with k = 0, 1, 2 (and k = 1 with the fused embedding sync),
# dp 2 x pp 3 with k = 2; with the argument dp2xpp4 instead dp 2 x pp 4 (8 ranks)
# with k = 2 and the fused embedding sync. A tp case is one more line (the shares are per tp shard).
source "$(dirname "$0")/lib.sh"

STEPS=4
WARMUP=0.5 # full precision for steps 1-2
RANK=2

# sc NAME W DP PP K [OPTIONS...]
sc() {
  local name=$1 w=$2 dp=$3 pp=$4 k=$5
  shift 5
  train "$name" "$w" "${SMALL_GPT[@]}" --dp "$dp" --pp "$pp" --micro-batches 2 --steps "$STEPS" \
    --eval-every 0 --sc-stages "$k" --sc-rank "$RANK" --sc-warmup "$WARMUP" "$@"
  local fused=0 s skip ckpt shares="" tp
  case " $* " in *" --fused-embedding-sync "*) fused=1 ;; esac
  ckpt=$(printf '%s/%s/ckpt-%08d' "$WORK" "$name" "$STEPS")
  tp=$((w / (dp * pp)))
  # shares: "full low" floats of each stage (summed over its tp shards), one per line.
  for s in $(seq 0 $((pp - 1))); do
    skip=""
    [ "$fused" = 1 ] && { [ "$s" = 0 ] || [ "$s" = $((pp - 1)) ]; } && skip=wte.weight
    shares+=$(for f in "$ckpt"/stage"$s"-tp*.safetensors; do "${SHARDS[@]}" floats "$f" "$RANK" $skip; done |
      awk '{ a += $1; b += $2 } END { print a, b }')$'\n'
  done
  local warm
  warm=$(awk -v f="$WARMUP" -v n="$STEPS" 'BEGIN { printf "%d", f * n }')
  axis "$F" dp | awk -v shares="$shares" -v dp="$dp" -v k="$k" -v warm="$warm" -v S="$pp" \
    -v steps="$STEPS" -v name="$name" '
    BEGIN { split(shares, line, "\n")
      for (s = 0; s < S; s++) { split(line[s + 1], x, " "); full[s] = x[1]; low[s] = x[2] } }
    $1 == 1 { next }
    { want = ($1 > warm) ? (2 ^ k) - 1 : 0  # bit s: stage s compresses
      found = -1; matches = 0
      for (set = 0; set < 2 ^ S; set++) {
        b = 0; same = 1
        for (s = 0; s < S; s++) {
          on = int(set / 2 ^ s) % 2
          b += on ? low[s] : full[s]
          # a stage whose compressed and full shares are equal cannot be told apart
          if (on != int(want / 2 ^ s) % 2 && low[s] != full[s]) same = 0
        }
        b *= 2 * (dp - 1) / dp * dp * 4  # every rank of the stage: ring over dp
        if (set == want) expect = b
        if (b == $2) { matches++; if (!same) found = set }
      }
      if (matches == 0 || found >= 0) {
        printf "%s: step %d: dp bytes %s, expected %d (stages below %d compressing%s)", name, $1, $2, expect, ($1 > warm) ? k : 0, ($1 > warm) ? "" : ", warm-up"
        if (found >= 0) printf "; also the sum of compressing stage set %d", found
        printf "\n"; bad = 1; exit 1 }
      seen[$1 > warm]++ }
    END { if (!bad && (!seen[0] || !seen[1])) { print name ": no step in the warm-up or after it"; exit 1 } }' ||
    fail "$name: the dp bytes do not show compression on exactly the stages below $k"
  local algo
  algo=$(field "$F" config dp_algo)
  case $k:$algo in
  0:allreduce*) ;;
  0:*) fail "$name: rank 0 (stage 0) uses '$algo' with --sc-stages 0" ;;
  *:powersgd*) ;;
  *) fail "$name: rank 0 (stage 0) uses '$algo' with --sc-stages $k" ;;
  esac
  echo "$name: dp bytes per step $(axis "$F" dp | awk '{ printf "%s%s", (NR > 1) ? " " : "", $2 }')" \
    "(full/low floats per stage: $(echo "$shares" | paste -sd' ' | sed 's/ *$//'); stage 0: $algo)"
}

if [ "${1:-small}" = dp2xpp4 ]; then
  # 3 layers, so that stages 1 and 2 differ (with equal shares the bytes could not
  # tell which of them compressed).
  sc sc2-fe-dp2-pp4 8 2 4 2 --layers 3 --partition 1,2,1,1 --fused-embedding-sync
  echo "ok"
  exit 0
fi
sc sc0-dp2-pp2 4 2 2 0 --partition 3,1
sc sc1-dp2-pp2 4 2 2 1 --partition 3,1
sc sc2-dp2-pp2 4 2 2 2 --partition 3,1
sc sc1-fe-dp2-pp2 4 2 2 1 --partition 3,1 --fused-embedding-sync
sc sc2-dp2-pp3 6 2 3 2 --partition 2,1,1
echo "ok"
