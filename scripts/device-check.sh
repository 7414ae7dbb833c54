#!/usr/bin/env bash
# The GPU check, one command on a machine with one NVIDIA GPU (about 16 cores, under 8
# minutes): build with CUDA, run the tests labelled cuda (and the CLI's --device test);
# train the default gpt with `bagpipe train --device cuda` (exact fp32 products) against
# the same run on the CPU (1000 steps, validation loss within 1%), and 2 ranks sharing
# the GPU with allreduce and bytegrad against the CPU's losses (the staged path); sample
# from the GPU's checkpoint and resume it on the CPU; the compute model (a 303 M gpt's
# step on the GPU against the same run on the emulated GPU of its data sheet); then the
# GPU benchmark (bench/gpu/run.py: bagpipe vs PyTorch eager and torch.compile, the
# compute model phase by phase, MinMaxUInt8's bandwidth), and print one table. Where the
# machine lacks Open MPI, OpenBLAS or cmocka, it uses the .deb files of .devdeps/
# (scripts/device-deps.sh, run where apt works; carry .devdeps with the call). Logs and
# the JSON results go to $OUT (or /tmp/bp-device-check). Results of an H200:
# docs/results/gpu_h200.
#
#   scripts/device-check.sh            # everything
#   scripts/device-check.sh --quick    # no torch.compile, 200 training steps
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-/tmp/bp-device-check}
mkdir -p "$OUTDIR"
QUICK=0
[ "${1:-}" = --quick ] && QUICK=1
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
# shellcheck source=scripts/device-env.sh
source scripts/device-env.sh
# One OpenBLAS thread, as everywhere in the project: the CPU runs compared with the GPU's
# are small models, and 8 threads made the default gpt's step 270 ms on 16 cores.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} PYTHONUNBUFFERED=1
nvidia-smi -L 2>/dev/null | head -2

stamp "build (CUDA on)"
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DBP_CUDA=ON "${BP_CMAKE_DEPS[@]}" \
  >"$OUTDIR/configure.log" 2>&1 || { tail -20 "$OUTDIR/configure.log"; exit 1; }
# -k: a test that fails to build leaves the rest to check (its failure is reported)
BUILD_FAILED=0
cmake --build build-cuda -j "$(nproc)" -- -k >"$OUTDIR/build.log" 2>&1 || {
  BUILD_FAILED=1
  grep -E "error|Error" -A3 "$OUTDIR/build.log" | head -20
  [ -x build-cuda/bagpipe ] && [ -x build-cuda/bench/gpu/gpu_bench ] || exit 1
}

stamp "tests labelled cuda, and cli_device"
(cd build-cuda && ctest -L cuda -R . --output-on-failure --timeout 120 >"$OUTDIR/ctest.log" 2>&1;
 ctest -R '^cli_device$' --output-on-failure >>"$OUTDIR/ctest.log" 2>&1)
grep -E "^ *[0-9]+/[0-9]+ Test" "$OUTDIR/ctest.log" | sed 's/^ *//' >"$OUTDIR/tests.txt"
# each comparison line the cuda tests printed, for the record
grep -hE "rel [0-9.e+-]+ \(tol|FAIL|SKIPPED|bytes equal|floats equal|rejected|path\)" \
  "$OUTDIR/ctest.log" >"$OUTDIR/comparisons.txt" || true

text=.devdeps/kjv.txt
[ -s "$text" ] || text=${XDG_CACHE_HOME:-$HOME/.cache}/bagpipe/kjv.txt
[ -s "$text" ] || text=/usr/share/common-licenses/GPL-3
BP=build-cuda/bagpipe
STEPS=1000
[ $QUICK = 1 ] && STEPS=200
# val NAME: the last validation loss of run NAME; rel A B: |A - B| / B.
val() { grep '"type":"eval"' "$OUTDIR/$1/metrics.jsonl" | tail -1 | sed 's/.*"val_loss":\([^,}]*\).*/\1/'; }
rel() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.4f", d / b }'; }
# loss_rel A B: the largest relative difference of the step losses of runs A and B.
loss_rel() {
  paste <(grep '"type":"step"' "$OUTDIR/$1/metrics.jsonl" | sed 's/.*"loss":\([^,}]*\).*/\1/') \
        <(grep '"type":"step"' "$OUTDIR/$2/metrics.jsonl" | sed 's/.*"loss":\([^,}]*\).*/\1/') |
    awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $2; if (r > m) m = r } END { printf "%.4f", m }'
}
RESULTS=$OUTDIR/train.txt
: >"$RESULTS"
# check WHAT OK: one line of the table, and a failure remembered.
TRAIN_FAILED=0
check() {
  echo "$1 $([ "$2" = 1 ] && echo ok || echo FAIL)" >>"$RESULTS"
  [ "$2" = 1 ] || TRAIN_FAILED=1
}
within() { awk -v x="$1" -v t="$2" 'BEGIN { exit !(x <= t) }' && echo 1 || echo 0; }
run() { # run NAME RANKS ARGS...: bagpipe train, its log in $OUTDIR/NAME.log
  local name=$1 n=$2
  shift 2
  rm -rf "${OUTDIR:?}/$name"
  if [ "$n" = 1 ]; then
    "$BP" train --data "$text" --progress none --out "$OUTDIR/$name" "$@" >"$OUTDIR/$name.log" 2>&1
  else
    mpirun --allow-run-as-root --oversubscribe -n "$n" "$BP" train --data "$text" --progress none \
      --out "$OUTDIR/$name" "$@" >"$OUTDIR/$name.log" 2>&1
  fi || { echo "$name failed: $(tail -3 "$OUTDIR/$name.log")" >>"$RESULTS"; TRAIN_FAILED=1; }
}

stamp "bagpipe train --device cuda: the default gpt, $STEPS steps, against the CPU"
# The loss comparisons take exact fp32 products on the GPU: with TF32's (the default, as
# PyTorch's allow_tf32) the two trajectories part after about 10 steps, and nothing then
# tells rounding from a fault (docs/results/gpu_h200). cuBLAS reads this variable.
export NVIDIA_TF32_OVERRIDE=0
run gpu 1 --steps $STEPS --device cuda &
run cpu 1 --steps $STEPS
wait
[ -s "$OUTDIR/gpu/metrics.jsonl" ] || TRAIN_FAILED=1 # a failure in the background's subshell
if [ -s "$OUTDIR/gpu/metrics.jsonl" ] && [ -s "$OUTDIR/cpu/metrics.jsonl" ]; then
  r=$(rel "$(val gpu)" "$(val cpu)")
  check "gpt $STEPS steps: val loss GPU $(val gpu) CPU $(val cpu) rel $r (tol 0.01)" "$(within "$r" 0.01)"
  "$BP" sample --ckpt "$OUTDIR/gpu" --device cuda --length 40 --top-k 1 >"$OUTDIR/sample-gpu.txt" 2>&1
  check "sample --device cuda from the GPU's checkpoint: $(head -c 60 "$OUTDIR/sample-gpu.txt" | tr '\n' ' ')" \
    "$([ -s "$OUTDIR/sample-gpu.txt" ] && grep -qv "bagpipe:" "$OUTDIR/sample-gpu.txt" && echo 1 || echo 0)"
  ckpts=("$OUTDIR"/gpu/ckpt-*)
  last=${ckpts[${#ckpts[@]}-1]}
  run resumed-cpu 1 --steps $((STEPS + 20)) --resume "$last"
  check "the GPU's checkpoint resumed on the CPU" "$([ -s "$OUTDIR/resumed-cpu/metrics.jsonl" ] && echo 1 || echo 0)"
fi

stamp "2 ranks sharing the GPU (staged): allreduce and bytegrad against the CPU"
for algo in allreduce bytegrad; do
  run "gpu2-$algo" 2 --dp 2 --dp-algo "$algo" --steps 200 --device cuda
  run "cpu2-$algo" 2 --dp 2 --dp-algo "$algo" --steps 200
  if [ -s "$OUTDIR/gpu2-$algo/metrics.jsonl" ] && [ -s "$OUTDIR/cpu2-$algo/metrics.jsonl" ]; then
    r=$(loss_rel "gpu2-$algo" "cpu2-$algo")
    check "dp 2 $algo on one GPU: step losses within rel $r of the CPU's (tol 0.02)" "$(within "$r" 0.02)"
  fi
done

unset NVIDIA_TF32_OVERRIDE # the timings below with TF32, as users run

stamp "the compute model: bagpipe train on this GPU, on its emulated twin, and simulate"
# The 303 M gpt of the emulated AvgPipe study (docs/results/avgpipe_emu), one rank: the
# median step on the GPU against the same run on the emulated GPU of its data sheet
# (--device emu:GPU) and simulate's prediction; the bench's table below splits it into
# forward, backward and update.
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr 'A-Z' 'a-z')
sheet=$(build-cuda/bench/gpu/gpu_bench sheet "$gpu_name" 2>/dev/null || true)
MODEL=(--layers 24 --embd 1024 --heads 16 --seq-len 128 --batch 8 --eval-every 0 --no-final-checkpoint)
median() { grep '"type":"summary"' "$OUTDIR/$1/metrics.jsonl" | sed 's/.*"median_step_ms":\([^,}]*\).*/\1/'; }
if [ -n "$sheet" ]; then
  run model-gpu 1 "${MODEL[@]}" --steps 30 --device cuda
  run model-emu 1 "${MODEL[@]}" --steps 12 --device "emu:$sheet"
  "$BP" simulate "${MODEL[@]}" --device "emu:$sheet" >"$OUTDIR/model-sim.txt" 2>&1
  g=$(median model-gpu) e=$(median model-emu)
  p=$(awk '$1 == "compute_ms" { print $2 }' "$OUTDIR/model-sim.txt")
  if [ -n "$g" ] && [ -n "$e" ]; then
    echo "gpt 303M fp32 B 8 T 128: step $g ms on the GPU, $e ms on emu:$sheet, simulate's compute" \
      "$p ms; GPU / emulated $(awk -v a="$g" -v b="$e" 'BEGIN { printf "%.2f", a / b }')" >>"$RESULTS"
  else
    echo "the compute model's runs failed: $(tail -2 "$OUTDIR/model-gpu.log" "$OUTDIR/model-emu.log" | tr '\n' ' ')" >>"$RESULTS"
  fi
else
  echo "the compute model: no data sheet for '$gpu_name'" >>"$RESULTS"
fi

stamp "benchmark"
# nothing starts after 7 min 50 s from the start: the whole check stays under 8 minutes
args=(--bin build-cuda/bench/gpu/gpu_bench --json "$OUTDIR/gpu.json" --deadline $((t0 + 470)))
[ $QUICK = 1 ] && args+=(--no-compile)
python3 bench/gpu/run.py "${args[@]}" >"$OUTDIR/bench.txt" 2>"$OUTDIR/bench.err"

stamp "done"
echo
echo "== bagpipe device check ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(nproc) cores, $(($(date +%s) - t0)) s) =="
sed 's/^/test  /' "$OUTDIR/tests.txt"
grep -c "FAIL" "$OUTDIR/comparisons.txt" | sed 's/^/comparisons failed: /'
sed 's/^/train /' "$RESULTS"
cat "$OUTDIR/bench.txt"
[ -s "$OUTDIR/bench.err" ] && tail -5 "$OUTDIR/bench.err"
# on a GPU machine a skipped cuda test is a failure too (no GPU seen)
[ $BUILD_FAILED = 0 ] || echo "the build failed (build.log); the checks above ran on what built"
! grep -qE "\*\*\*Failed|Skipped|Not Run|Timeout" "$OUTDIR/tests.txt" && [ $TRAIN_FAILED = 0 ] &&
  [ $BUILD_FAILED = 0 ]
