#!/usr/bin/env bash
# --device cuda where no GPU can be used: train (on 1 and 2 ranks), sample and tune stop
# before any work with one line that says why, and the usage exit code. Which reason
# depends on the build (BP_CUDA_BUILT, set by ctest) and on the machine.
source "$(dirname "$0")/lib.sh"

if [ "${BP_CUDA_BUILT:-OFF}" != ON ]; then
  why="option --device cuda: this bagpipe was built without CUDA"
elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  why="option --device cuda: no usable CUDA GPU on this machine"
else
  why="option --device cuda: bagpipe [a-z]+ does not run on the GPU yet"
fi

refused 1 "$why" -- "${TINY[@]}" --data "$TEXT" --device cuda
refused 2 "$why" -- "${TINY[@]}" --data "$TEXT" --device cuda
expect 2 "$why" -- "$BP" sample --ckpt "$WORK/none" --device cuda
expect 2 "$why" -- "$BP" tune "${TINY[@]}" --data "$TEXT" --pp 2 --device cuda
# The GPU's options need the GPU; a bad device is a bad choice.
refused 1 "option --dtype: needs --device cuda" -- "${TINY[@]}" --data "$TEXT" --dtype bf16
refused 1 "option --gpu-comm: needs --device cuda" -- "${TINY[@]}" --data "$TEXT" --gpu-comm nccl
expect 2 "option --device: 'tpu' is not one of cpu\|cuda" -- "$BP" train --device tpu
# --device cpu is the default, spelled out.
"$BP" train "${TINY[@]}" --data "$TEXT" --steps 2 --device cpu --out "$WORK/cpu" >/dev/null \
  || fail "--device cpu must train"
