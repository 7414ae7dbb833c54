#!/usr/bin/env bash
# Codecs on an emulated device (compress/codec.h): the device takes their passes, so
# a bytegrad step's modeled device work (the summary's device_work_ms, the sum of
# what the device ran, however fast the host is) exceeds allreduce's, which stages
# the same gradients and codes nothing, and powersgd's products show there too.
# Nothing here depends on the machine's speed: device_work_ms adds modeled times.
source "$(dirname "$0")/lib.sh"
E=("${TINY[@]}" --data "$TEXT" --device emu:v100 --dilation 2 --steps 3)

work() { # ALGO: the run's device work per step, in ms
  launch 2 "$BP" train "${E[@]}" --dp 2 --dp-algo "$1" --out "$WORK/$1" >/dev/null 2>"$WORK/err" ||
    fail "$1 on emu:v100 failed: $(cat "$WORK/err")"
  field "$WORK/$1/metrics.jsonl" summary device_work_ms
}
base=$(work allreduce)
for algo in bytegrad powersgd; do
  w=$(work $algo)
  awk -v w="$w" -v b="$base" 'BEGIN { exit !(w > b) }' ||
    fail "$algo's device work $w ms a step is not over allreduce's $base: its codec ran on the host"
  echo "$algo: device work $w ms a step, allreduce $base"
done
