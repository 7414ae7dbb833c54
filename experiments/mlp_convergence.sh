#!/usr/bin/env bash
# The statistical efficiency of every kind of update `bagpipe plan` chooses for mlp,
# measured on the default mlp (784-256-256-10, Fashion-MNIST, batch 64, one epoch of
# 937 steps, SGD with its cosine decay): the steps each configuration takes to reach a
# validation loss, over its baseline's. The factors plan ships for mlp
# (src/plan/plan_inputs.c) are this page's. About 5 minutes with 2 cores to itself.
# Environment: BAGPIPE (binary), RUNS_DIR (where run folders go).
source "$(dirname "$0")/lib.sh"
study_begin mlp_convergence "mlp: steps to a validation loss, each kind of update against its baseline"
export OMPI_MCA_btl_tcp_if_include=${OMPI_MCA_btl_tcp_if_include:-lo}
export OMPI_MCA_oob_tcp_if_include=${OMPI_MCA_oob_tcp_if_include:-lo}
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" -ne 0 ] || MPIRUN+=(--allow-run-as-root)
EVERY=47 # 20 evaluations of the whole test set over the epoch

# run GROUP NAME RANKS OPTIONS...: one epoch into $RUNS/GROUP.NAME
run() {
  local group=$1 name=$2 ranks=$3
  shift 3
  echo "$group $name: $ranks ranks, $*"
  "${MPIRUN[@]}" -np "$ranks" "$BP" train --model mlp --eval-every "$EVERY" --progress none \
    --overwrite --out "$RUNS/$group.$name" "$@" | grep '^done'
}
for algo in allreduce bytegrad decentralized lp-decentralized async powersgd easgd; do
  run dp "$algo" 2 --dp-algo "$algo"
done
PIPE=(--pp 2 --micro-batches 2 --schedule 1f1b)
run pipelines baseline 2 "${PIPE[@]}"
run pipelines N2 2 "${PIPE[@]}" --pipelines 2
run pipelines N4 2 "${PIPE[@]}" --pipelines 4
OCC=(--dp 2 --pp 2 --micro-batches 2 --schedule 1f1b --dp-algo allreduce)
run occ baseline 4 "${OCC[@]}"
run occ SC 4 "${OCC[@]}" --sc-stages 2 --sc-rank 8
run occ CB 4 "${OCC[@]}" --cb --cb-epilogue-only

/usr/bin/python3 - "$RUNS" "$OUT" <<'PY' | tee "$RUNS/log.txt"
import json, os, sys
runs, out = sys.argv[1], sys.argv[2]

def curve(group, name):
    pts = []
    for line in open(os.path.join(runs, "%s.%s" % (group, name), "metrics.jsonl")):
        d = json.loads(line)
        if d.get("type") == "eval":
            pts.append((d["step"], d["val_loss"]))
    return pts

def steps_to(pts, target):
    """The first step the curve reaches target, linear between evaluations."""
    for i, (s, l) in enumerate(pts):
        if l <= target:
            if i == 0:
                return s
            s0, l0 = pts[i - 1]
            return s0 + (l0 - target) / (l0 - l) * (s - s0)
    return float("inf")

groups = [("dp", ["allreduce", "bytegrad", "decentralized", "lp-decentralized", "async",
                  "powersgd", "easgd"]),
          ("pipelines", ["baseline", "N2", "N4"]),
          ("occ", ["baseline", "SC", "CB"])]
factors = {}
print("| group | configuration | final val loss | target | steps to target | baseline's | factor |")
print("|:--|:--|--:|--:|--:|--:|--:|")
for group, names in groups:
    curves = {n: curve(group, n) for n in names}
    target = max(c[-1][1] for c in curves.values())  # the highest final loss among them
    base = steps_to(curves[names[0]], target)
    for n in names:
        s = steps_to(curves[n], target)
        factors["%s.%s" % (group, n)] = {"factor": s / base, "steps": s, "baseline_steps": base,
                                         "target": target, "final": curves[n][-1][1]}
        print("| %s | %s | %.4f | %.4f | %.1f | %.1f | %.3f |"
              % (group, n, curves[n][-1][1], target, s, base, s / base))
json.dump(factors, open(os.path.join(out, "factors.json"), "w"), indent=1)
PY
plots plots "$RUNS"/*.*
{
  study_header
  cat <<TXT

The default mlp (784-256-256-10 ReLU) on Fashion-MNIST, global batch 64, one epoch
(937 steps) of SGD at lr 0.05 with its cosine decay, the whole test set evaluated every
$EVERY steps. Three groups, each against its own baseline: the dp algorithms at their
defaults on 2 ranks (against allreduce), AvgPipe's 2 and 4 pipelines on 2 stages (2
ranks, 2 micro-batches, 1f1b; against one pipeline; each step trains N batches), and
Optimus-CC's SC (PowerSGD rank 8 on both stages) and CB (epilogue only, rank 12) on
dp 2 x pp 2 (4 ranks; against plain allreduce). A group's target is the highest final
validation loss among its runs; a configuration's factor is the steps it took to reach
the target (linear between evaluations) over its baseline's. \`bagpipe plan --model
mlp\` multiplies its predicted step time by these factors. One seed each; every run but
async is deterministic, so only async's row moves with the machine's load.

TXT
  cat "$RUNS/log.txt"
  cat <<TXT

Plots (\`bagpipe report\` of every run, [index](plots/index.html)).
TXT
} >"$OUT/README.md"
study_end
