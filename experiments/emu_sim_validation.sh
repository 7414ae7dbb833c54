#!/usr/bin/env bash
# bagpipe simulate --device emu:a100 against emulated runs on network-namespace hosts
# (scripts/cluster.sh, 16 hosts, cluster name from BP_CLUSTER, default `emuval`, removed
# at the end): every dp algorithm, gpipe/1f1b/afp, AvgPipe N 2-4, tp 2, the Optimus-CC
# flags and hierarchical on 2 ranks per host, 2-16 ranks (bench/simulate/emu_validate.py);
# three rows repeated. About 20 minutes; the emulated device uses no core, so the
# machine's load matters little.
# Environment: BAGPIPE (binary), RUNS_DIR, STEPS (12 per configuration, fewer where a
# step is long), DILATION (32), REPEAT (rows run 3 times), ONLY (these rows, by name,
# comma-separated: the others are taken from the page's validate.json, rescored with
# the simulator of this commit), MERGE (with ONLY: --json files of
# bench/simulate/emu_validate.py passes run beside this one, whose rows replace the
# page's).
source "$(dirname "$0")/lib.sh"
study_begin emu_sim_validation "bagpipe simulate on emulated A100s: predicted against measured step times"
export BP_CLUSTER=${BP_CLUSTER:-emuval}
"$ROOT/scripts/cluster.sh" up 16 >/dev/null
trap '"$ROOT/scripts/cluster.sh" down' EXIT
KEEP=()
[ -z "${ONLY:-}" ] || KEEP=(--only "$ONLY" --keep "$ROOT/docs/results/emu_sim_validation/validate.json")
[ -z "${MERGE:-}" ] || KEEP+=(--merge "$MERGE")
BAGPIPE=$BP /usr/bin/python3 "$ROOT/bench/simulate/emu_validate.py" --steps "${STEPS:-12}" \
  --dilation "${DILATION:-32}" --repeat "${REPEAT:-allreduce dp4,1f1b pp4,occ cb pp2 dp2}" \
  "${KEEP[@]}" --out "$RUNS" --json "$OUT/validate.json" --markdown "$OUT/table.md" | tee "$OUT/log.txt"
{
  study_header
  cat "$ROOT/bench/simulate/emu_validation.md"
  echo
  cat "$OUT/table.md"
  echo
  grep -E '^(within|largest|repeats)' "$OUT/log.txt" | sed 's/^/- /'
  cat "$ROOT/bench/simulate/emu_validation_misses.md"
} >"$OUT/README.md"
study_end
