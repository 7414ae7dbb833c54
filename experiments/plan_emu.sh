#!/usr/bin/env bash
# bagpipe plan against measured times to a loss on emulated V100 clusters: 4 and 8
# namespace hosts of scripts/cluster.sh (one rank per host; cluster name from
# BP_CLUSTER, default `planemu`, brought up once per setting with hosts for JOBS runs at
# once, removed at the end) at four networks, dilated, the links shaped by the kernel;
# plan's top configurations timed there (bench/emu/plan_emu.py); then the settings of
# RUNTIME again with the runtime emulating the links instead (--net over unshaped links),
# to tell the simulator's misses from the kernel links'; then SLOW on 8 hosts again, one
# run at a time, to tell them from the host's CPU; each measured step beside simulate's,
# part by part (bench/emu/plan_emu_split.py). About 50 minutes (20 with RUNTIME and SLOW
# empty).
# Environment: BAGPIPE (binary), RUNS_DIR, HOSTS (4,8), SETTINGS (RATE:LAT:DILATION,...),
# RUNTIME (4-host settings run again with runtime links; "" for none), SLOW (8-host
# settings run again, one run at a time, typically at a higher dilation), TOP (10), TIMED
# (10 steps per run), JOBS (2 runs at once), PAGE_ONLY (1: the page from the runs already
# in RUNS_DIR, nothing run).
source "$(dirname "$0")/lib.sh"
study_begin plan_emu "bagpipe plan on emulated V100 clusters: predicted against measured time to a loss"
export BP_CLUSTER=${BP_CLUSTER:-planemu}
[ "${PAGE_ONLY:-0}" = 1 ] || trap '"$ROOT/scripts/cluster.sh" down' EXIT # PAGE_ONLY uses none
SETTINGS=${SETTINGS:-100gbit:5us:128,10gbit:50us:64,1gbit:1ms:16,100mbit:10ms:4}
RUNTIME=${RUNTIME-100gbit:5us:128,10gbit:50us:64,1gbit:1ms:16}
SLOW=${SLOW-10gbit:50us:128}
study() { # NAME LINKS HOSTS SETTINGS JOBS: RUNS/NAME.json and its table OUT/NAME.md
  [ "${PAGE_ONLY:-0}" = 1 ] ||
    BAGPIPE=$BP /usr/bin/python3 "$ROOT/bench/emu/plan_emu.py" --hosts "$3" --settings "$4" --links "$2" \
      --top "${TOP:-10}" --timed "${TIMED:-10}" --jobs "$5" --out "$RUNS/$1" --json "$RUNS/$1.json" |
      tee -a "$RUNS/log.txt"
  /usr/bin/python3 "$ROOT/bench/emu/plan_emu.py" --table "$RUNS/$1.json" --markdown "$OUT/$1.md"
  cp "$RUNS/$1.json" "$OUT/"
}
study results kernel "${HOSTS:-4,8}" "$SETTINGS" "${JOBS:-2}"
# Each measured step beside simulate's, per part: compute and exposed time per axis
BAGPIPE=$BP /usr/bin/python3 "$ROOT/bench/emu/plan_emu_split.py" "$RUNS/results.json" "$RUNS/results" \
  --markdown "$OUT/split.md"
[ -z "$RUNTIME" ] || study runtime runtime 4 "$RUNTIME" "${JOBS:-2}"
[ -z "$SLOW" ] || study slow kernel 8 "$SLOW" 1
cp "$RUNS/log.txt" "$OUT/log.txt"
first=$(find "$RUNS/results" -maxdepth 1 -type d -name 'h4_1gbit_*' | sort)
# shellcheck disable=SC2086 # one folder per run
[ -z "$first" ] || plots plots_4h_1gbit $first
{
  study_header
  echo
  cat "$ROOT/bench/emu/plan_emu.md"
  echo
  echo "Parameters: hosts ${HOSTS:-4,8}; settings (rate:latency:dilation) $SETTINGS; top ${TOP:-10};"
  echo "${TIMED:-10} steps per run; ${JOBS:-2} runs at once; binary $BP."
  echo
  cat "$OUT/results.md"
  echo
  echo "Where the measured steps part from the simulator's (bench/emu/plan_emu_split.py): each"
  echo "run's step, compute and exposed time per axis (steps 3 on, after any warm-up) beside"
  echo "\`simulate\`'s for the same configuration, network and dilation:"
  echo
  cat "$OUT/split.md"
  if [ -n "$RUNTIME" ]; then
    echo
    echo "The 4-host settings $RUNTIME again, the runtime emulating bandwidth and latency"
    echo "(--net bw=R,lat=L, dilated) over unshaped links, as the simulator's validation runs:"
    echo
    cat "$OUT/runtime.md"
  fi
  if [ -n "$SLOW" ]; then
    echo
    echo "8 hosts at $SLOW (rate:latency:dilation) again, one run at a time, the kernel's links:"
    echo
    cat "$OUT/slow.md"
  fi
  echo
  cat "$ROOT/bench/emu/plan_emu_notes.md"
  if [ -s "$OUT/log.txt" ]; then
    echo
    echo "Every run (predicted and measured step, the parts timed in and after a warm-up):"
    echo
    echo '```'
    cat "$OUT/log.txt"
    echo '```'
  fi
  if [ -n "$first" ]; then
    echo
    echo "Plots of the 4-host 1 Gbit/s runs by \`bagpipe report\` ([index](plots_4h_1gbit/index.html)):"
    echo "bytes and exposed communication per step of each configuration."
  fi
} >"$OUT/README.md"
study_end
