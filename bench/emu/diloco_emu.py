#!/usr/bin/env python3
"""DiLoCo against Bagua's algorithms in time to loss on slow links (experiments/diloco_emu.sh).

2 namespace hosts of scripts/cluster.sh, one rank each, emulated V100s, the gpt of the
DiLoCo study (docs/results/diloco: the default gpt, 0.83 M parameters, global batch 16).
Two networks, 20 Mbit/s with 20 ms of one-way latency and 100 Mbit/s with 10 ms: the
hosts' links are shaped by the kernel to the rate over the dilation; this kernel has no
netem, so the latency is the run's own `--net lat=` (every message waits it, dilated by
the run as the device is). Every algorithm of Bagua's family at its defaults but qadam's
warm-up (2 steps) and async's --sync-ms (20 ms of the device's time), easgd, diloco and
streaming-diloco at their defaults, and DiLoCo's best setting of the CPU study.

Per run: the mean step
over whole periods of the algorithm (Bagua's: steps 3..6, where easgd averages once;
DiLoCo's: one H from step 4). Time to loss = mean step x steps to
the loss, the steps from the real CPU studies on the same model and batch: allreduce's
733.9 steps to 1.882 nats (docs/results/diloco's efficiency, bagua_convergence's target)
times each algorithm's factor (Bagua's: bagua_convergence's, as bench/emu/bagua_emu.py;
DiLoCo's: docs/results/diloco's, the best setting's measured by
`bench/dp/diloco.py --eval-every 100 --reach 1.882`). Options: --steps-factor-best X
(that setting's factor), --dilation K (8), --out DIR, --json FILE, --markdown FILE,
--table FILE (the markdown of an earlier --json).
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bagua_emu import STEPS_FACTOR as BAGUA_FACTOR, algo_opts  # noqa: E402
from cluster_runs import CLUSTER, Pool, add_output_args, save, table_only  # noqa: E402

# (name, Mbit/s, one-way latency ms)
NETS = [("20 Mbit/s, 20 ms", 20, 20), ("100 Mbit/s, 10 ms", 100, 10)]
ALLREDUCE_STEPS = 733.9  # to 1.882 nats, docs/results/diloco's efficiency
BEST = "streaming-diloco --inner-steps 40 --fragments 2 --outer-compress minmax2"
BEST_FACTOR = 0.0  # --steps-factor-best
BAGUA = ["allreduce", "bytegrad", "qadam", "decentralized", "lp-decentralized", "async",
         "powersgd", "easgd"]


def runs():
    """(label, options, steps factor, steps run, first timed step) of every run."""
    out = [(a, ["--dp-algo", a], BAGUA_FACTOR[a], 6, 3) for a in BAGUA]
    out += [("diloco (H 100)", ["--dp-algo", "diloco"], 1.348, 103, 4),
            ("streaming-diloco (H 100, 2 fragments)", ["--dp-algo", "streaming-diloco"], 1.222, 103, 4),
            (BEST, ["--dp-algo"] + BEST.split(), None, 43, 4)]
    return out


def markdown(rows, path):
    """Per network: mean step, time to loss in seconds and its ratio to allreduce's."""
    labels = list(dict.fromkeys(r["label"] for r in rows))
    head = "| algorithm | steps to 1.882 (x allreduce's) | " + " | ".join(
        f"{n}: step ms, time to loss s (allreduce's / it)" for n, _, _ in NETS) + " |"
    lines = [head, "|:---|---:|" + "---:|" * len(NETS)]
    by = {(r["net"], r["label"]): dict(r, factor=r["factor"] or BEST_FACTOR) for r in rows}
    best = {}
    for n, _, _ in NETS:
        ar = by[(n, "allreduce")]
        for lb in labels:
            r = by[(n, lb)]
            r["ttl_s"] = r["mean_ms"] / 1e3 * ALLREDUCE_STEPS * r["factor"]
        best[n] = sorted(labels, key=lambda lb: by[(n, lb)]["ttl_s"])
        ar_ttl = ar["ttl_s"]
        for lb in labels:
            by[(n, lb)]["vs"] = ar_ttl / by[(n, lb)]["ttl_s"]
    for lb in labels:
        f = by[(NETS[0][0], lb)]["factor"]
        cells = [f"{by[(n, lb)]['mean_ms']:.1f}, {by[(n, lb)]['ttl_s']:.0f} ({by[(n, lb)]['vs']:.2f}x)"
                 for n, _, _ in NETS]
        lines.append(f"| {lb} | {ALLREDUCE_STEPS * f:.0f} (x{f:.3f}) | " + " | ".join(cells) + " |")
    lines.append("")
    for n, _, _ in NETS:
        lines.append(f"- {n}, fastest to the loss first: " + " > ".join(best[n]))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps-factor-best", type=float, default=0)
    ap.add_argument("--dilation", type=int, default=8)
    add_output_args(ap, "/tmp/bagpipe_diloco_emu")
    a = ap.parse_args()
    if not a.steps_factor_best > 0:
        sys.exit("--steps-factor-best: the best setting's steps factor is needed")
    global BEST_FACTOR
    BEST_FACTOR = a.steps_factor_best
    if table_only(a, markdown):
        return
    K, rows = a.dilation, []
    for net, mbit, lat in NETS:
        subprocess.run([CLUSTER, "down"], check=True)
        subprocess.run([CLUSTER, "up", "2", "--rate", f"{mbit}mbit", "--dilation", str(K)], check=True,
                       stdout=subprocess.DEVNULL)
        pool = Pool(2, 1)
        for label, opts, factor, steps, first in runs():
            o = ["--device", "emu:v100", "--dilation", str(K), "--steps", str(steps),
                 "--net", f"lat={lat}ms"] + opts + algo_opts(label, K)
            d = os.path.join(a.out, f"{mbit}mbit_" + label.split()[0] + ("_best" if label == BEST else ""))
            m = pool.train(d, 2, 1, o, first).result()
            m.update(net=net, label=label, factor=factor, dilation=K)
            rows.append(m)
            print(f"{net:18s} {label:40.40s}: mean step {m['mean_ms']:8.1f} ms, dp MB/step (all ranks) "
                  f"{m['bytes']['dp'] / 1e6:7.4f}, exposed dp {m['exposed_ms']['dp']:7.1f} ms", flush=True)
    subprocess.run([CLUSTER, "down"], check=True)
    save(a, rows, markdown)


if __name__ == "__main__":
    main()
