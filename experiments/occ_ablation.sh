#!/usr/bin/env bash
# Optimus-CC's ablation in miniature: baseline, CB, FE, SC, CB+FE, CB+FE+SC, FE+SC and CB
# without LEP on dp 2 x pp 4 (8 ranks), 1000 steps, on an emulated 1 Gbit / 1 ms network
# (bench/occ/ablation.sh), with the communication per axis drawn by bagpipe report.
# About 21 minutes with 2 cores to itself. Environment: BAGPIPE (binary), RUNS_DIR, STEPS (1000),
# GRID (dp2xpp4, or dp2xpp2), NET (bw=1Gbit,lat=1ms; off for no emulation); and, set by
# occ_slow_network.sh: OCC_STUDY (the study's name), TIMED (ablation.sh --timed-steps),
# SC_FLAGS, CB_FLAGS (--sc-flags, --cb-flags), REGIME (a paragraph for the page).
source "$(dirname "$0")/lib.sh"
study_begin "${OCC_STUDY:-occ_ablation}" "Optimus-CC's ablation${REGIME:+ on a slow network}: speed-up and validation loss against the baseline"
GRID=${GRID:-dp2xpp4} NET=${NET:-bw=1Gbit,lat=1ms}
BAGPIPE_BIN=$BP "$ROOT/bench/occ/ablation.sh" --grid "$GRID" --steps "${STEPS:-1000}" --net "$NET" \
  --timed-steps "${TIMED:-0}" --sc-flags "${SC_FLAGS:-}" --cb-flags "${CB_FLAGS:---cb}" --out "$RUNS" 2>&1 |
  tee "$RUNS/log.txt"
cp "$RUNS/table.md" "$RUNS/results.json" "$RUNS/about.txt" "$OUT/"
mapfile -t runs < <(runs_with net "$NET" "$RUNS"/run*)
plots plots "${runs[@]}"
{
  study_header
  cat <<TXT

A gpt of 4 layers and 256 channels (3.3 M parameters) on $GRID, the same samples for
every configuration, AdamW with warm-up, cosine decay and clipping; the
configurations and columns are explained in [bench/occ/README.md](../../../bench/occ/README.md).
Speed-up and loss change are against the baseline on the same network. The paper's
target shape: CB+FE+SC clearly faster than the baseline on a slow network, with the
validation loss within 2%.
${REGIME:+
$REGIME
}
TXT
  cat "$OUT/table.md"
  cat <<TXT

Plots of the runs on $NET ([index](plots/index.html)): bytes and exposed communication
per axis and step of each configuration in plots/comm_run*.svg (runs in the table's
order). The validation loss is evaluated once, at the end of each run: the table has it.
TXT
} >"$OUT/README.md"
study_end
