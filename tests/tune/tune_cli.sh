#!/usr/bin/env bash
# `bagpipe tune` on a tiny gpt over 2 stages: the table's structure (every valid
# (N, M, schedule) once, micro-batch = batch / M since each AvgPipe pipeline has its
# own batch), with --trial-steps 0 sorted by predicted samples per second (which
# count the N batches) as before the convergence trial; with the trial, its target
# is the validation loss `bagpipe train` reaches in those steps, each row's samples
# to it are its N's in the trial and its time to it those over its samples/s, rows
# sorted by that time (those that never reach it last) and the best proposed; bad
# --trial-steps values and a trial whose one pipeline diverges are usage errors;
# the chosen candidate is the fastest within --mem-cap, a cap below every candidate
# is a usage error (exit 2, one line), given --micro-batches/--schedule fix those,
# the printed command of AvgPipe converges (alpha (N + 1) < 2: the default 0.9 / N
# is spelled out, a given --ea-alpha drops the N it would make diverge),
# --help lists every option with a default, and the printed command trains.
source "$(dirname "$0")/../lib.sh"
ONE=(--layers 1 --embd 16 --heads 2 --seq-len 8 --batch 8)
TINY=("${ONE[@]}" --pp 2)

# rows FILE: "N M micro schedule step_ms peak_MB fits samples/s [to_target target_s]"
# per table row
rows() {
  awk '/^  +rank /{t=1; next} /^fastest/{t=0} t {print $2, $3, $4, $5, $6, $8, $10, $7, $12, $13}' "$1"
}

"$BP" tune "${TINY[@]}" --trial-steps 0 >"$WORK/all" || fail "tune exited $?"
grep -q "^bagpipe tune: gpt" "$WORK/all" || fail "no header"
grep -qE "^ +N +micro +partition +stage 0 +stage 1" "$WORK/all" || fail "no profile table"
rows "$WORK/all" >"$WORK/rows"
n=$(wc -l <"$WORK/rows")
grep -q "predicted, most samples/s first ($n of $n candidates)" "$WORK/all" || fail "row count $n"
if grep -q "convergence trial\|to_target" "$WORK/all"; then fail "--trial-steps 0 ran a trial"; fi
# Every N in {1,2,4}, M dividing 8, micro = 8 / M; samples/s = N x 8 / step time (within
# 1%, plus the step time's rounding to 0.01 ms, 2% of a 0.25 ms step); each row once.
awk '{ if (!($1 == 1 || $1 == 2 || $1 == 4) || $3 * $2 != 8) { print "bad row:", $0; exit 1 }
       r = $8 * $5 / 1000 / ($1 * 8); tol = 0.01 + 0.005 / $5
       if (r < 1 - tol || r > 1 + tol) { print "samples/s:", $0; exit 1 } }' \
  "$WORK/rows" || fail "candidate set"
[ "$(cut -d' ' -f1,2,4 "$WORK/rows" | sort | uniq -d | wc -l)" -eq 0 ] || fail "duplicate rows"
for nm in "1 1" "1 8" "2 4" "4 2"; do
  grep -q "^$nm " "$WORK/rows" || fail "no row for N M = $nm"
done
grep -q " gpipe " "$WORK/rows" && grep -q " 1f1b " "$WORK/rows" && grep -q " afp:" "$WORK/rows" ||
  fail "schedules missing"
# Sorted by time per batch (step_ms / N), ties within a microsecond by peak memory:
# each printed step_ms is within 0.005 ms of the one sorted on, so two neighbours may
# look out of order by half a rounding step of each, plus that microsecond.
awk 'NR > 1 && $5 / $1 < prev - 0.005 / $1 - slack - 0.0011 { print "row " NR ": " $0; exit 1 }
     { prev = $5 / $1; slack = 0.005 / $1 }' \
  "$WORK/rows" || fail "not sorted by time per batch (samples/s)"
[ "$(head -1 "$WORK/rows" | cut -d' ' -f7)" = yes ] || fail "without a cap every row fits"
grep -qE "^  mpirun -np 2 .*bagpipe train --layers 1 --embd 16 --heads 2 --seq-len 8 --batch 8 --pp 2 --partition [0-9]+,[0-9]+ .*--micro-batches [0-9]+ --schedule [a-z0-9:]+$" \
  "$WORK/all" || fail "command line: $(tail -1 "$WORK/all")"

# The convergence trial: 50 steps, evaluated every 5. Its target is what `bagpipe
# train` reaches in one process in 50 steps (the default learning rate is constant,
# so the same schedule), on 4 validation batches.
"$BP" tune "${TINY[@]}" --trial-steps 50 >"$WORK/trial" || fail "tune with a trial exited $?"
launch 1 "$BP" train "${ONE[@]}" --steps 50 --eval-every 5 --eval-batches 4 \
  --progress none --out "$WORK/ref" >/dev/null || fail "reference run failed"
want=$(grep '"type":"eval"' "$WORK/ref/metrics.jsonl" | tail -1 | sed 's/.*"val_loss":\([0-9.e+-]*\).*/\1/')
target=$(awk -v w="$want" 'BEGIN {printf "%.4f", w}')
grep -q "^convergence trial: 50 steps of one pipeline reach validation loss $target .*every 5 steps on 4 batches" \
  "$WORK/trial" || fail "trial target: $(grep '^convergence' "$WORK/trial"), train reached $target"
grep -q "^predicted, least time to validation loss $target first (one pipeline's after --trial-steps 50) ($n of $n candidates)" \
  "$WORK/trial" || fail "trial table header: $(grep '^predicted' "$WORK/trial")"
# trial table: "N steps samples factor"; one pipeline reaches its own last loss.
awk '/^convergence trial/{t=1; getline; next} /^predicted/{t=0} t {print $1, $2, $3, $4}' \
  "$WORK/trial" >"$WORK/per_n"
[ "$(cut -d' ' -f1 "$WORK/per_n" | sort -n | tr '\n' ' ')" = "1 2 4 " ] || fail "trial Ns: $(cat "$WORK/per_n")"
awk '$1 == 1 && ($3 > 400 || $4 != "1.00") {exit 1}' "$WORK/per_n" || fail "N = 1: $(cat "$WORK/per_n")"
rows "$WORK/trial" >"$WORK/trows"
# Each row: its N's samples, time = samples / samples/s (within the printed roundings),
# sorted by time, those that never reach the target after every one that does.
awk 'NR == FNR {s[$1] = $3; next}
     $9 != s[$1] {print "samples of", $0; exit 1}
     $9 == "never" || $9 == "diverged" {late = 1; next}
     late {print "after never:", $0; exit 1}
     { r = $9 / $8; tol = 0.006 + r * (0.051 / $8 + 0.51 / $9)
       if (r - $10 > tol || $10 - r > tol) {print "time:", $0; exit 1}
       if (FNR > 1 && $10 < prev) {print "order:", $0; exit 1}; prev = $10 }' \
  "$WORK/per_n" "$WORK/trows" || fail "trial table rows"
[ "$(wc -l <"$WORK/trows")" -eq "$n" ] || fail "trial lost candidates"
read -r N M _ sched _ peak _ <<<"$(head -1 "$WORK/trows")"
grep -q "^fastest: N=$N M=$M $sched, .* s to validation loss $target, peak $peak MB$" "$WORK/trial" ||
  fail "trial chose $(grep ^fastest "$WORK/trial"), expected N=$N M=$M $sched"

# Bad --trial-steps: one usage line, exit 2.
for bad in -1 abc 1.5 2000; do
  rc=0
  "$BP" tune "${TINY[@]}" --trial-steps "$bad" >/dev/null 2>"$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <"$WORK/err")" -eq 1 ] && grep -q -- "--trial-steps" "$WORK/err" ||
    fail "--trial-steps $bad: rc $rc, $(cat "$WORK/err")"
done
grep -q "option --trial-steps: 2000 is more than --steps 1000" "$WORK/err" || fail "$(cat "$WORK/err")"
# A learning rate that makes one pipeline diverge: no target, nothing proposed.
rc=0
"$BP" tune "${TINY[@]}" --optim sgd --lr 1e6 --trial-steps 20 >"$WORK/out" 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$WORK/err")" -eq 1 ] && [ ! -s "$WORK/out" ] &&
  grep -q "option --trial-steps: one pipeline's loss went non-finite within 20 steps" "$WORK/err" ||
  fail "diverging trial: rc $rc, $(cat "$WORK/err")"

# Optimus-CC's options of the tuned run do not reach the trial's one-stage runs, where
# each alone would be refused (e.g. --cb-warmup without --cb).
"$BP" tune "${TINY[@]}" --cb --cb-epilogue-only --no-lep --cb-warmup 5 --trial-steps 10 \
  >/dev/null 2>"$WORK/err" || fail "tune with Optimus-CC's options: $(cat "$WORK/err")"

# A cap in the widest gap between the peaks (far from any, whatever the rounding):
# the first row that fits.
cap=$(awk '{print $6}' "$WORK/rows" | sort -g | awk 'NR > 1 && $1 - p > g {g = $1 - p; c = (p + $1) / 2}
  {p = $1} END {print c}')
"$BP" tune "${TINY[@]}" --trial-steps 0 --mem-cap "$cap" >"$WORK/capped" ||
  fail "capped tune exited $?"
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
"$BP" tune "${TINY[@]}" --trial-steps 0 --mem-cap 0.001 >"$WORK/out" 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] || fail "tiny cap exited $rc"
[ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "tiny cap stderr: $(cat "$WORK/err")"
grep -q "option --mem-cap: no candidate fits in 0.001 MB; the smallest needs" "$WORK/err" ||
  fail "tiny cap said: $(cat "$WORK/err")"

# Given choices are fixed; a bad combination is a usage error.
"$BP" tune "${TINY[@]}" --trial-steps 0 --micro-batches 2 --schedule gpipe --top 3 >"$WORK/fixed"
rows "$WORK/fixed" >"$WORK/frows"
[ "$(wc -l <"$WORK/frows")" -eq 3 ] || fail "--top 3"
awk '$2 != 2 || $4 != "gpipe" {exit 1}' "$WORK/frows" || fail "fixed M and schedule"
rc=0
"$BP" tune "${TINY[@]}" --micro-batches 3 >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "option --batch: 8 is not divisible" "$WORK/err" ||
  fail "--micro-batches 3: rc $rc, $(cat "$WORK/err")"
# Every value in range, but --dp x --micro-batches beyond an int: a usage error (was
# SIGFPE, exit 136).
rc=0
"$BP" tune "${TINY[@]}" --dp 65536 --micro-batches 65536 --batch 1048576 >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "option --batch: 1048576 is not divisible by --dp 65536 x --micro-batches 65536" "$WORK/err" ||
  fail "--dp 65536 --micro-batches 65536: rc $rc, $(cat "$WORK/err")"
# Tensor parallelism is not modelled: refused, rather than a command that fails.
rc=0
"$BP" tune "${TINY[@]}" --heads 2 --tp 2 >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "option --tp: tune does not model tensor parallelism" "$WORK/err" ||
  fail "--tp 2: rc $rc, $(cat "$WORK/err")"

# Elastic averaging: N = 4 is printed with its default alpha 0.9 / 4; with --ea-alpha
# 0.5 (divergent for N >= 3) no row has N = 4, and --pipelines 4 with it is refused.
"$BP" tune "${TINY[@]}" --trial-steps 0 --pipelines 4 >"$WORK/n4" || fail "tune --pipelines 4 exited $?"
tail -1 "$WORK/n4" | grep -qE " --pipelines 4 --ea-alpha 0.225 " ||
  fail "N = 4 command: $(tail -1 "$WORK/n4")"
"$BP" tune "${TINY[@]}" --trial-steps 20 --ea-alpha 0.5 >"$WORK/a5" || fail "tune --ea-alpha 0.5 exited $?"
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

# The suggested command trains (the trial's best).
if [ -n "${BP_MPIEXEC:-}" ]; then
  cmd=$(tail -1 "$WORK/trial" | sed "s|^  mpirun|$BP_MPIEXEC $BP_MPIEXEC_FLAGS|")
  # shellcheck disable=SC2086
  $cmd --steps 2 --eval-every 0 --progress none --out "$WORK/run" >"$WORK/train.log" 2>&1 ||
    fail "suggested command failed: $(tail -3 "$WORK/train.log")"
  grep -q '"type":"summary"' "$WORK/run/metrics.jsonl" || fail "no summary from the suggested run"
fi
# A profile that will be slow (more threads standing for the job's other ranks
# than this machine has cores: minutes) says so at once instead of staying silent.
if [ "$(nproc)" -lt 32 ]; then
  timeout 5 "$BP" tune --layers 30 --embd 16 --heads 2 --seq-len 16 --pp 32 --trial-steps 0 \
    >/dev/null 2>"$WORK/slow" || true
  grep -qE "^tune: profiling [0-9]+ setups with 31 threads standing for the job's other ranks on $(nproc) cores: this takes minutes" \
    "$WORK/slow" || fail "a slow profile said nothing within 5 s: $(cat "$WORK/slow")"
fi
echo "ok"
