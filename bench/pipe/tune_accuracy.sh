#!/usr/bin/env bash
# Accuracy of `bagpipe tune`: its predicted step times against measured ones.
#
# Runs `bagpipe tune` for the default gpt on 2 stages, then trains a selection of
# the candidates it lists (the fastest few, then evenly spaced rows down to the
# slowest) with `bagpipe train` on 2 ranks for STEPS steps each, and prints per
# candidate the predicted and the measured median step time and their ratio. Also
# the slowdown of computation by the machine's load that tune measured (load_t) and
# the one the ranks met in training (load_r: their busy time over the profiled CPU
# time), and drift = load_r / load_t: on a shared machine the load changes from
# minute to minute, which no prediction made beforehand can know. Exit status 0
# when every ratio is within LIMIT.
#
# Usage: bench/pipe/tune_accuracy.sh [options for both tune and train...]
# Environment: BAGPIPE (binary, default build/bagpipe), STEPS (30), PICK (10
# candidates), OUT (working directory, default a fresh one under /tmp), LIMIT
# (allowed |ratio - 1|, 0.2).
set -euo pipefail
cd "$(dirname "$0")/../.."
BP=${BAGPIPE:-build/bagpipe}
STEPS=${STEPS:-30}
PICK=${PICK:-10}
LIMIT=${LIMIT:-0.2}
OUT=${OUT:-$(mktemp -d /tmp/bp_tune_accuracy.XXXXXX)}
mkdir -p "$OUT"
export OPENBLAS_NUM_THREADS=1
EXTRA=("$@")

"$BP" tune --pp 2 --trial-steps 0 "${EXTRA[@]}" | tee "$OUT/tune.txt"

# Rows of the table: N M micro schedule step_ms; per (N, micro) the partition and
# each stage's forward + backward CPU ms per micro-batch.
awk '/^  +rank /{t=1; next} /^fastest/{t=0} t && NF>=11 {print $2, $3, $4, $5, $6}' \
  "$OUT/tune.txt" >"$OUT/rows.txt"
awk '/^ +N +micro +partition/{p=1; next} /^predicted/{p=0}
  p {printf "%s %s %s", $1, $2, $3; for (i = 4; i <= NF; i += 2) {split($i, fb, "/"); printf " %s", fb[1] + fb[2]} print ""}' \
  "$OUT/tune.txt" >"$OUT/profile.txt"
rows=$(wc -l <"$OUT/rows.txt")
[ "$rows" -gt 0 ] || { echo "no candidates in the tune output" >&2; exit 1; }

# The fastest PICK/2, then evenly spaced rows down to the last.
head_n=$((PICK / 2))
picks=$(awk -v n="$rows" -v h="$head_n" -v p="$PICK" 'BEGIN {
  for (i = 1; i <= h && i <= n; i++) print i;
  rest = p - h; if (rest < 1 || n <= h) exit;
  for (j = 1; j <= rest; j++) { r = h + int((n - h) * j / rest + 0.5); if (r > h && r <= n) print r }
}' | sort -n | uniq)

# A number array of a metrics record: json_array FILE TYPE KEY -> "a b c"
json_array() {
  grep "\"type\":\"$2\"" "$1" | tail -1 | sed "s/.*\"$3\":\[\([^]]*\)\].*/\1/" | tr ',' ' '
}

# load FILE: the slowdown of computation a tune output measured
load() { sed -n 's/.*computation runs \([0-9.]*\)x.*/\1/p' "$1"; }

printf "\n%4s %3s %3s %5s  %-9s %8s %8s %6s  %6s %6s %6s\n" rank N M micro schedule \
  pred_ms meas_ms ratio load_t load_r drift
worst=0
worst_same=0
load_t=$(load "$OUT/tune.txt")
for r in $picks; do
  read -r N M micro sched pred < <(sed -n "${r}p" "$OUT/rows.txt")
  read -r _ _ part cpu_ms < <(awk -v n="$N" -v m="$micro" '$1==n && $2==m' "$OUT/profile.txt")
  args=(--pp 2 --partition "$part" --micro-batches "$M" --schedule "$sched")
  [ "$N" -gt 1 ] && args+=(--pipelines "$N")
  run="$OUT/run_$r"
  rm -rf "$run"
  scripts/mpirun.sh -np 2 "$BP" train "${EXTRA[@]}" "${args[@]}" --steps "$STEPS" \
    --eval-every 0 --progress none --log-every "$STEPS" --out "$run" >"$run.log" 2>&1 ||
    { echo "candidate $r failed: $(tail -1 "$run.log")" >&2; exit 1; }
  meas=$(grep '"type":"summary"' "$run/metrics.jsonl" | sed 's/.*"median_step_ms":\([0-9.e+-]*\).*/\1/')
  busy=$(json_array "$run/metrics.jsonl" stages busy_s)
  # The slowdown the ranks met while computing: their compute's wall time per step
  # over its CPU time as profiled. On a shared machine it drifts from tune's.
  load_r=$(awk -v busy="$busy" -v cpu="$cpu_ms" -v steps="$STEPS" -v v="$((N * M))" 'BEGIN {
    n = split(busy, b, " "); split(cpu, c, " "); s = 0;
    for (i = 1; i <= n; i++) s += b[i] / (steps * v * c[i] / 1000); printf "%.2f", s / n }')
  read -r ratio drift worst worst_same < <(awk -v m="$meas" -v p="$pred" -v lt="$load_t" \
    -v lr="$load_r" -v w="$worst" -v ws="$worst_same" 'function dev(x) { return x > 1 ? x - 1 : 1 - x }
    BEGIN { r = m / p; d = lr / lt; same = dev(d) <= 0.15;
      printf "%.3f %.2f %.3f %.3f\n", r, d, (dev(r) > w ? dev(r) : w), (same && dev(r) > ws ? dev(r) : ws) }')
  printf "%4d %3d %3d %5d  %-9s %8.2f %8.2f %6.3f  %6.2f %6.2f %6.2f\n" "$r" "$N" "$M" "$micro" \
    "$sched" "$pred" "$meas" "$ratio" "$load_t" "$load_r" "$drift"
done
echo "largest |measured / predicted - 1|: $worst; over the runs whose load stayed within 15% of" \
  "tune's (drift): $worst_same (limit $LIMIT); runs in $OUT"
awk -v w="$worst" -v l="$LIMIT" 'BEGIN {exit !(w <= l)}'
