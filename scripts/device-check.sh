#!/usr/bin/env bash
# The GPU check, one command on a machine with one NVIDIA GPU (about 16 cores, under 8
# minutes): build with CUDA, run the tests labelled cuda (and the CLI's --device test),
# then the GPU benchmark (bench/gpu/run.py: bagpipe vs PyTorch eager and torch.compile,
# MinMaxUInt8's bandwidth, the default gpt trained on the GPU and on the CPU), and print
# one table. Where the machine lacks Open MPI, OpenBLAS or cmocka, it uses the .deb files
# of .devdeps/ (scripts/device-deps.sh, run where apt works; carry .devdeps with the
# call). Logs and the JSON results go to $OUT (or /tmp/bp-device-check).
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
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-8} PYTHONUNBUFFERED=1
nvidia-smi -L 2>/dev/null | head -2

stamp "build (CUDA on)"
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DBP_CUDA=ON "${BP_CMAKE_DEPS[@]}" \
  >"$OUTDIR/configure.log" 2>&1 || { tail -20 "$OUTDIR/configure.log"; exit 1; }
cmake --build build-cuda -j "$(nproc)" >"$OUTDIR/build.log" 2>&1 || { grep -E "error|Error" -A3 "$OUTDIR/build.log" | head -40; exit 1; }

stamp "tests labelled cuda, and cli_device"
(cd build-cuda && ctest -L cuda -R . --output-on-failure --timeout 300 >"$OUTDIR/ctest.log" 2>&1;
 ctest -R '^cli_device$' --output-on-failure >>"$OUTDIR/ctest.log" 2>&1)
grep -E "^ *[0-9]+/[0-9]+ Test" "$OUTDIR/ctest.log" | sed 's/^ *//' >"$OUTDIR/tests.txt"
# each comparison line the cuda tests printed, for the record
grep -hE "rel [0-9.e+-]+ \(tol|FAIL|SKIPPED|bytes equal|floats equal|rejected|path\)" \
  "$OUTDIR/ctest.log" >"$OUTDIR/comparisons.txt" || true

stamp "benchmark"
text=.devdeps/kjv.txt
[ -s "$text" ] || text=${XDG_CACHE_HOME:-$HOME/.cache}/bagpipe/kjv.txt
# nothing starts after 7.5 minutes from the start: the whole check stays under 8
args=(--bin build-cuda/bench/gpu/gpu_bench --json "$OUTDIR/gpu.json" --deadline $((t0 + 450)))
[ -s "$text" ] && args+=(--text "$text")
[ $QUICK = 1 ] && args+=(--no-compile --train-steps 200)
python3 bench/gpu/run.py "${args[@]}" >"$OUTDIR/bench.txt" 2>"$OUTDIR/bench.err"

stamp "done"
echo
echo "== bagpipe device check ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(nproc) cores, $(($(date +%s) - t0)) s) =="
sed 's/^/test  /' "$OUTDIR/tests.txt"
grep -c "FAIL" "$OUTDIR/comparisons.txt" | sed 's/^/comparisons failed: /'
cat "$OUTDIR/bench.txt"
[ -s "$OUTDIR/bench.err" ] && tail -5 "$OUTDIR/bench.err"
# on a GPU machine a skipped cuda test is a failure too (no GPU seen)
! grep -qE "\*\*\*Failed|Skipped|Not Run|Timeout" "$OUTDIR/tests.txt"
