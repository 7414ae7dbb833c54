#!/usr/bin/env bash
# Optimus-CC's ablation in miniature (bench/occ/README.md): a gpt on dp 2 x pp 2
# (4 ranks) or dp 2 x pp 4 (8 ranks) trained for a fixed number of samples by
#   baseline, CB, FE, SC, CB+FE, CB+FE+SC, FE+SC, CB without LEP
# on an emulated 1 Gbit / 1 ms network and without emulation, all in one run. Per
# configuration: the median iteration time, the bytes per step on each axis (all
# ranks together), rank 0's exposed communication time per axis, and the
# validation loss at the end; speed and loss relative to the baseline on the same
# network. Prints a Markdown table and writes it, with every run's metrics log,
# under --out.
#
#   bench/occ/ablation.sh [--quick] [--steps N] [--out DIR] [--net SPEC|off ...]
#                         [--diagnose] [--repeat R] [--grid dp2xpp2|dp2xpp4]
#                         [--timed-steps N] [--sc-flags "FLAGS"] [--cb-flags "FLAGS"]
#
# --quick: 30 steps and 4 validation batches (a few minutes); default 200
#   steps and 20 batches (about 12 minutes per repeat on 2 loaded cores).
# --net: the networks to run (default: bw=1Gbit,lat=1ms and off); repeatable.
# --diagnose: one more configuration that tells where the time goes: SC on all
#   stages (--sc-stages pp).
# --repeat R: run every configuration R times, interleaved, and take the median
#   of the per-run medians (default 1).
# --timed-steps N: on emulated networks run N steps only, for the timing; each
#   configuration's validation loss then comes from its run without emulation
#   (added when --net off is not given), which trains all --steps (emulation
#   changes timing only, and a run of N steps has its warm-ups scaled alike:
#   --sc-warmup is a fraction of --steps, and the medians skip the first 10%).
# --sc-flags: SC's flags (default "--sc-stages pp/2"; on a link slow enough that every
#   stage's dp traffic is exposed, all of them, e.g. "--sc-stages 4 --sc-rank 8").
# --cb-flags: CB's flags (default --cb; e.g. "--cb --cb-epilogue-only").
# --grid: dp2xpp2 (default; 4 ranks, stages cut 3,3, 2 micro-batches) or dp2xpp4
#   (8 ranks, stages cut 2,1,1,2, 4 micro-batches of one sequence so that the
#   1F1B pipeline has work in flight); SC compresses the first half of the stages
#   (--sc-stages pp/2), "SC on all stages" all of them. The same model, batch
#   and samples on both grids.
# The binary is $BAGPIPE_BIN or build/bagpipe; ranks run under `nice -n 5` with
# one BLAS thread each.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BP=${BAGPIPE_BIN:-$ROOT/build/bagpipe}
STEPS=200
EVAL_BATCHES=20
OUT=""
NETS=()
DIAGNOSE=0
REPEAT=1
GRID=dp2xpp2
TIMED=0
SC=""
CB="--cb"
while [ $# -gt 0 ]; do
  case $1 in
  --quick) STEPS=30 EVAL_BATCHES=4 ;;
  --steps) STEPS=$2 && shift ;;
  --out) OUT=$2 && shift ;;
  --net) NETS+=("$2") && shift ;;
  --diagnose) DIAGNOSE=1 ;;
  --repeat) REPEAT=$2 && shift ;;
  --grid) GRID=$2 && shift ;;
  --timed-steps) TIMED=$2 && shift ;;
  --sc-flags) SC=$2 && shift ;;
  --cb-flags) CB=$2 && shift ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
  *) echo "ablation.sh: unknown option $1 (see --help)" >&2 && exit 2 ;;
  esac
  shift
done
[ ${#NETS[@]} -gt 0 ] || NETS=(bw=1Gbit,lat=1ms off)
if [ "$TIMED" -gt 0 ] && [[ " ${NETS[*]} " != *" off "* ]]; then NETS+=(off); fi
case $GRID in
dp2xpp2) PP=2 PARTITION=3,3 MICRO=2 ;;
dp2xpp4) PP=4 PARTITION=2,1,1,2 MICRO=4 ;;
*) echo "ablation.sh: --grid $GRID: expected dp2xpp2 or dp2xpp4" >&2 && exit 2 ;;
esac
NP=$((2 * PP))
SC=${SC:-"--sc-stages $((PP / 2))"}
[ -x "$BP" ] || { echo "ablation.sh: no bagpipe binary at $BP (build first, or set BAGPIPE_BIN)" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d /tmp/bp_occ_ablation.XXXXXX)}
mkdir -p "$OUT"

# The model: a gpt of 4 layers, 256 channels (3.3 M parameters), 8 sequences of
# 32 bytes per step in 2 micro-batches, cut 3,3 (embedding + 2 layers | 2 layers +
# head) so that every run has the same stages (--grid dp2xpp4: 4 micro-batches,
# cut 2,1,1,2). Fixed samples: STEPS x 8. AdamW with
# a linear warm-up over the first 10% of the steps, cosine decay and the gradient
# norm clipped to 1: without them the loss spikes now and then (to 10 nats), and
# where a run happens to spike decides its final loss more than what is compared.
MODEL=(--model gpt --data kjv --layers 4 --embd 256 --heads 4 --seq-len 32 --batch 8 --dp 2
  --pp "$PP" --partition "$PARTITION" --micro-batches "$MICRO" --schedule 1f1b --lr 1e-3 --lr-schedule cosine
  --clip 1 --seed 1234 --progress none --log-every 10)
# steps N: the options that depend on the run's length
steps() { echo --steps "$1" --warmup $(($1 / 10)) --eval-every "$1" --eval-batches "$EVAL_BATCHES"; }

CONFIGS=(
  "baseline|"
  "CB|$CB"
  "FE|--fused-embedding-sync"
  "SC|$SC"
  "CB+FE|$CB --fused-embedding-sync"
  "CB+FE+SC|$CB --fused-embedding-sync $SC"
  "FE+SC|--fused-embedding-sync $SC"
  "CB without LEP|$CB --no-lep"
)
if [ "$DIAGNOSE" = 1 ]; then
  CONFIGS+=("SC on all stages|--sc-stages $PP")
fi

MPI=(mpirun)
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  MPI+=(--oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
    --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1)
  [ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
fi
export OPENBLAS_NUM_THREADS=1

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cpus: $(nproc); grid: $GRID; steps: $STEPS; eval batches: $EVAL_BATCHES; repeat: $REPEAT; timed steps on emulated networks: $TIMED"
  echo "CB: $CB; SC: $SC"
  echo "model: ${MODEL[*]}"
} >"$OUT/about.txt"
: >"$OUT/runs.tsv"
n=0
total=$((${#NETS[@]} * ${#CONFIGS[@]} * REPEAT))
for r in $(seq 1 "$REPEAT"); do
  for net in "${NETS[@]}"; do
    for c in "${CONFIGS[@]}"; do
      name=${c%%|*}
      read -ra flags <<<"${c#*|}"
      n=$((n + 1))
      role=full len=$STEPS
      if [ "$TIMED" -gt 0 ] && [ "$net" != off ]; then role=timed len=$TIMED; fi
      dir="$OUT/run$(printf %03d $n)"
      load0=$(cut -d' ' -f1 /proc/loadavg)
      t0=$(date +%s)
      printf '[%d/%d] net %s, %s ... ' "$n" "$total" "$net" "$name" >&2
      # shellcheck disable=SC2046 # steps's words are options
      if ! nice -n 5 "${MPI[@]}" -np "$NP" "$BP" train "${MODEL[@]}" $(steps "$len") --net "$net" "${flags[@]}" \
        --out "$dir" >"$dir.log" 2>&1; then
        echo "failed:" >&2
        tail -n 5 "$dir.log" >&2
        exit 1
      fi
      load1=$(cut -d' ' -f1 /proc/loadavg)
      echo "$(($(date +%s) - t0)) s (load $load0 -> $load1)" >&2
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$net" "$name" "$dir/metrics.jsonl" "$load0" "$load1" "$role" \
        >>"$OUT/runs.tsv"
    done
  done
done

python3 "$ROOT/bench/occ/table.py" "$OUT"
echo "runs and table: $OUT" >&2
