#!/usr/bin/env bash
# AvgPipe with own batches against the best of gpipe and 1f1b at the same batch per
# pipeline, on 2 stages (2 ranks) under an emulated network, flushing every step
# (avgpipe2) and only where the replicas meet (avgpipe2nf, --avgpipe-flush average:
# the local steps between averagings as one stream; avgpipe2afp4: the same with advance
# forward propagation, 4 forwards ahead, as AvgPipe schedules), then the simulator's prediction
# for deeper pipelines. Prints per network and configuration: median
# samples/s, its ratio to the better plain schedule, and the training time (the steps
# x the median step time, evaluation excluded) to reach the validation loss 1f1b
# reaches at half its steps; and the bound of each run: the samples per second it
# would reach if its busiest stage never waited (its samples over that stage's
# forward, backward and inline update time), against the same best plain schedule.
# Then the same time to a loss over a longer run (LONG_STEPS, 1f1b and avgpipe2afp4:
# their losses do not depend on the network, so they train once without emulation
# and each network's median step time prices their steps). Environment: STEPS (80),
# LONG_STEPS (400; 0: none), MICRO (4), NETS, BAGPIPE, OUT, REPORT_ONLY (set: print
# the tables of the runs already in OUT).
set -euo pipefail
cd "$(dirname "$0")/../.."
BP=${BAGPIPE:-build/bagpipe}
STEPS=${STEPS:-80}
LONG_STEPS=${LONG_STEPS:-400}
MICRO=${MICRO:-4}
OUT=${OUT:-$(mktemp -d /tmp/bp_avgpipe_own.XXXXXX)}
mkdir -p "$OUT"
NETS=${NETS:-"bw=1Gbit,lat=1ms bw=100Mbit,lat=5ms"}
export OPENBLAS_NUM_THREADS=1
COMMON=(--batch 16 --micro-batches "$MICRO" --pp 2 --steps "$STEPS" --eval-every 10 --eval-batches 4
  --progress none --log-every 1)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# median samples/s of a run's steps after the first 5 (items_per_s / seq-len 64)
rate() { grep '"type":"step"' "$1" | sed -nE 's/.*"items_per_s":([0-9.eE+-]+).*/\1/p' |
  tail -n +6 | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)] / 64}'; }
# samples/s with the busiest stage never waiting: the run's samples over that stage's
# busy seconds (the stages record); $2: samples per step
bound() { grep '"type":"stages"' "$1" | sed -nE 's/.*"busy_s":\[([^]]*)\].*/\1/p' |
  awk -F, -v n="$STEPS" -v b="$2" '{m = 0; for (i = 1; i <= NF; i++) if ($i > m) m = $i; print n * b / m}'; }
# a configuration's options, and the samples one of its steps trains on
flags() {
  case $1 in
    avgpipe2) echo --schedule 1f1b --pipelines 2 --avgpipe-flush step ;;
    avgpipe2nf) echo --schedule 1f1b --pipelines 2 --avgpipe-flush average ;;
    avgpipe2afp4) echo --schedule afp:4 --pipelines 2 --avgpipe-flush average ;;
    *) echo --schedule "$1" ;;
  esac
}
samples_per_step() { [[ $1 == avgpipe* ]] && echo 32 || echo 16; }
# val_loss at a step
val_at() { grep '"type":"eval"' "$1" | sed -nE "s/.*\"step\":$2,\"val_loss\":([0-9.eE+-]+).*/\1/p"; }
# median step seconds of a run (after the first 5 steps)
step_s() { grep '"type":"step"' "$1" | sed -nE 's/.*"step_ms":([0-9.eE+-]+).*/\1/p' |
  tail -n +6 | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)] / 1000}'; }
# training seconds to the first evaluation at or below $2: its step x the median step
# (a step stalled by the machine's other jobs would otherwise dominate), or "-";
# gpipe's and 1f1b's losses differ by float rounding, hence the 1e-5 tolerance
time_to() {
  local at
  at=$(grep '"type":"eval"' "$1" | sed -nE 's/.*"step":([0-9]+),"val_loss":([0-9.eE+-]+).*/\1 \2/p' |
    awk -v t="$2" '$2 <= t * (1 + 1e-5) {print $1; exit}')
  [ -n "$at" ] && awk -v n="$at" -v s="$(step_s "$1")" 'BEGIN {printf "%.1f (step %d)", n * s, n}' ||
    printf -- "-"
}

for net in $NETS; do
  for cfg in gpipe 1f1b avgpipe2 avgpipe2nf avgpipe2afp4; do
    [ -n "${REPORT_ONLY:-}" ] && continue
    read -ra opts <<<"$(flags "$cfg")"
    scripts/mpirun.sh -n 2 "$BP" train "${COMMON[@]}" "${opts[@]}" --net "$net" \
      --out "$OUT/$net/$cfg" >/dev/null 2>"$OUT/err" || { cat "$OUT/err"; exit 1; }
  done
  target=$(val_at "$OUT/$net/1f1b/metrics.jsonl" $((STEPS / 2)))
  g=$(rate "$OUT/$net/gpipe/metrics.jsonl"); f=$(rate "$OUT/$net/1f1b/metrics.jsonl")
  best=$(awk -v a="$g" -v b="$f" 'BEGIN {print (a > b ? a : b)}')
  echo "network $net: target val_loss $target (1f1b at step $((STEPS / 2)))"
  printf "  %-12s %10s %8s %8s %20s\n" config samples/s ratio bound s_to_target
  for cfg in gpipe 1f1b avgpipe2 avgpipe2nf avgpipe2afp4; do
    m="$OUT/$net/$cfg/metrics.jsonl"
    r=$(rate "$m") n=$(samples_per_step "$cfg")
    printf "  %-12s %10.1f %8.2f %8.2f %20s\n" "$cfg" "$r" "$(awk -v r="$r" -v b="$best" 'BEGIN {print r / b}')" \
      "$(awk -v r="$(bound "$m" "$n")" -v b="$best" 'BEGIN {print r / b}')" "$(time_to "$m" "$target")"
  done
done

# The longer run: steps to the loss 1f1b reaches at half of LONG_STEPS, priced at each
# network's median step time.
if [ "$LONG_STEPS" -gt 0 ]; then
  for cfg in 1f1b avgpipe2afp4; do
    [ -n "${REPORT_ONLY:-}" ] && continue
    read -ra opts <<<"$(flags "$cfg")"
    scripts/mpirun.sh -n 2 "$BP" train "${COMMON[@]}" --steps "$LONG_STEPS" --eval-every $((LONG_STEPS / 16)) \
      "${opts[@]}" --out "$OUT/long/$cfg" >/dev/null 2>"$OUT/err" || { cat "$OUT/err"; exit 1; }
  done
  target=$(val_at "$OUT/long/1f1b/metrics.jsonl" $((LONG_STEPS / 2)))
  echo "$LONG_STEPS steps: target val_loss $target (1f1b at step $((LONG_STEPS / 2)))"
  printf "  %-12s %8s %8s %s\n" config steps samples "seconds on each network"
  for cfg in 1f1b avgpipe2afp4; do
    at=$(grep '"type":"eval"' "$OUT/long/$cfg/metrics.jsonl" |
      sed -nE 's/.*"step":([0-9]+),"val_loss":([0-9.eE+-]+).*/\1 \2/p' |
      awk -v t="$target" '$2 <= t * (1 + 1e-5) {print $1; exit}')
    n=$(samples_per_step "$cfg")
    printf "  %-12s %8s %8s" "$cfg" "${at:--}" "$([ -n "$at" ] && echo $((at * n)) || echo -)"
    for net in $NETS; do
      printf "  %s %s" "$net" "$([ -n "$at" ] && awk -v a="$at" -v s="$(step_s "$OUT/$net/$cfg/metrics.jsonl")" \
        'BEGIN {printf "%.1f", a * s}' || echo -)"
    done
    echo
  done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# The simulator at the paper's kind of scale: a 1024-channel gpt with 2 blocks per
# stage on S stages of a V100-like device (15.7 TFLOP/s, 900 GB/s, efficiency 0.5),
# 10 Gbit/s links, 4 micro-batches of 4 samples per pipeline: samples/s of the best
# plain schedule and AvgPipe's ratio to it at N = 2 and 4, flushing every step and
# (nf) only at the averaging every 4 steps.
echo "simulated (device model): samples/s and ratio to the best of gpipe and 1f1b"
printf "  %3s %10s %8s %8s %8s %8s\n" S plain N=2 N=2nf N=4 N=4nf
for S in 4 8 16; do
  sim() { "$BP" simulate --pp "$S" --layers $((2 * S - 2)) --embd 1024 --heads 16 --seq-len 512 \
    --vocab 50257 --batch 16 --micro-batches 4 --device-flops 15.7e12 --device-bw 9e11 \
    --net bw=10Gbit,lat=10us "$@" | awk '$1 == "samples_per_s" {print $2}'; }
  g=$(sim --schedule gpipe); f=$(sim --schedule 1f1b)
  a2=$(sim --schedule 1f1b --pipelines 2 --avgpipe-flush step)
  n2=$(sim --schedule 1f1b --pipelines 2 --avgpipe-flush average)
  a4=$(sim --schedule 1f1b --pipelines 4 --avgpipe-flush step)
  n4=$(sim --schedule 1f1b --pipelines 4 --avgpipe-flush average)
  awk -v S="$S" -v g="$g" -v f="$f" -v a2="$a2" -v n2="$n2" -v a4="$a4" -v n4="$n4" 'BEGIN {
    b = g > f ? g : f
    printf "  %3d %10.2f %7.2fx %7.2fx %7.2fx %7.2fx\n", S, b, a2 / b, n2 / b, a4 / b, n4 / b }'
done
