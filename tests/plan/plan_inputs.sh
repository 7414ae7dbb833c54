#!/usr/bin/env bash
# `bagpipe plan`'s inputs and its JSON, quickly (a described cluster, no measurement):
# a crafted --factors file with replica counts out of int's range is refused in one
# line (before: cast to int, undefined); a factor that never reached the target
# (null) ranks last and is written as null, so the ranking stays valid JSON (before:
# `inf`); --trials 1, whose target would be
# NaN, is refused; and on 2 ranks a --trials run given --metrics still finds its
# trials' curves (before: they were logged to --metrics and the factors were NaN),
# and says which trial runs; a trial longer than --steps is refused; a --data that
# train would refuse is refused before measuring;
# --json is checked before any measurement, and --trial-kinds and --efficiency
# need --trials and --cluster.
source "$(dirname "$0")/lib.sh"
CLUSTER=(--cluster nodes=2,per-node=1,flops=1e12,mem-bw=1e11,intra-bw=1Gbit,intra-lat=1us,inter-bw=1Gbit,inter-lat=1ms)

# strict_json FILE: parses with no NaN or Infinity (which JSON does not have).
strict_json() {
  python3 - "$1" <<'PY' || fail "$1 is not strict JSON: $(head -c 600 "$1")"
import json, sys
def refuse(c): raise ValueError("not JSON: " + c)
json.load(open(sys.argv[1]), parse_constant=refuse)
PY
}

# factors FILE DP PIPELINES FACTOR: a ranking holding one trialled allreduce row.
factors() {
  cat >"$1" <<JSON
{"format":"bagpipe-plan","model":"gpt","ranking":[
{"algo":"allreduce","dp":$2,"pipelines":$3,"sc":false,"cb":false,"fe":false,
 "steps_factor":$4,"trialled":true,"efficiency_source":"crafted"}]}
JSON
}

for row in "1e300 0" "2 -1e300" "2.5 0" "2 1e9"; do
  read -r dp n <<<"$row"
  factors "$WORK/crafted.json" "$dp" "$n" 1
  bad "option --factors: $WORK/crafted.json has a trialled row whose dp, pipelines or steps_factor is out of range" \
    "${TINY[@]}" "${CLUSTER[@]}" --factors "$WORK/crafted.json"
done
factors "$WORK/crafted.json" 2 0 -1
bad "option --factors: .* out of range" "${TINY[@]}" "${CLUSTER[@]}" --factors "$WORK/crafted.json"

# Never reached: null, as plan now writes a trial's infinite factor.
for never in null; do
  factors "$WORK/never.json" 2 0 "$never"
  "$BP" plan "${TINY[@]}" "${CLUSTER[@]}" --factors "$WORK/never.json" --json "$WORK/n.json" \
    >"$WORK/n" || fail "plan --factors ($never) exited $?"
  strict_json "$WORK/n.json"
  python3 - "$WORK/n.json" <<'PY' || fail "never reached ($never): $(head -c 800 "$WORK/n.json")"
import json, sys
r = json.load(open(sys.argv[1]))["ranking"]
never = [k for k in r if k["trialled"]]
assert never and all(k["steps_factor"] is None for k in never), never
fits = [k for k in r if k["verdict"] == "fits"]
assert all(k["time_to_loss_s"] is None for k in never if k["verdict"] == "fits")
finite = [k for k in fits if k["time_to_loss_s"] is not None]
assert fits[:len(finite)] == finite, "a kind that never reaches the loss ranks above one that does"
PY
done

bad "option --trials: the target is allreduce's loss at 60% of the trial's steps; give at least 2" \
  "${TINY[@]}" --trials 1
# A trial longer than the run it plans (before: ran silently for days).
bad "option --trials: 1048576 steps per trial is more than the run's --steps 20" "${TINY[@]}" --trials 1048576

# --json checked before anything is measured or trialled (before: after every
# trial); it replaces only an earlier ranking, never a run's metrics log.
bad_json() { # PATTERN JSON
  local rc=0
  "$BP" plan "${TINY[@]}" --trials 5 --json "$2" >"$WORK/out" 2>"$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "--json '$2' exited $rc, not 2: $(cat "$WORK/err")"
  [ "$(grep -c '^bagpipe' "$WORK/err")" -eq 1 ] || fail "--json '$2': not one line: $(cat "$WORK/err")"
  grep -qE -- "$1" "$WORK/err" || fail "--json '$2': '$(cat "$WORK/err")' does not match '$1'"
  [ ! -e "$2.trials" ] || fail "--json '$2': trials ran"
}
mkdir "$WORK/dir"
mkfifo "$WORK/fifo"
echo '{"type":"step","step":1}' >"$WORK/metrics.jsonl"
bad_json "option --json: $WORK/dir is a directory" "$WORK/dir"
bad_json "option --json: $WORK/fifo is not a regular file" "$WORK/fifo"
bad_json "option --json: an empty name" ""
bad_json "option --json: cannot write $WORK/none/p.json: its folder $WORK/none: No such file" "$WORK/none/p.json"
bad_json "option --json: $WORK/metrics.jsonl exists and is not a ranking of bagpipe plan" "$WORK/metrics.jsonl"
grep -q '"type":"step"' "$WORK/metrics.jsonl" || fail "the metrics log was replaced"
# A data file train would refuse: refused before anything is measured (before: plan
# never read --data and ranked configurations of a run that could not start).
printf 'abc' >"$WORK/tiny.txt"
rc=0
"$BP" plan "${TINY[@]}" --data "$WORK/tiny.txt" --json "$WORK/tiny.json" >"$WORK/out" 2>"$WORK/err" || rc=$?
[ "$rc" -eq 1 ] || fail "plan --data tiny.txt exited $rc: $(cat "$WORK/err")"
grep -qx "bagpipe: error: option --data: data $WORK/tiny.txt: 3 bytes is too short for --seq-len 16 .*" "$WORK/err" ||
  fail "plan --data tiny.txt said: $(cat "$WORK/err")"
[ ! -e "$WORK/tiny.json" ] && [ ! -s "$WORK/out" ] || fail "plan --data tiny.txt measured"
# Options that only another gives a use.
bad "option --trial-kinds: only with --trials" "${TINY[@]}" --trial-kinds 2
bad "option --efficiency: only with --cluster" "${TINY[@]}" --efficiency 0.3

# --trials with --metrics: the trials log where their curves are read, not to FILE.
LAUNCH_TIMEOUT=240 launch 2 "$BP" plan "${TINY[@]}" --trials 4 --trial-kinds 2 --metrics "$WORK/m.jsonl" \
  --json "$WORK/t.json" >"$WORK/t" 2>"$WORK/t.err" || fail "plan --trials exited $?: $(cat "$WORK/t.err")"
strict_json "$WORK/t.json"
python3 - "$WORK/t.json" <<'PY' || fail "trials: $(head -c 800 "$WORK/t.json")"
import json, sys
r = json.load(open(sys.argv[1]))["ranking"]
tried = [k for k in r if k["trialled"]]
assert tried and all(k["efficiency_source"].startswith("trial of 4 steps") for k in tried), tried
ar = [k for k in tried if k["algo"] == "allreduce" and k["dp"] == 2 and not k["pipelines"]]
assert ar and all(k["steps_factor"] == 1 for k in ar), ar
PY
[ ! -e "$WORK/m.jsonl" ] || fail "the trials logged to --metrics"
# a line per trial (async's three: "(1 of 3)" ...)
for i in 1 2; do
  grep -qE "^bagpipe: info: plan: trial $i of 2( \([123] of 3\))?, 4 steps: --dp " "$WORK/t.err" ||
    fail "no line for trial $i: $(cat "$WORK/t.err")"
done
echo ok
