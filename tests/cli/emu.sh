#!/usr/bin/env bash
# --device emu:GPU, the emulated device (core/backend_emu.h): every configuration of
# scripts/compare-losses.sh (every dp algorithm, async and diloco included, every
# schedule, tp, a 3D grid, AvgPipe, each Optimus-CC flag, hierarchical, mlp) runs on
# it to the end; its metrics say that it is emulated, at which dilation, and that
# the loss is absent (null, while the finite checks pass); what it cannot do is
# refused with one line: checkpoints, a model whose memory exceeds the device's
# (the need and the capacity).
# Nothing here depends on the machine's speed: the timeline's arithmetic is
# tests/core/test_backend_emu.c's.
source "$(dirname "$0")/lib.sh"
E=("${TINY[@]}" --data "$TEXT" --device emu:a100)

refused 1 "option --checkpoint-every: the emulated A100-SXM4-40GB computes no values" -- \
  "${E[@]}" --checkpoint-every 1
refused 2 "option --resume: the emulated A100-SXM4-40GB computes no values" -- \
  "${E[@]}" --resume "$WORK/none"
refused 1 "option --dilation: needs --device emu:GPU" -- "${TINY[@]}" --data "$TEXT" --dilation 4
refused 1 "option --dtype bf16: the V100-SXM2-32GB computes no bf16" -- \
  "${TINY[@]}" --data "$TEXT" --device emu:v100 --dtype bf16
expect 2 "option --device: no data sheet of a GPU called 'tpu9' \(v100, a100, h100, h200\)" -- \
  "$BP" train --device emu:tpu9
# Activations of 60000 x 256 rows: far past a V100's 32 GiB, refused as a GPU's
# out-of-memory would end the run, though no byte of it is ever held here.
expect 1 "emulated V100-SXM2-32GB: out of memory allocating activations: needs at least [0-9.]+ GiB, the device has 32.00 GiB" -- \
  "$BP" train --device emu:v100 --layers 1 --embd 64 --heads 2 --seq-len 256 --batch 60000 \
  --data "$TEXT" --steps 2 --progress none --out "$WORK/oom"

# The metrics: emulated, its dilation, the loss absent; no checkpoint written; the
# trace's times divided by the dilation.
"$BP" train "${E[@]}" --steps 4 --log-every 1 --dilation 8 --out "$WORK/m" --trace "$WORK/m/trace.json" \
  >/dev/null 2>"$WORK/err" ||
  fail "a run on emu:a100 failed: $(cat "$WORK/err")"
M="$WORK/m/metrics.jsonl"
grep -q '"type":"config",.*"device":"emulated A100-SXM4-40GB","dilation":8,.*"loss":"absent' "$M" ||
  fail "the config record does not say emulated, dilation 8, loss absent: $(head -1 "$M")"
[ "$(grep -c '"type":"step","step":[0-9]*,"loss":null,' "$M")" -eq 4 ] || fail "step losses not null: $(cat "$M")"
grep -q 'device: emulated A100-SXM4-40GB, dilation 8 (--dilation)' "$WORK/err" ||
  fail "the header does not state the device and dilation: $(cat "$WORK/err")"
if ls -d "$WORK/m"/ckpt-* >/dev/null 2>&1; then fail "a checkpoint was written on an emulated device"; fi
# The trace is in the device's time, and says so.
grep -q '"dilation":8,"times":"emulated device: wall time / dilation"' "$WORK/m/trace.json" ||
  fail "the trace does not say its times are the device's: $(tail -2 "$WORK/m/trace.json")"
# Without --dilation the header states the one chosen.
"$BP" train "${E[@]}" --steps 1 --out "$WORK/d" >/dev/null 2>"$WORK/err" || fail "emu run failed"
grep -qE 'dilation [0-9]+ \(chosen from the configuration\)' "$WORK/err" ||
  fail "no chosen dilation in the header: $(cat "$WORK/err")"

# Every configuration of compare-losses runs to its last step.
export ONLY='^(async|diloco|diloco-minmax4-rs|streaming-diloco|allreduce|allreduce-buckets|bytegrad|qadam|decentralized-shift_one|decentralized-all|lp-decentralized|powersgd|easgd|hierarchical|gpipe|1f1b|afp1|tp2|grid-dp2-pp2-tp2|avgpipe|avgpipe-dp2|cb|cb-no-lep|cb-epilogue-only|fused-embedding-sync|sc-stages|clip-accum|mlp|mlp-pp2)$'
EXTRA="--device emu:a100 --dilation 4" "$BP_SOURCE_DIR/scripts/compare-losses.sh" record "$BP" "$WORK/emu" \
  >"$WORK/emu.txt" 2>&1 || fail "recording on emu: $(cat "$WORK/emu.txt")"
if grep -q FAILED "$WORK/emu.txt"; then fail "on emu:a100: $(grep FAILED "$WORK/emu.txt")"; fi
[ "$(grep -c ': 20 steps, 0 evals' "$WORK/emu.txt")" -eq 29 ] ||
  fail "not every configuration ran its 20 steps on emu: $(cat "$WORK/emu.txt")"
