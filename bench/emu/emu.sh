#!/usr/bin/env bash
# The emulated device (docs/manual/devices.md) measured here; a benchmark, not a test.
#   single   one rank of the GPT-2-small shape on emu:a100: the step against the
#            summary's modeled work and against `simulate --device emu:a100`'s compute
#   repeat   5 runs of one 8-rank configuration (dp 2 x pp 4, 1f1b) beside two busy
#            loops: the spread of their median steps
#   big      16 ranks, dp 4 x pp 4, 1f1b, emu:a100, 50 steps: the job's peak resident
#            memory (all ranks' RSS summed, sampled every 0.5 s) and the CPU share of
#            each rank (CPU time over wall time)
#   simulate up to 10 configurations: the emulated step against simulate's prediction
# Usage: bench/emu/emu.sh single|repeat|big|simulate|all   (BAGPIPE: the binary)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BP=${BAGPIPE:-$ROOT/build/bagpipe}
OUT=${OUT:-/tmp/bagpipe-emu}
export OPENBLAS_NUM_THREADS=1
mkdir -p "$OUT"
G=(--layers 12 --embd 768 --heads 12 --seq-len 1024 --data /usr/share/common-licenses/GPL-3
  --eval-every 0 --progress none --device emu:a100)
field() { grep '"type":"summary"' "$1" | grep -o "\"$2\":[0-9.e+-]*" | cut -d: -f2; }
predicted() { "$BP" simulate "$@" | awk '$1 == "step_ms" { print $2 }'; }
run() { # name ranks options...
  local name=$1 w=$2
  shift 2
  "$ROOT/scripts/mpirun.sh" -np "$w" "$BP" train "$@" --out "$OUT/$name" >/dev/null 2>"$OUT/$name.err"
}

single() {
  run single 1 "${G[@]}" --batch 8 --steps 12 --dilation 32
  local m w p
  m=$(field "$OUT/single/metrics.jsonl" median_step_ms)
  w=$(field "$OUT/single/metrics.jsonl" device_work_ms)
  p=$(predicted "${G[@]}" --batch 8)
  echo "single: step $m ms, modeled work $w ms ($(echo "$m / $w" | bc -l | cut -c1-6)x), simulate $p ms ($(echo "$m / $p" | bc -l | cut -c1-6)x)"
}

repeat() {
  local pids=() i
  for i in 1 2; do (while :; do :; done) & pids+=($!); done
  for i in 1 2 3 4 5; do
    run "repeat$i" 8 "${G[@]}" --layers 8 --batch 16 --dp 2 --pp 4 --micro-batches 4 --steps 10
    field "$OUT/repeat$i/metrics.jsonl" median_step_ms
  done | sort -n | awk '{ x[NR] = $1 } END { printf "repeat: %s ms .. %s ms, spread %.2f%%\n", x[1], x[NR], 100 * (x[NR] - x[1]) / x[int((NR + 1) / 2)] }'
  kill "${pids[@]}"
}

big() {
  run big 16 "${G[@]}" --batch 32 --dp 4 --pp 4 --micro-batches 8 --steps 50 &
  local job=$! peak=0 rss
  while kill -0 "$job" 2>/dev/null; do
    rss=$(ps -C bagpipe -o rss= | awk '{ s += $1 } END { print s + 0 }')
    [ "$rss" -gt "$peak" ] && peak=$rss
    ps -C bagpipe -o times=,etimes= >"$OUT/big.cpu" 2>/dev/null || true
    sleep 0.5
  done
  wait "$job"
  echo "big: peak resident memory of the job $((peak / 1024)) MiB; median step $(field "$OUT/big/metrics.jsonl" median_step_ms) ms"
  awk '$2 > 0 { printf "  rank cpu share %.3f\n", $1 / $2 }' "$OUT/big.cpu"
}

simulate() {
  local i=0 c
  while IFS= read -r c; do
    i=$((i + 1))
    read -ra o <<<"$c"
    local w=$(( $(echo "$c" | grep -o -- '--dp [0-9]*' | cut -d' ' -f2 || echo 1) ))
    w=$((w * $(echo "$c" | grep -o -- '--pp [0-9]*' | cut -d' ' -f2 || echo 1)))
    w=$((w * $(echo "$c" | grep -o -- '--tp [0-9]*' | cut -d' ' -f2 || echo 1)))
    run "sim$i" "$w" "${G[@]}" --layers 4 --steps 8 "${o[@]}"
    printf "simulate: %-60s emulated %8s ms  predicted %8s ms\n" "$c" \
      "$(field "$OUT/sim$i/metrics.jsonl" median_step_ms)" "$(predicted "${G[@]}" --layers 4 "${o[@]}")"
  done <<'EOF2'
--batch 8 --dp 1 --pp 1 --tp 1
--batch 16 --dp 2 --pp 1 --tp 1 --net bw=10Gbit,lat=20us
--batch 16 --dp 2 --pp 1 --tp 1 --dp-algo bytegrad --net bw=10Gbit,lat=20us
--batch 16 --dp 2 --pp 1 --tp 1 --dp-algo decentralized --net bw=10Gbit,lat=20us
--batch 16 --dp 1 --pp 2 --tp 1 --micro-batches 4 --schedule 1f1b --net bw=100Gbit,lat=5us
--batch 16 --dp 1 --pp 2 --tp 1 --micro-batches 4 --schedule gpipe --net bw=100Gbit,lat=5us
--batch 16 --dp 1 --pp 2 --tp 1 --micro-batches 2 --pipelines 2 --net bw=100Gbit,lat=5us
--batch 8 --dp 1 --pp 1 --tp 2 --net bw=100Gbit,lat=5us
--batch 16 --dp 2 --pp 2 --tp 1 --micro-batches 4 --cb --cb-rank 4 --net bw=10Gbit,lat=20us
--batch 16 --dp 2 --pp 2 --tp 1 --micro-batches 4 --net bw=10Gbit,lat=20us
EOF2
}

case ${1:-all} in
single | repeat | big | simulate) "$1" ;;
all) single; repeat; big; simulate ;;
*) sed -n '2,12p' "$0"; exit 2 ;;
esac
