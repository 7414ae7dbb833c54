#!/usr/bin/env bash
# AvgPipe's headline experiment on emulated V100s: a 303 M-parameter gpt on 4 and 8
# stages (one per namespace host of scripts/cluster.sh, 16 hosts, cluster name from
# BP_CLUSTER, default `avgemu`, removed at the end), N = 1, 2, 4 pipelines at the schedule
# and M the step simulator picks, against gpipe and 1f1b at their best M
# (bench/emu/avgpipe_emu.py): samples/s and peak device memory. About 15 minutes; the
# emulated device uses no core, so the machine's load matters little.
# Environment: BAGPIPE (binary), RUNS_DIR, STEPS (6), DILATION (32), JOBS (runs at once, 3).
source "$(dirname "$0")/lib.sh"
study_begin avgpipe_emu "AvgPipe against gpipe and 1f1b on emulated V100s, 4 and 8 stages"
export BP_CLUSTER=${BP_CLUSTER:-avgemu}
"$ROOT/scripts/cluster.sh" up 16 >/dev/null
trap '"$ROOT/scripts/cluster.sh" down' EXIT
BAGPIPE=$BP /usr/bin/python3 "$ROOT/bench/emu/avgpipe_emu.py" --steps "${STEPS:-6}" \
  --dilation "${DILATION:-32}" --jobs "${JOBS:-3}" --out "$RUNS" --json "$OUT/results.json" \
  --markdown "$OUT/table.md" | tee "$OUT/log.txt"
# bagpipe report: per-step communication and stage busy/idle of the 8-stage runs
plots plots_pp8 "$RUNS"/pp8_*
{
  study_header
  echo
  cat "$ROOT/bench/emu/avgpipe_emu.md"
  echo
  cat "$OUT/table.md"
  echo
  echo "Every run (steps 3.. of ${STEPS:-6}; the 4-stage 1f1b M=8 three times, _r1 and _r2):"
  echo
  echo '```'
  cat "$OUT/log.txt"
  echo '```'
  python3 -c "import json; print('\nspread of the three repeats (max - min) / mean: %.3f' % json.load(open('$OUT/results.json'))['spread'])"
  echo
  cat "$ROOT/bench/emu/avgpipe_emu_notes.md"
  echo
  echo "Plots of the 8-stage runs by \`bagpipe report\` ([index](plots_pp8/index.html)): bytes and"
  echo "exposed communication per axis and step (comm_run*.svg), each stage's busy and idle time"
  echo "(stages_run*.svg), runs in the order of their folders' names (pp8_N<N>_M<M>_<schedule>)."
} >"$OUT/README.md"
study_end
