#!/usr/bin/env bash
# `bagpipe tune` on a tiny gpt over 2 stages: the table's structure (every valid
# (N, M, schedule) once, micro-batch = batch / M since each AvgPipe pipeline has its
# own batch, sorted by predicted samples per second, which count the N batches),
# the chosen candidate is the fastest within --mem-cap, a cap below every candidate
# is a usage error (exit 2, one line), given --micro-batches/--schedule fix those,
# the printed command of AvgPipe converges (alpha (N + 1) < 2: the default 0.9 / N
# is spelled out, a given --ea-alpha drops the N it would make diverge),
# --help lists every option with a default, and the printed command trains.
source "$(dirname "$0")/../lib.sh"
TINY=(--layers 1 --embd 16 --heads 2 --seq-len 8 --batch 8 --pp 2)

# rows FILE: "N M micro schedule step_ms peak_MB fits samples/s" per table row
rows() {
  awk '/^  +rank /{t=1; next} /^fastest/{t=0} t {print $2, $3, $4, $5, $6, $8, $10, $7}' "$1"
}

"$BP" tune "${TINY[@]}" >"$WORK/all" || fail "tune exited $?"
grep -q "^bagpipe tune: gpt" "$WORK/all" || fail "no header"
grep -qE "^ +N +micro +partition +stage 0 +stage 1" "$WORK/all" || fail "no profile table"
rows "$WORK/all" >"$WORK/rows"
n=$(wc -l <"$WORK/rows")
grep -q "predicted, most samples/s first ($n of $n candidates)" "$WORK/all" || fail "row count $n"
# Every N in {1,2,4}, M dividing 8, micro = 8 / M; samples/s = N x 8 / step time; each
# row once.
awk '{ if (!($1 == 1 || $1 == 2 || $1 == 4) || $3 * $2 != 8) { print "bad row:", $0; exit 1 }
       r = $8 * $5 / 1000 / ($1 * 8); if (r < 0.98 || r > 1.02) { print "samples/s:", $0; exit 1 } }' \
  "$WORK/rows" || fail "candidate set"
[ "$(cut -d' ' -f1,2,4 "$WORK/rows" | sort | uniq -d | wc -l)" -eq 0 ] || fail "duplicate rows"
for nm in "1 1" "1 8" "2 4" "4 2"; do
  grep -q "^$nm " "$WORK/rows" || fail "no row for N M = $nm"
done
grep -q " gpipe " "$WORK/rows" && grep -q " 1f1b " "$WORK/rows" && grep -q " afp:" "$WORK/rows" ||
  fail "schedules missing"
# Sorted by time per batch (step_ms / N, printed to 0.01 ms: ties within rounding).
awk 'NR > 1 && $5 / $1 < prev - 0.0051 { print "row " NR ": " $0; exit 1 } { prev = $5 / $1 }' \
  "$WORK/rows" || fail "not sorted by time per batch (samples/s)"
[ "$(head -1 "$WORK/rows" | cut -d' ' -f7)" = yes ] || fail "without a cap every row fits"
grep -qE "^  mpirun -np 2 .*bagpipe train --layers 1 --embd 16 --heads 2 --seq-len 8 --batch 8 --pp 2 --partition [0-9]+,[0-9]+ .*--micro-batches [0-9]+ --schedule [a-z0-9:]+$" \
  "$WORK/all" || fail "command line: $(tail -1 "$WORK/all")"

# A cap in the widest gap between the peaks (far from any, whatever the rounding):
# the first row that fits.
cap=$(awk '{print $6}' "$WORK/rows" | sort -g | awk 'NR > 1 && $1 - p > g {g = $1 - p; c = (p + $1) / 2}
  {p = $1} END {print c}')
"$BP" tune "${TINY[@]}" --mem-cap "$cap" >"$WORK/capped" || fail "capped tune exited $?"
rows "$WORK/capped" >"$WORK/crows"
first=$(awk -v c="$cap" '$6 <= c {print; exit}' "$WORK/crows")
[ -n "$first" ] || fail "nothing fits $cap"
awk -v c="$cap" '($6 <= c) != ($7 == "yes") {exit 1}' "$WORK/crows" || fail "fits column vs cap $cap"
read -r N M _ sched _ peak _ <<<"$first"
grep -q "^fastest within --mem-cap: N=$N M=$M $sched, .* peak $peak MB$" "$WORK/capped" ||
  fail "chose $(grep ^fastest "$WORK/capped"), expected N=$N M=$M $sched peak $peak"
awk -v p="$peak" -v c="$cap" 'BEGIN {exit !(p <= c)}' || fail "peak $peak above cap $cap"

# Below every candidate: exit 2 and one line that says so.
rc=0
"$BP" tune "${TINY[@]}" --mem-cap 0.001 >"$WORK/out" 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] || fail "tiny cap exited $rc"
[ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "tiny cap stderr: $(cat "$WORK/err")"
grep -q "option --mem-cap: no candidate fits in 0.001 MB; the smallest needs" "$WORK/err" ||
  fail "tiny cap said: $(cat "$WORK/err")"

# Given choices are fixed; a bad combination is a usage error.
"$BP" tune "${TINY[@]}" --micro-batches 2 --schedule gpipe --top 3 >"$WORK/fixed"
rows "$WORK/fixed" >"$WORK/frows"
[ "$(wc -l <"$WORK/frows")" -eq 3 ] || fail "--top 3"
awk '$2 != 2 || $4 != "gpipe" {exit 1}' "$WORK/frows" || fail "fixed M and schedule"
rc=0
"$BP" tune "${TINY[@]}" --micro-batches 3 >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "option --batch: 8 is not divisible" "$WORK/err" ||
  fail "--micro-batches 3: rc $rc, $(cat "$WORK/err")"
# Tensor parallelism is not modelled: refused, rather than a command that fails.
rc=0
"$BP" tune "${TINY[@]}" --heads 2 --tp 2 >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "option --tp: tune does not model tensor parallelism" "$WORK/err" ||
  fail "--tp 2: rc $rc, $(cat "$WORK/err")"

# Elastic averaging: N = 4 is printed with its default alpha 0.9 / 4; with --ea-alpha
# 0.5 (divergent for N >= 3) no row has N = 4, and --pipelines 4 with it is refused.
"$BP" tune "${TINY[@]}" --pipelines 4 >"$WORK/n4" || fail "tune --pipelines 4 exited $?"
tail -1 "$WORK/n4" | grep -qE " --pipelines 4 --ea-alpha 0.225 " ||
  fail "N = 4 command: $(tail -1 "$WORK/n4")"
"$BP" tune "${TINY[@]}" --ea-alpha 0.5 >"$WORK/a5" || fail "tune --ea-alpha 0.5 exited $?"
rows "$WORK/a5" >"$WORK/a5rows"
awk '$1 == 4 {exit 1}' "$WORK/a5rows" || fail "--ea-alpha 0.5 lists N = 4"
grep -q "^2 " "$WORK/a5rows" || fail "--ea-alpha 0.5 lost N = 2 (0.5 x 3 < 2)"
[ "$(tail -1 "$WORK/a5" | grep -o -- '--ea-alpha' | wc -l)" -eq 1 ] ||
  fail "--ea-alpha twice: $(tail -1 "$WORK/a5")"
rc=0
"$BP" tune "${TINY[@]}" --pipelines 4 --ea-alpha 0.5 >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "option --ea-alpha: 0.5 makes the elastic averaging of 4 pipelines" \
  "$WORK/err" || fail "--pipelines 4 --ea-alpha 0.5: rc $rc, $(cat "$WORK/err")"

# --help: every option with a default, tune's own among them.
"$BP" tune --help >"$WORK/help"
grep -q "^  --mem-cap" "$WORK/help" && grep -q "^  --pipelines" "$WORK/help" || fail "--help"
if grep '^  --' "$WORK/help" | grep -v '(default: '; then fail "options without a default"; fi

# The suggested command trains.
if [ -n "${BP_MPIEXEC:-}" ]; then
  cmd=$(tail -1 "$WORK/all" | sed "s|^  mpirun|$BP_MPIEXEC $BP_MPIEXEC_FLAGS|")
  # shellcheck disable=SC2086
  $cmd --steps 2 --eval-every 0 --progress none --out "$WORK/run" >"$WORK/train.log" 2>&1 ||
    fail "suggested command failed: $(tail -3 "$WORK/train.log")"
  grep -q '"type":"summary"' "$WORK/run/metrics.jsonl" || fail "no summary from the suggested run"
fi
echo "ok"
