#!/usr/bin/env bash
# --trace: a 2-stage 1F1B run writes valid trace-event JSON with one process per
# rank, forwards and backwards in 1F1B's order, bytes that add up to the metrics
# log's and the bubble; a --dp 2 run has the dp communication thread's track; a
# run stopped by SIGTERM still writes its trace; a trace that cannot be written
# fails with one line.
source "$(dirname "$0")/../pipe/lib.sh"
CHECK="$BP_SOURCE_DIR/tests/trace/check_trace.py"

launch 2 "$BP" train "${SMALL_GPT[@]}" --pp 2 --micro-batches 4 --steps 4 --eval-every 0 \
  --out "$WORK/pp" --trace "$WORK/pp/trace.json" >/dev/null
python3 "$CHECK" "$WORK/pp/trace.json" "$WORK/pp/metrics.jsonl" 2 --pp 2 --micro 4 ||
  fail "2-stage 1f1b trace"
ls "$WORK/pp" | grep -q tmp && fail "a temporary file was left: $(ls "$WORK/pp")"

launch 2 "$BP" train "${SMALL_GPT[@]}" --dp 2 --bucket-mb 0.005 --steps 3 --eval-every 0 \
  --out "$WORK/dp" --trace "$WORK/dp/trace.json" >/dev/null
python3 "$CHECK" "$WORK/dp/trace.json" "$WORK/dp/metrics.jsonl" 2 --dp-thread ||
  fail "dp 2 trace"

# A full ring keeps the newest events and says how many it dropped.
launch 2 "$BP" train "${SMALL_GPT[@]}" --pp 2 --micro-batches 4 --steps 4 --eval-every 0 \
  --out "$WORK/small" --trace "$WORK/small/trace.json" --trace-events 20 >/dev/null
python3 - "$WORK/small/trace.json" <<'PY' || fail "dropped events"
import json, sys
d = json.load(open(sys.argv[1]))
x = [e for e in d["traceEvents"] if e["ph"] == "X"]
dropped = d["otherData"]["dropped_events"]
assert all(n > 0 for n in dropped), dropped
assert len(x) == 40, len(x)
labels = [e for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "process_labels"]
assert len(labels) == 2 and "dropped" in labels[0]["args"]["labels"], labels
assert min(e["args"]["step"] for e in x) == 4, "the newest events are kept"
print("ring of 20: dropped", dropped)
PY

# SIGTERM to one rank: every rank stops after the same step, and the trace of the
# steps done is written.
out="$WORK/sig"
launch 2 "$BP" train "${SMALL_GPT[@]}" --pp 2 --micro-batches 2 --steps 100000000 \
  --eval-every 0 --out "$out" --trace "$out/trace.json" >"$WORK/sig.out" 2>&1 &
launcher=$!
term_rank "$out" 0.5
rc=0
wait "$launcher" || rc=$?
[ "$rc" -eq 3 ] || fail "exit code $rc after SIGTERM, expected 3: $(cat "$WORK/sig.out")"
python3 "$CHECK" "$out/trace.json" "$out/metrics.jsonl" 2 --pp 2 --micro 2 >/dev/null ||
  fail "trace of a stopped run"
echo "stopped run: trace of $(grep -c '"name":"step"' "$out/trace.json") steps"

# A folder that cannot be made: one line from rank 0, every rank stops at set-up.
rc=0
launch 2 "$BP" train "${SMALL_GPT[@]}" --pp 2 --steps 2 --eval-every 0 --out "$WORK/bad" \
  --trace /proc/none/trace.json >/dev/null 2>"$WORK/stderr" || rc=$?
[ "$rc" -eq 1 ] || fail "an unwritable --trace exited $rc: $(cat "$WORK/stderr")"
[ "$(grep -c '^bagpipe:' "$WORK/stderr")" -eq 1 ] &&
  grep -qE '^bagpipe: (\[rank 0\] )?error: option --trace: cannot create directory /proc/none' \
    "$WORK/stderr" ||
  fail "unwritable --trace said: $(cat "$WORK/stderr")"
grep -q MPI_ABORT "$WORK/stderr" && fail "unwritable --trace aborted the job"
echo "unwritable: $(grep '^bagpipe:' "$WORK/stderr")"
echo "trace: ok"
