#!/usr/bin/env bash
# bagpipe report on two short runs (2 pipeline stages with a trace, 2 data-parallel
# ranks): every plot exists as SVG (well-formed XML) and PNG next to its data and
# script, the timeline has a row per rank with every forward and backward of the
# last two steps, a script runs again in the report folder, and index.html names
# both runs. Bad input: one line, exit 2 (usage) or 1 (gnuplot missing, bad log).
source "$(dirname "$0")/../pipe/lib.sh"
command -v gnuplot >/dev/null || fail "gnuplot is not installed (scripts/setup.sh installs it)"

opts=("${SMALL_GPT[@]}" --steps 6 --eval-every 3 --eval-batches 2)
launch 2 "$BP" train "${opts[@]}" --pp 2 --micro-batches 4 --out "$WORK/pp2" \
  --trace "$WORK/pp2/trace.json" >/dev/null
launch 2 "$BP" train "${opts[@]}" --dp 2 --out "$WORK/dp2" >/dev/null
"$BP" report "$WORK/pp2" "$WORK/dp2" --out "$WORK/rep" >"$WORK/stdout" || fail "report failed"
cat "$WORK/stdout"

for plot in loss_time loss_samples comm_run1 comm_run2 stages_run1 stages_run2 timeline_run1; do
  for ext in gp svg png; do
    [ -s "$WORK/rep/$plot.$ext" ] || fail "no $plot.$ext: $(ls "$WORK/rep")"
  done
  python3 -c 'import sys, xml.etree.ElementTree as E
assert E.parse(sys.argv[1]).getroot().tag.endswith("svg")' "$WORK/rep/$plot.svg" ||
    fail "$plot.svg is not SVG"
  [ "$(head -c 8 "$WORK/rep/$plot.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] ||
    fail "$plot.png is not a PNG"
  grep -q "<img src=\"$plot.svg\"" "$WORK/rep/index.html" || fail "index.html lacks $plot"
done
[ ! -e "$WORK/rep/timeline_run2.svg" ] || fail "a timeline for a run without a trace"
ls "$WORK/rep" | grep -qE '\.(tmp|log)$' && fail "left-over files: $(ls "$WORK/rep")"
for run in pp2 dp2; do
  grep -q "$WORK/$run" "$WORK/rep/index.html" || fail "index.html lacks $run"
done
grep -q "1f1b" "$WORK/rep/index.html" || fail "index.html lacks the configuration"

# Compute boxes of the timeline (the rows' full height): 2 ranks x 2 steps x 4
# micro-batches x (forward + backward), and the data behind both loss plots: 2
# evaluations per run.
boxes=$(awk '!/^#/ { d = $5 - ($2 - 0.3) } !/^#/ && d * d < 1e-9 { n[$2 + 0]++ }
  END { print n[0] + 0, n[1] + 0 }' \
  "$WORK/rep/run1_timeline.dat")
[ "$boxes" = "16 16" ] || fail "timeline boxes per rank: $boxes, expected 16 16"
[ "$(grep -vc '^#' "$WORK/rep/run1_loss.dat")" -eq 2 ] ||
  fail "run1_loss.dat: $(cat "$WORK/rep/run1_loss.dat")"

# A script runs again where it lies (what a user does after editing it).
rm "$WORK/rep/loss_time.svg"
(cd "$WORK/rep" && gnuplot loss_time.gp) && [ -s "$WORK/rep/loss_time.svg" ] ||
  fail "loss_time.gp does not run again in the report folder"

# A damaged trace, or one that is no file, costs its run the timeline only: one
# warning each, the rest of the report drawn (a FIFO is not waited on).
for t in dir fifo garbage range; do
  mkdir -p "$WORK/t_$t"
  cp "$WORK/pp2/metrics.jsonl" "$WORK/t_$t/"
done
mkdir "$WORK/t_dir/trace.json"
mkfifo "$WORK/t_fifo/trace.json"
head -c 3000 "$WORK/pp2/trace.json" | tr '{' '#' >"$WORK/t_garbage/trace.json"
sed -E '0,/"ph":"X","pid":[0-9]+/s//"ph":"X","pid":1e300/' "$WORK/pp2/trace.json" \
  >"$WORK/t_range/trace.json"
rc=0
timeout 60 "$BP" report "$WORK/pp2" "$WORK"/t_{dir,fifo,garbage,range} --out "$WORK/rep_t" \
  >/dev/null 2>"$WORK/t.err" || rc=$?
[ "$rc" -eq 0 ] || fail "report with damaged traces exited $rc: $(cat "$WORK/t.err")"
[ "$(wc -l <"$WORK/t.err")" -eq 4 ] || fail "damaged traces: $(cat "$WORK/t.err")"
line=$(grep -n '"pid":1e300' "$WORK/t_range/trace.json" | cut -d: -f1)
for want in "t_dir/trace.json is not a regular file" "t_fifo/trace.json is not a regular file" \
  "t_garbage/trace.json holds no step event" \
  "t_range/trace.json:$line: \"pid\" is 1e\+300, not a whole number from 0 to 1048575"; do
  grep -qE "^bagpipe: warning: report: $WORK/$want; $WORK/t_[a-z]+ is reported without its timeline" \
    "$WORK/t.err" || fail "no warning /$want/: $(cat "$WORK/t.err")"
done
[ -s "$WORK/rep_t/timeline_run1.svg" ] && [ -s "$WORK/rep_t/comm_run5.svg" ] ||
  fail "damaged traces: plots missing: $(ls "$WORK/rep_t")"
ls "$WORK/rep_t" | grep -q 'timeline_run[2-5]' && fail "a timeline from a damaged trace"

# A run that diverged at once (every validation loss non-finite, logged as null):
# its loss plots show the training loss of the steps before.
mkdir -p "$WORK/diverged"
grep -E '"type":"(config|stages)"' "$WORK/dp2/metrics.jsonl" >"$WORK/diverged/metrics.jsonl"
grep -m 2 '"type":"step"' "$WORK/dp2/metrics.jsonl" >>"$WORK/diverged/metrics.jsonl"
grep -m 2 '"type":"step"' "$WORK/dp2/metrics.jsonl" | sed -E 's/"step":[0-9]+/"step":9/; s/"loss":[^,]+/"loss":null/' \
  >>"$WORK/diverged/metrics.jsonl"
echo '{"type":"eval","step":9,"val_loss":null}' >>"$WORK/diverged/metrics.jsonl"
"$BP" report "$WORK/diverged" --out "$WORK/rep_div" >/dev/null 2>"$WORK/div.err" ||
  fail "report of a diverged run: $(cat "$WORK/div.err")"
grep -q "set title 'training loss against training time'" "$WORK/rep_div/loss_time.gp" &&
  [ -s "$WORK/rep_div/loss_time.svg" ] || fail "diverged run: no training loss plot"

# A gnuplot that exits 0 but leaves its plots empty, as on a full disk: the report
# fails in one line and keeps no zero-byte plot (before: exit 0, empty plots).
mkdir -p "$WORK/fakebin"
printf '#!/bin/sh\n: >"${1%%.gp}.svg"; : >"${1%%.gp}.png"\n' \
  >"$WORK/fakebin/gnuplot"
chmod +x "$WORK/fakebin/gnuplot"
rc=0
PATH="$WORK/fakebin:$PATH" "$BP" report "$WORK/pp2" --out "$WORK/full" >/dev/null 2>"$WORK/full.err" || rc=$?
[ "$rc" -eq 1 ] || fail "report with empty plots exited $rc: $(cat "$WORK/full.err")"
grep -qE "^bagpipe: error: report: gnuplot left $WORK/full/[a-z_0-9]+.svg empty or missing \(a full disk\?\)" \
  "$WORK/full.err" || fail "report with empty plots said: $(cat "$WORK/full.err")"
if find "$WORK/full" \( -name '*.svg' -o -name '*.png' \) -size 0 | grep -q .; then
  fail "zero-byte plots left: $(ls -l "$WORK/full")"
fi

# bad input
PREFIX=(env)
bad() { # exit-code pattern args...
  local want=$1 pattern=$2 rc=0
  shift 2
  "${PREFIX[@]}" "$BP" report "$@" >"$WORK/bad.out" 2>"$WORK/bad.err" || rc=$?
  [ "$rc" -eq "$want" ] || fail "report $* exited $rc, expected $want: $(cat "$WORK/bad.err")"
  [ "$(wc -l <"$WORK/bad.err")" -eq 1 ] || fail "report $* printed: $(cat "$WORK/bad.err")"
  grep -qE "^bagpipe: error: $pattern" "$WORK/bad.err" ||
    fail "report $* said: $(cat "$WORK/bad.err")"
  [ ! -e "$WORK/none" ] || fail "report $* created its output folder"
  echo "report $*: $(cat "$WORK/bad.err")"
}
mkdir -p "$WORK/empty"
printf '{"type":"config","model":"gpt"}\n' >"$WORK/empty/metrics.jsonl"
mkdir -p "$WORK/nolog"
bad 2 "report: run folder $WORK/missing does not exist" "$WORK/missing" --out "$WORK/none"
bad 2 "report: $WORK/nolog has no metrics.jsonl" "$WORK/nolog" --out "$WORK/none"
bad 2 "report: --out DIR is required" "$WORK/pp2"
bad 2 "report: no RUN folder given" --out "$WORK/none"
bad 2 "unknown option '--bogus'" "$WORK/pp2" --bogus --out "$WORK/none"
bad 1 "report: .*metrics.jsonl holds no step record" "$WORK/empty" --out "$WORK/none"
# A number out of an integer's range is refused, naming the file and line (a
# conversion to an integer would be undefined).
for v in 1e300:1e\\+300 -5:-5 2.5:2.5; do
  mkdir -p "$WORK/range"
  { cat "$WORK/empty/metrics.jsonl"; printf '{"type":"step","step":%s,"loss":1}\n' "${v%%:*}"; } \
    >"$WORK/range/metrics.jsonl"
  bad 1 "report: $WORK/range/metrics.jsonl:2: \"step\" is ${v#*:}, not a whole number from 0 to 9007199254740992" \
    "$WORK/range" --out "$WORK/none"
done
printf '{"type":"step","step":1,"loss":1}\n{"type":"eval","step":1e19}\n' >"$WORK/range/metrics.jsonl"
bad 1 "report: $WORK/range/metrics.jsonl:2: \"step\" is 1e\\+19" "$WORK/range" --out "$WORK/none"
mkdir -p "$WORK/fifo_log" && mkfifo "$WORK/fifo_log/metrics.jsonl"
PREFIX=(timeout 20)
bad 1 "report: $WORK/fifo_log/metrics.jsonl is not a regular file" "$WORK/fifo_log" --out "$WORK/none"
PREFIX=(env PATH=/nonexistent)
bad 1 "report: gnuplot is not installed" "$WORK/pp2" --out "$WORK/none"
echo "report: ok"
