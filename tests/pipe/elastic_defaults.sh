#!/usr/bin/env bash
# Elastic averaging converges at its defaults: alpha = 0.9 / N, so that the replicas'
# mean moves from the center by 1 - alpha (N + 1) = 0.1 - 0.9 / N per averaging,
# within (-1, 1). At the former default alpha = 0.5 that factor was -1.5 for N = 4:
# the gap grows 1.5x every --ea-period steps and the loss climbs back.
#  - AvgPipe with 4 pipelines (one process) and --dp-algo easgd on 4 ranks, at the
#    defaults, log the default alpha and end with a training loss below BOUND x
#    their first one (a plain run ends at 0.73x, both at 0.80x; at alpha = 0.5 the
#    loss is 550x its first at step 60).
#  - alpha (N + 1) >= 2 is refused with a message naming --ea-alpha and the bound.
source "$(dirname "$0")/lib.sh"

STEPS=60
BOUND=0.85
M=(--layers 2 --embd 16 --heads 2 --seq-len 16 --batch 16 --data "$TEXT" --progress none
  --log-every 1 --eval-every 0 --steps "$STEPS" --ea-period 2)

# converges NAME W ALPHA OPTIONS...: the run on W ranks logs alpha=ALPHA and its last
# loss is below BOUND x its first.
converges() {
  local name=$1 w=$2 alpha=$3
  shift 3
  local f="$WORK/$name/metrics.jsonl"
  launch "$w" "$BP" train "${M[@]}" "$@" --out "$WORK/$name" >/dev/null 2>"$WORK/err" ||
    fail "$name: the run failed: $(cat "$WORK/err")"
  grep -q "alpha=$alpha " "$f" || fail "$name: not alpha=$alpha: $(head -n 1 "$f")"
  values "$f" step loss |
    awk -v b="$BOUND" -v name="$name" 'NR == 1 {first = $2} {last = $2}
      END { printf "%s: loss %g -> %g (bound %g x first)\n", name, first, last, b
            exit !(last == last && last < b * first) }' || fail "$name: did not converge"
}

converges avgpipe4 1 0.225 --pipelines 4
converges easgd4 4 0.225 --dp-algo easgd

refused 1 '^bagpipe: error: option --ea-alpha: 0.5 makes the elastic averaging of 4 pipelines diverge \(the replicas. mean moves from the center by 1 - alpha \(N \+ 1\) = -1.5 per averaging\); alpha must be below 2 / \(N \+ 1\) = 0.4 \(default 0.9 / N = 0.225\)$' \
  -- "${M[@]}" --pipelines 4 --ea-alpha 0.5
refused 3 '^bagpipe: \[rank 0\] error: option --ea-alpha: 0.7 makes the elastic averaging of 3 ranks diverge .* = -1.8 per averaging\); alpha must be below 2 / \(N \+ 1\) = 0.5 \(default 0.9 / N = 0.3\)$' \
  -- "${M[@]}" --dp-algo easgd --ea-alpha 0.7 --batch 12
echo ok
