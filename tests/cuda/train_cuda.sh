#!/usr/bin/env bash
# bagpipe train --device cuda end to end against the same runs on the CPU (fixed seed,
# 20 steps of a small gpt): one rank, 2 ranks sharing the GPU (allreduce, bytegrad,
# easgd, staged through host copies), two pipeline stages (gpipe, 1f1b) and AvgPipe,
# bf16 on one rank; the step losses within 2% of the CPU's (the GPU's products run on
# TF32 tensor cores). A checkpoint written on the GPU resumes on the CPU and one written
# on the CPU resumes on the GPU; sample --device cuda continues a prompt from it.
# Skipped (77) without a GPU.
source "$(dirname "$0")/../lib.sh"
if [ "${BP_CUDA_BUILT:-OFF}" != ON ] || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIPPED: no GPU"
  exit 77
fi
S=(--layers 2 --embd 32 --heads 2 --seq-len 32 --batch 8 --steps 20 --eval-every 10
   --eval-batches 2 --checkpoint-every 10 --progress none --data "$TEXT" --seed 3)
losses() { grep '"type":"step"' "$1/metrics.jsonl" | sed -E 's/.*"loss":([^,]+),.*/\1/'; }
# close NAME A B: the step losses of runs A and B within 2% of each other.
close() {
  local worst
  worst=$(paste <(losses "$2") <(losses "$3") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $2; if (r > m) m = r } END { print m + 0 }')
  [ "$(losses "$2" | wc -l)" -eq "$(losses "$3" | wc -l)" ] || fail "$1: step counts differ"
  awk -v w="$worst" 'BEGIN { exit !(w <= 0.02) }' || fail "$1: losses differ by $worst"
  echo "$1: worst step loss rel $worst"
}
# both NAME W OPTIONS...: the run on the CPU and on the GPU, compared.
both() {
  local name=$1 w=$2
  shift 2
  launch "$w" "$BP" train "${S[@]}" "$@" --out "$WORK/$name-cpu" >/dev/null 2>"$WORK/err" ||
    fail "$name on the cpu: $(cat "$WORK/err")"
  launch "$w" "$BP" train "${S[@]}" "$@" --device cuda --out "$WORK/$name-gpu" >/dev/null \
    2>"$WORK/err" || fail "$name on the GPU: $(cat "$WORK/err")"
  close "$name" "$WORK/$name-gpu" "$WORK/$name-cpu"
}
both one 1
both allreduce 2 --dp 2 --dp-algo allreduce
both bytegrad 2 --dp 2 --dp-algo bytegrad
both easgd 2 --dp 2 --dp-algo easgd
both gpipe 2 --pp 2 --schedule gpipe --micro-batches 4
both 1f1b 2 --pp 2 --schedule 1f1b --micro-batches 4
both avgpipe 1 --pipelines 2 --micro-batches 2
launch 1 "$BP" train "${S[@]}" --device cuda --dtype bf16 --out "$WORK/bf16" >/dev/null \
  2>"$WORK/err" || fail "bf16: $(cat "$WORK/err")"
awk -v a="$(losses "$WORK/bf16" | tail -1)" -v b="$(losses "$WORK/one-cpu" | tail -1)" \
  'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d / b <= 0.05) }' || fail "bf16: final loss far from the cpu's"

# A GPU checkpoint resumed on the CPU, a CPU checkpoint resumed on the GPU.
launch 1 "$BP" train "${S[@]}" --resume "$WORK/one-gpu/ckpt-00000010" --out "$WORK/g2c" \
  >/dev/null 2>"$WORK/err" || fail "resume of the GPU's checkpoint on the cpu: $(cat "$WORK/err")"
launch 1 "$BP" train "${S[@]}" --device cuda --resume "$WORK/one-cpu/ckpt-00000010" \
  --out "$WORK/c2g" >/dev/null 2>"$WORK/err" || fail "resume on the GPU: $(cat "$WORK/err")"
[ "$(losses "$WORK/g2c" | wc -l)" -eq 10 ] || fail "resume on the cpu: not 10 steps"
[ "$(losses "$WORK/c2g" | wc -l)" -eq 10 ] || fail "resume on the GPU: not 10 steps"
out=$("$BP" sample --ckpt "$WORK/one-gpu" --device cuda --length 20 --top-k 1) ||
  fail "sample --device cuda failed"
[ "${#out}" -ge 20 ] || fail "sample --device cuda wrote '$out'"
echo "sample --device cuda: $out"
