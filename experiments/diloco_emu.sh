#!/usr/bin/env bash
# DiLoCo's time to loss on slow links against Bagua's algorithms and easgd: 2 emulated
# V100s on 2 namespace hosts of scripts/cluster.sh (cluster name from BP_CLUSTER, default
# `dilocoemu`, removed at the end) at 20 Mbit/s with 20 ms and 100 Mbit/s with 10 ms
# (bench/emu/diloco_emu.py); the steps to the loss from the CPU studies. Writes
# docs/results/diloco/time_to_loss.{md,json} and that section of docs/results/diloco's
# page. About 30 minutes.
# Environment: BAGPIPE (binary), RUNS_DIR, BEST_FACTOR (the best setting's steps factor,
# measured by bench/dp/diloco.py --eval-every 100 --reach 1.882 when not given), REUSE=1
# (write the page from the runs already in RUNS_DIR: their log and the page's JSON).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BP=${BAGPIPE:-$ROOT/build/bagpipe}
export OPENBLAS_NUM_THREADS=1
export BP_CLUSTER=${BP_CLUSTER:-dilocoemu}
RUNS=${RUNS_DIR:-/tmp/bagpipe_experiments}/diloco_emu
PAGE=$ROOT/docs/results/diloco
[ "${REUSE:-}" = 1 ] || { rm -rf "$RUNS" && mkdir -p "$RUNS"; }
trap '"$ROOT/scripts/cluster.sh" down' EXIT
T0=$(date +%s) LOAD0=$(cut -d' ' -f1 /proc/loadavg)
BEST="streaming-diloco --inner-steps 40 --fragments 2 --outer-compress minmax2"
if [ -z "${BEST_FACTOR:-}" ]; then
  # The best setting's steps to 1.882 nats over allreduce's 733.9 (docs/results/diloco's
  # efficiency: the same settings, evaluations every 100 steps).
  /usr/bin/python3 "$ROOT/bench/dp/diloco.py" --bagpipe "$BP" --steps 1000 --eval-every 100 \
    --reach 1.882 --allreduce "1.78621638,3.337216" --variant "$BEST" --keep "$RUNS/best" \
    --json "$RUNS/best.json" | tee "$RUNS/log_best.txt"
  BEST_FACTOR=$(/usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); v = [x for k, x in d.items() if k != "allreduce"][0]
print("%.3f" % (v["steps_to_reach"] / 733.9))' "$RUNS/best.json")
fi
if [ "${REUSE:-}" = 1 ]; then
  /usr/bin/python3 "$ROOT/bench/emu/diloco_emu.py" --steps-factor-best "$BEST_FACTOR" \
    --table "$PAGE/time_to_loss.json" --markdown "$RUNS/table.md"
else
  BAGPIPE=$BP /usr/bin/python3 "$ROOT/bench/emu/diloco_emu.py" --steps-factor-best "$BEST_FACTOR" \
    --out "$RUNS" --json "$PAGE/time_to_loss.json" --markdown "$RUNS/table.md" | tee "$RUNS/log.txt"
fi
{
  echo "## Time to loss on slow links (emulated V100s)"
  echo
  echo "- command: \`experiments/diloco_emu.sh\` (the table alone from its JSON:"
  echo "  \`bench/emu/diloco_emu.py --table docs/results/diloco/time_to_loss.json --steps-factor-best $BEST_FACTOR --markdown FILE\`)"
  echo "- machine: $(nproc) cores, $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1)"
  echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  cat "$ROOT/bench/emu/diloco_emu.md"
  echo
  cat "$RUNS/table.md"
  echo
  echo "Every run (mean step over the timed steps; dp MB sent per step by all ranks, rank 0's exposed dp time):"
  echo
  echo '```'
  cat "$RUNS/log.txt"
  echo '```'
  echo
  printf '_Ran for %d min; 1-minute load average %s before, %s after._\n' \
    $((($(date +%s) - T0) / 60)) "$LOAD0" "$(cut -d' ' -f1 /proc/loadavg)"
} >"$PAGE/time_to_loss.md"
# The page's section between its markers (experiments/diloco.sh keeps it when it reruns).
/usr/bin/python3 - "$PAGE/README.md" "$PAGE/time_to_loss.md" <<'PY'
import sys
page, section = open(sys.argv[1]).read(), open(sys.argv[2]).read()
a, b = "<!-- time to loss -->\n", "<!-- /time to loss -->\n"
head, rest = page.split(a, 1) if a in page else (page.rstrip("\n") + "\n\n", b)
tail = rest.split(b, 1)[1]
open(sys.argv[1], "w").write(head + a + section + b + tail)
PY
echo "experiments/diloco_emu.sh: done: docs/results/diloco/README.md#time-to-loss-on-slow-links-emulated-v100s"
