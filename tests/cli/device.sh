#!/usr/bin/env bash
# --device cuda: what does not run on the GPU yet is refused before any work with one
# line naming it, on any build and machine; where no GPU can be used, train (on 1 and 2
# ranks), sample and tune stop before any work with one line that says why, and the
# usage exit code. Which reason depends on the build (BP_CUDA_BUILT, set by ctest) and
# on the machine; with a GPU, scripts/device-check.sh trains on it.
source "$(dirname "$0")/lib.sh"

refused 1 "option --device cuda: --model mlp does not run on the GPU yet" -- --model mlp --device cuda
refused 2 "option --device cuda: tensor parallelism \(--tp 2\) does not run on the GPU yet" -- \
  "${TINY[@]}" --data "$TEXT" --tp 2 --device cuda
refused 2 "option --dtype bf16: runs on one pipeline stage only" -- \
  "${TINY[@]}" --data "$TEXT" --pp 2 --device cuda --dtype bf16
refused 1 "option --gpu-comm nccl: device buffers travel through host memory so far" -- \
  "${TINY[@]}" --data "$TEXT" --device cuda --gpu-comm nccl

if [ "${BP_CUDA_BUILT:-OFF}" != ON ]; then
  why="option --device cuda: this bagpipe was built without CUDA"
elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  why="option --device cuda: no usable CUDA GPU on this machine"
else
  why=""
fi

if [ -n "$why" ]; then
  refused 1 "$why" -- "${TINY[@]}" --data "$TEXT" --device cuda
  refused 2 "$why" -- "${TINY[@]}" --data "$TEXT" --device cuda
  expect 2 "$why" -- "$BP" sample --ckpt "$WORK/none" --device cuda
  expect 2 "$why" -- "$BP" tune "${TINY[@]}" --data "$TEXT" --pp 2 --device cuda
fi
# --gpu-comm needs the GPU (--dtype bf16 runs on the CPU too: cpu_bf16.sh); a bad
# device is a bad choice.
refused 1 "option --gpu-comm: needs --device cuda" -- "${TINY[@]}" --data "$TEXT" --gpu-comm nccl
expect 2 "option --device: 'tpu' is not one of cpu\|cuda" -- "$BP" train --device tpu
# --device cpu is the default, spelled out.
"$BP" train "${TINY[@]}" --data "$TEXT" --steps 2 --device cpu --out "$WORK/cpu" >/dev/null \
  || fail "--device cpu must train"
