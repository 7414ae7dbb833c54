#!/usr/bin/env bash
# Bagua's trade-off on emulated V100s: 16 ranks on 8 namespace hosts of scripts/cluster.sh
# (2 per host; cluster name from BP_CLUSTER, default `baguaemu`, brought up once per
# network and removed at the end) at 100, 25 and 10 Gbit/s, the hosts' links shaped by the
# kernel to the rate over the dilation, every algorithm of Bagua's family: step time and
# time to loss relative to allreduce (bench/emu/bagua_emu.py). About 15 minutes.
# Environment: BAGPIPE (binary), RUNS_DIR, STEPS (5).
source "$(dirname "$0")/lib.sh"
study_begin bagua_emu "Bagua's algorithms on 16 emulated V100s at 100, 25 and 10 Gbit/s"
export BP_CLUSTER=${BP_CLUSTER:-baguaemu}
trap '"$ROOT/scripts/cluster.sh" down' EXIT
BAGPIPE=$BP /usr/bin/python3 "$ROOT/bench/emu/bagua_emu.py" --steps "${STEPS:-5}" --out "$RUNS" \
  --json "$OUT/results.json" --markdown "$OUT/table.md" | tee "$OUT/log.txt"
plots plots_10gbit "$RUNS"/10gbit_*
{
  study_header
  echo
  cat "$ROOT/bench/emu/bagua_emu.md"
  echo
  cat "$OUT/table.md"
  echo
  echo "Every run (median of steps 3.. of ${STEPS:-5}; dp MB sent per step by all ranks, rank 0's exposed dp time):"
  echo
  echo '```'
  cat "$OUT/log.txt"
  echo '```'
  echo
  cat "$ROOT/bench/emu/bagua_emu_notes.md"
  echo
  echo "Plots of the 10 Gbit/s runs by \`bagpipe report\` ([index](plots_10gbit/index.html)): bytes and"
  echo "exposed communication per step of each algorithm (comm_run*.svg, in the alphabetical"
  echo "order of the algorithms' names)."
} >"$OUT/README.md"
study_end
