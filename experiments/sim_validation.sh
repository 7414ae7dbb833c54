#!/usr/bin/env bash
# bagpipe simulate against measured runs on this machine: every dp algorithm on 2 and 4
# ranks with and without an emulated network, pipeline schedules, AvgPipe, tp and the
# Optimus-CC flags (bench/simulate/validate.sh), predicted / measured per configuration
# with the machine's load. About 6 minutes with 2 cores to itself.
# Environment: BAGPIPE (binary), RUNS_DIR, STEPS (30 per configuration).
source "$(dirname "$0")/lib.sh"
study_begin sim_validation "bagpipe simulate: predicted against measured step times"
BAGPIPE=$BP /usr/bin/python3 "$ROOT/bench/simulate/validate.py" --steps "${STEPS:-30}" \
  --out "$RUNS" --json "$OUT/validate.json" --markdown "$OUT/table.md" | tee "$RUNS/log.txt"
{
  study_header
  cat <<'TXT'

Per configuration (default gpt, batch 16, 0.5 MB buckets; the options are in
validate.json): `bagpipe simulate --measure` profiles the machine now, predicts the mean
step time, then `bagpipe train` runs the same configuration for 30 steps (mean of steps
2-30). ratio = measured / predicted (target: within 1 +- 0.15 on an idle machine); drift =
rank 0's measured computation over the predicted one (how far the machine's load moved
between profile and run); "ratio at run's load" re-predicts with the profile's
computation set to the load the run met, which isolates the model of communication,
overlap and schedule (not a prediction). Columns in detail:
[bench/simulate/README.md](../../../bench/simulate/README.md).

TXT
  cat "$OUT/table.md"
  echo
  grep -E '^(largest|at the run)' "$RUNS/log.txt" | sed 's/^/- /'
} >"$OUT/README.md"
study_end
