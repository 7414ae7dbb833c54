#!/usr/bin/env bash
# Behaviour check for changes that must not change training: runs a fixed set of
# short fixed-seed configurations (every dp algorithm, every schedule, tp, a 3D grid,
# AvgPipe, each Optimus-CC flag, mlp) and keeps, per configuration, the loss and
# gradient norm of every step, the loss (and accuracy) of every evaluation and the
# configuration record.
#
#   scripts/compare-losses.sh record BIN DIR     run every configuration with BIN into DIR
#   scripts/compare-losses.sh compare DIR DIR    compare two recorded sets exactly
#   scripts/compare-losses.sh BIN_A BIN_B        both: record each (in a scratch folder), compare
#
# Pipelines get a --partition: the balanced one is measured at start-up, and which
# blocks a stage holds changes what selective stage compression compresses.
# Set ONLY to a regular expression to run only the configurations whose name matches.
# Set EXTRA to options added to every run (EXTRA="--device check": the same runs on the
# checking backend, which must give the cpu's bits).
# async averages on a timer: its losses depend on timing, so it is recorded but only
# checked to finish with a finite, decreasing loss.
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1

SMALL=(--layers 2 --embd 32 --heads 2 --seq-len 32 --batch 8 --steps 20 --eval-every 10
  --eval-batches 2 --log-every 5 --progress none --seed 7)
DP=(--micro-batches 2)

# name | ranks | options after SMALL
CONFIGS=(
  "allreduce|2|--dp-algo allreduce"
  "allreduce-buckets|2|--dp-algo allreduce --bucket-mb 0.01"
  "bytegrad|2|--dp-algo bytegrad --bucket-mb 0.01"
  "qadam|2|--dp-algo qadam --qadam-warmup 5"
  "decentralized-shift_one|2|--dp-algo decentralized --peers shift_one"
  "decentralized-all|2|--dp-algo decentralized --peers all --interval 2"
  "lp-decentralized|3|--dp-algo lp-decentralized --batch 12"
  "lp-decentralized-2|2|--dp-algo lp-decentralized"
  "lp-decentralized-hierarchical|4|--dp-algo lp-decentralized --hierarchical --node-size 2"
  "powersgd|2|--dp-algo powersgd --rank 2 --powersgd-warmup 3 --bucket-mb 0.01"
  "easgd|2|--dp-algo easgd --ea-period 2"
  "async|2|--dp-algo async --sync-ms 5"
  "diloco|2|--dp-algo diloco --inner-steps 4"
  "diloco-minmax4-rs|3|--dp-algo diloco --inner-steps 4 --outer-compress minmax4 --outer-exchange reduce-scatter --batch 12"
  "streaming-diloco|2|--dp-algo streaming-diloco --inner-steps 4 --outer-delay 2 --outer-mix 0.3 --outer-compress topk2 --outer-topk 0.1 --outer-warmup 3"
  "hierarchical|4|--dp-algo bytegrad --hierarchical --node-size 2"
  "gpipe|2|--pp 2 --partition 2,2 --schedule gpipe ${DP[*]}"
  "1f1b|2|--pp 2 --partition 2,2 --schedule 1f1b ${DP[*]}"
  "afp1|2|--pp 2 --partition 2,2 --schedule afp:1 ${DP[*]}"
  "tp2|2|--tp 2"
  "grid-dp2-pp2-tp2|8|--dp 2 --pp 2 --partition 2,2 --tp 2 ${DP[*]} --clip 1"
  "avgpipe|2|--pp 2 --partition 2,2 --pipelines 2 ${DP[*]}"
  "avgpipe-dp2|4|--dp 2 --pp 2 --partition 2,2 --pipelines 2 ${DP[*]} --ea-period 2"
  "cb|4|--dp 2 --pp 2 --partition 2,2 ${DP[*]} --cb --cb-rank 2"
  "cb-no-lep|4|--dp 2 --pp 2 --partition 2,2 ${DP[*]} --cb --cb-rank 2 --no-lep"
  "cb-epilogue-only|4|--dp 2 --pp 2 --partition 2,2 ${DP[*]} --cb --cb-rank 2 --cb-epilogue-only"
  "fused-embedding-sync|4|--dp 2 --pp 2 --partition 2,2 ${DP[*]} --fused-embedding-sync"
  "sc-stages|4|--dp 2 --pp 2 --partition 2,2 ${DP[*]} --sc-stages 1 --sc-rank 2 --sc-warmup 0.2"
  "clip-accum|2|--clip 0.5 --grad-accum 2"
  "mlp|2|--model mlp --hidden 32 --hidden-layers 1 --batch 32"
  "mlp-pp2|2|--model mlp --hidden 32 --hidden-layers 2 --batch 32 --pp 2 --partition 1,2 --micro-batches 2"
)

# The options of a configuration; mlp takes no gpt sizes.
options_of() {
  local opts=$1
  if [[ $opts == *"--model mlp"* ]]; then
    echo "--steps 20 --eval-every 10 --log-every 5 --progress none --seed 7 $opts"
  else
    echo "${SMALL[*]} $opts"
  fi
}

# The configuration record, step losses and gradient norms, evaluation losses and
# accuracies, one per line.
extract() {
  sed -nE \
    -e 's/.*"type":"config",(.*)\}/config \1/p' \
    -e 's/.*"type":"step","step":([0-9]+),"loss":([^,]+),"lr":[^,]+,"grad_norm":([^,]+),.*/step \1 loss \2 grad_norm \3/p' \
    -e 's/.*"type":"eval","step":([0-9]+),(.*)\}/eval \1 \2/p' "$1"
}

record() {
  local bin=$1 dir=$2
  mkdir -p "$dir"
  for entry in "${CONFIGS[@]}"; do
    IFS='|' read -r name ranks opts <<<"$entry"
    [[ -n ${ONLY:-} && ! $name =~ $ONLY ]] && continue
    local out="$dir/run-$name"
    rm -rf "$out"
    # shellcheck disable=SC2046
    if ! timeout -k 5 300 scripts/mpirun.sh -np "$ranks" "$bin" train $(options_of "$opts") \
      ${EXTRA:-} --out "$out" >"$dir/$name.log" 2>&1; then
      echo "$name: FAILED (see $dir/$name.log)"
      continue
    fi
    extract "$out/metrics.jsonl" >"$dir/$name.losses"
    echo "$name: $(grep -c '^step' "$dir/$name.losses") steps, $(grep -c '^eval' "$dir/$name.losses") evals"
  done
}

# async converges: finite losses, the last below the first.
async_ok() {
  awk '$1 == "step" { if ($4 == "null") bad = 1; if (!n++) first = $4; last = $4 }
       END { exit (bad || n == 0 || last >= first) }' "$1"
}

compare() {
  local a=$1 b=$2 bad=0
  for entry in "${CONFIGS[@]}"; do
    IFS='|' read -r name _ _ <<<"$entry"
    [[ -n ${ONLY:-} && ! $name =~ $ONLY ]] && continue
    if [ ! -s "$a/$name.losses" ] || [ ! -s "$b/$name.losses" ]; then
      echo "MISSING  $name"
      bad=1
    elif [ "$name" = async ]; then
      if async_ok "$a/$name.losses" && async_ok "$b/$name.losses"; then
        echo "RUNS     $name (timing-dependent: finite, decreasing)"
      else
        echo "DIFFERS  $name (not finite or not decreasing)"
        bad=1
      fi
    elif cmp -s "$a/$name.losses" "$b/$name.losses"; then
      echo "SAME     $name ($(wc -l <"$a/$name.losses") values)"
    else
      echo "DIFFERS  $name"
      { diff "$a/$name.losses" "$b/$name.losses" || true; } | head -5
      bad=1
    fi
  done
  return $bad
}

case ${1:-} in
record) record "$2" "$3" ;;
compare) compare "$2" "$3" ;;
"" | -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' ;;
*)
  work=$(mktemp -d /tmp/compare-losses.XXXXXX)
  record "$1" "$work/a"
  record "$2" "$work/b"
  compare "$work/a" "$work/b"
  ;;
esac
