#!/usr/bin/env bash
# Optimus-CC's ablation on emulated A100s: dp 2 x pp 4 x tp 2 on 8 namespace hosts of
# scripts/cluster.sh (2 ranks each, tp within a host; cluster name from BP_CLUSTER,
# default `occemu`, removed at the end), the hosts' links shaped by the kernel to the slow
# inter-node rate over the dilation: baseline, CB, CB+FE, CB+FE+SC, step time and bytes
# per axis (bench/emu/occ_emu.py). About 15 minutes.
# Environment: BAGPIPE (binary), RUNS_DIR, STEPS (5), DILATION (64), INTER_MBIT (50000).
source "$(dirname "$0")/lib.sh"
study_begin occ_emu "Optimus-CC's ablation on emulated A100s, dp 2 x pp 4 x tp 2"
export BP_CLUSTER=${BP_CLUSTER:-occemu}
K=${DILATION:-64} INTER=${INTER_MBIT:-50000}
"$ROOT/scripts/cluster.sh" up 8 --rate "$((INTER / K))mbit" >/dev/null
trap '"$ROOT/scripts/cluster.sh" down' EXIT
BAGPIPE=$BP /usr/bin/python3 "$ROOT/bench/emu/occ_emu.py" --steps "${STEPS:-5}" --dilation "$K" \
  --inter "bw=${INTER}Mbit" --out "$RUNS" --json "$OUT/results.json" --markdown "$OUT/table.md" |
  tee "$OUT/log.txt"
plots plots "$RUNS"/CB "$RUNS"/CB_FE "$RUNS"/CB_FE_SC "$RUNS"/baseline
{
  study_header
  echo
  sed "s/@K@/$K/g; s/@RATE@/$((INTER / K)) Mbit\/s/g" "$ROOT/bench/emu/occ_emu.md"
  echo
  cat "$OUT/table.md"
  echo
  echo "Every run (steps 3.. of ${STEPS:-5}):"
  echo
  echo '```'
  cat "$OUT/log.txt"
  echo '```'
  echo
  cat "$ROOT/bench/emu/occ_emu_notes.md"
  echo
  echo "Plots by \`bagpipe report\` ([index](plots/index.html)): bytes and exposed communication"
  echo "per axis and step of each configuration (comm_run1.svg CB, run2 CB+FE, run3 CB+FE+SC,"
  echo "run4 baseline), each stage's busy and idle time (stages_run*.svg)."
} >"$OUT/README.md"
study_end
