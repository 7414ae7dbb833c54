#!/usr/bin/env bash
# Files a run writes where the user says (--trace, --metrics, simulate --measure)
# go only to a new name, an empty file or a file of their own kind: anything else
# (a device, a FIFO, a directory, a link to one, another file, the run's own log or
# `latest`) is refused before any work with one line and exit 2, and left as it
# was. Devices are made here (mknod), never /dev/null. And the KJV cache without
# HOME.
source "$(dirname "$0")/lib.sh"

opts=("${TINY[@]}" --data "$TEXT" --steps 2 --eval-every 0)
"$BP" train "${opts[@]}" --out "$WORK/run" >/dev/null
cp "$WORK/run/metrics.jsonl" "$WORK/metrics.orig"
cp "$WORK/run/latest" "$WORK/latest.orig"
mkdir "$WORK/dir"
mkfifo "$WORK/fifo"
echo "notes of the user" >"$WORK/notes"
devices=0
if mknod "$WORK/dev" c 1 3 2>/dev/null; then # a null device of our own (root only)
  ln -s dev "$WORK/dev_link"
  devices=1
fi

# refused_out OPTION PATH PATTERN: train with OPTION PATH into a fresh --out is
# refused before training, PATTERN naming why.
n=0
refused_out() {
  local opt=$1 path=$2 pattern=$3
  n=$((n + 1))
  expect 2 "^bagpipe: error: option $opt: $path $pattern" -- \
    timeout 20 "$BP" train "${opts[@]}" --out "$WORK/o$n" "$opt" "$path"
  [ ! -e "$WORK/o$n/metrics.jsonl" ] || fail "$opt $path: training started"
}
not_regular="is not a regular file \(a device, FIFO or socket\), which the trace would replace"
refused_out --trace "$WORK/fifo" "$not_regular"
refused_out --trace "$WORK/dir" "is a directory; give a file name"
refused_out --trace "$WORK/notes" "exists and is not a trace; give a new name or remove it"
refused_out --trace "$WORK/run/metrics.jsonl" "exists and is not a trace"
refused_out --trace "$WORK/run/latest" "exists and is not a trace"
refused_out --metrics "$WORK/dir" "is a directory"
refused_out --metrics "$WORK/notes" "exists and is not a metrics log; give a new name or remove it"
refused_out --metrics "$WORK/run/latest" "exists and is not a metrics log"
refused_out --metrics "$WORK/run/metrics.jsonl" \
  "holds another run's metrics log, which a new run would truncate; give a new name, or --overwrite"
if [ "$devices" -eq 1 ]; then
  refused_out --trace "$WORK/dev" "$not_regular"
  refused_out --trace "$WORK/dev_link" "$not_regular"
  # On 2 ranks too: rank 0 refuses, every rank ends alike, no MPI_ABORT.
  refused 2 "option --trace: $WORK/dev $not_regular" -- "${opts[@]}" --trace "$WORK/dev"
fi
# The run's own files, not yet there: the trace onto the log, or onto `latest`.
expect 2 "option --trace: $WORK/o_same/./m.jsonl is the run's metrics log" -- \
  "$BP" train "${opts[@]}" --out "$WORK/o_same" --metrics "$WORK/o_same/m.jsonl" \
  --trace "$WORK/o_same/./m.jsonl"
expect 2 "option --trace: $WORK/o_latest/latest is the run's .latest. pointer" -- \
  "$BP" train "${opts[@]}" --out "$WORK/o_latest" --trace "$WORK/o_latest/latest"
expect 2 "option --metrics: $WORK/o_latest/latest is the run's .latest. pointer" -- \
  "$BP" train "${opts[@]}" --out "$WORK/o_latest" --metrics "$WORK/o_latest/latest"

# simulate --measure likewise, before measuring.
sim=(--layers 1 --embd 16 --heads 2 --seq-len 16 --batch 4)
expect 2 "option --measure: $WORK/notes exists and is not a profile of bagpipe simulate" -- \
  "$BP" simulate "${sim[@]}" --measure "$WORK/notes"
expect 2 "option --measure: $WORK/fifo is not a regular file" -- \
  timeout 20 "$BP" simulate "${sim[@]}" --measure "$WORK/fifo"
if [ "$devices" -eq 1 ]; then
  expect 2 "option --measure: $WORK/dev is not a regular file" -- \
    "$BP" simulate "${sim[@]}" --measure "$WORK/dev"
fi

# Nothing was replaced or changed.
[ -d "$WORK/dir" ] && [ -p "$WORK/fifo" ] || fail "the directory or the FIFO was replaced"
[ "$devices" -eq 0 ] || { [ -c "$WORK/dev" ] && [ -L "$WORK/dev_link" ]; } ||
  fail "the device node was replaced: $(ls -l "$WORK/dev" "$WORK/dev_link")"
[ "$(cat "$WORK/notes")" = "notes of the user" ] || fail "the user's file changed"
cmp -s "$WORK/run/metrics.jsonl" "$WORK/metrics.orig" || fail "the run's metrics log changed"
cmp -s "$WORK/run/latest" "$WORK/latest.orig" || fail "the run's latest changed"

# What is allowed: a trace over an earlier trace, a resumed run's own log, another
# run's log with --overwrite, and a log streamed into a FIFO.
"$BP" train "${opts[@]}" --out "$WORK/t" --trace "$WORK/t.json" >/dev/null || fail "first trace"
# A temporary file that a writer killed mid-write left (kill -9) goes with the next
# write; one of a process still running stays (before: every one stayed for good).
dead=$(sh -c 'echo $$')
: >"$WORK/t.json.tmp.$dead"
: >"$WORK/t.json.tmp.$$"
"$BP" train "${opts[@]}" --out "$WORK/t" --overwrite --trace "$WORK/t.json" >/dev/null ||
  fail "a trace over an earlier one was refused"
[ ! -e "$WORK/t.json.tmp.$dead" ] || fail "a dead writer's temporary file stayed"
[ -e "$WORK/t.json.tmp.$$" ] || fail "a running process's temporary file was removed"
rm "$WORK/t.json.tmp.$$"
"$BP" train "${opts[@]}" --steps 3 --resume "$WORK/run" --out "$WORK/run" >/dev/null ||
  fail "a resumed run was refused its own log"
"$BP" train "${opts[@]}" --out "$WORK/o_other" --metrics "$WORK/run/metrics.jsonl" --overwrite \
  >/dev/null || fail "--overwrite did not allow replacing another run's log"
cat "$WORK/fifo" >"$WORK/streamed" &
reader=$!
timeout 60 "$BP" train "${opts[@]}" --out "$WORK/o_fifo" --metrics "$WORK/fifo" >/dev/null ||
  fail "a metrics log into a FIFO was refused"
wait "$reader"
grep -q '"type":"step","step":2' "$WORK/streamed" || fail "nothing streamed: $(cat "$WORK/streamed")"
# A FIFO that no process reads: one line at once (before: blocked in open() for good).
rc=0
timeout 60 "$BP" train "${opts[@]}" --out "$WORK/o_noreader" --metrics "$WORK/fifo" >/dev/null \
  2>"$WORK/err" || rc=$?
[ "$rc" -eq 1 ] || fail "a FIFO without a reader: exit $rc: $(cat "$WORK/err")"
grep -qx "bagpipe: error: cannot open metrics log $WORK/fifo: a FIFO that no process reads (start its reader first)" \
  "$WORK/err" || fail "a FIFO without a reader said: $(cat "$WORK/err")"
# Without HOME (cron, some schedulers) the KJV cache goes to the home of the
# password database, never into the working directory.
home=$(getent passwd "$(id -u)" | cut -d: -f6)
if [ -n "$home" ] && [ -d "$home" ] && command -v bible >/dev/null; then
  mkdir "$WORK/cwd"
  (cd "$WORK/cwd" && env -u HOME -u XDG_CACHE_HOME "$BP" train "${TINY[@]}" --data kjv --steps 1 \
    --eval-every 0 --out "$WORK/kjv" >/dev/null) || fail "kjv without HOME failed"
  [ ! -e "$WORK/cwd/.cache" ] || fail "without HOME the KJV cache went to the working directory"
  [ -s "$home/.cache/bagpipe/kjv.txt" ] || fail "no KJV cache in $home/.cache/bagpipe"
fi
# --no-final-checkpoint: the metrics, no checkpoint at the end; --checkpoint-every's
# are still saved.
"$BP" train "${opts[@]}" --steps 3 --no-final-checkpoint --out "$WORK/nofinal" >/dev/null ||
  fail "--no-final-checkpoint: the run failed"
[ "$(grep -c '"type":"step"' "$WORK/nofinal/metrics.jsonl")" -eq 3 ] || fail "--no-final-checkpoint: no metrics"
[ ! -e "$WORK/nofinal/latest" ] && ! ls "$WORK/nofinal" | grep -q '^ckpt-' ||
  fail "--no-final-checkpoint: saved $(ls "$WORK/nofinal")"
"$BP" train "${opts[@]}" --steps 3 --checkpoint-every 2 --no-final-checkpoint --out "$WORK/every2" \
  >/dev/null || fail "--no-final-checkpoint --checkpoint-every 2: the run failed"
[ "$(cat "$WORK/every2/latest")" = ckpt-00000002 ] ||
  fail "--no-final-checkpoint --checkpoint-every 2: latest is $(cat "$WORK/every2/latest" 2>&1)"
no_partial_files "$WORK"
echo "outputs: ok"
