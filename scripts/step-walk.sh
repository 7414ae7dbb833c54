#!/usr/bin/env bash
# The walk of the step: which source files one training step passes through and how
# often control climbs back up from a lower module into a higher one (a hook or
# callback), measured on the running program, so that a refactor of the step can be
# compared before and after by the same method.
#
#   scripts/step-walk.sh [ROOT]     ROOT: the step's entry (default bp_stage_steps)
#
# Builds bagpipe into build-walk/ (-O0, no inlining, -finstrument-functions, CPU
# only), preloads scripts/step-walk/hooks.c, which records every distinct pair of
# bagpipe functions (caller, callee) called on any thread while the main thread is
# inside ROOT, runs the configurations below for four steps each, and prints
# scripts/step-walk/walk.py's count of their union: files visited, climbs (a call
# into a file that is above the caller's by the object files' symbol references),
# calls down and sideways calls, each a distinct caller-callee pair. Set CONFIGS to
# run other ones ("ranks|options;..."). Slow (an unoptimized build): minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1
root=${1:-bp_stage_steps}
build=build-walk
work=$(mktemp -d /tmp/step-walk.XXXXXX)
trap 'rm -rf "$work"' EXIT

CONFIGS=${CONFIGS:-"4|--dp 2 --pp 2 --partition 2,2 --micro-batches 2 --bucket-mb 0.01 --clip 1;\
2|--dp-algo allreduce --bucket-mb 0.01 --micro-batches 2;\
2|--pp 2 --partition 2,2 --pipelines 2 --micro-batches 2;\
2|--tp 2;\
4|--dp 2 --pp 2 --partition 2,2 --micro-batches 2 --cb --cb-rank 2 --fused-embedding-sync;\
2|--dp-algo decentralized;\
2|--dp-algo powersgd --rank 2 --powersgd-warmup 1 --bucket-mb 0.01;\
2|--dp-algo easgd --ea-period 1;\
2|--dp-algo async --sync-ms 5;\
2|--dp-algo diloco --inner-steps 2;\
2|--dp-algo streaming-diloco --inner-steps 2 --fragments 2"}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DBP_CUDA=OFF \
  -DCMAKE_C_FLAGS="-O0 -g -fno-inline -finstrument-functions" >/dev/null
cmake --build "$build" --target bagpipe -j "$(nproc)" >/dev/null
cc -O2 -shared -fPIC -o "$work/hooks.so" scripts/step-walk/hooks.c -ldl
bin=$build/bagpipe
offset=$(nm "$bin" | awk -v f="$root" '$3 == f { print $1 }')
[ -n "$offset" ] || { echo "step-walk: no function $root in $bin" >&2; exit 1; }

IFS=';' read -ra configs <<<"$CONFIGS"
i=0
for c in "${configs[@]}"; do
  IFS='|' read -r ranks opts <<<"$c"
  i=$((i + 1))
  # shellcheck disable=SC2086
  scripts/mpirun.sh -np "$ranks" -x LD_PRELOAD="$work/hooks.so" -x BP_WALK_ROOT="$offset" \
    -x BP_WALK_OUT="$work/edges$i" "$bin" train --layers 2 --embd 32 --heads 2 --seq-len 32 \
    --batch 8 --steps 4 --eval-every 0 --progress none --seed 7 $opts --out "$work/run$i" \
    >"$work/run$i.log" 2>&1 || { cat "$work/run$i.log" >&2; exit 1; }
done
python3 scripts/step-walk/walk.py "$build" "$bin" "$work"/edges*
