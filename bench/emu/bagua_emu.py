#!/usr/bin/env python3
"""Bagua's algorithms on 16 emulated V100s at 100, 25 and 10 Gbit/s (experiments/bagua_emu.sh).

8 namespace hosts of 2 ranks (scripts/cluster.sh, brought up here once per network, its
links shaped by the kernel to the network's rate over that network's dilation, so that
every network moves about the same real bytes per second; the two ranks of a host talk
through shared memory, as GPUs of a server over NVLink). A gpt of 7.1 M parameters (4
blocks of 384 channels, 6 heads, 128 tokens), 16 samples per rank, dp 16, every algorithm
of Bagua's family at its defaults but qadam's warm-up (2 steps, so the timed steps 3..
compress). Per run: mean step (steps 3..; easgd to step 6, so that one of the 4 averages
as one in 4 of a long run does; async to step 30, so that its rounds, one per 40-70 ms
of the device's time, come as in a long run); time to loss relative to allreduce =
allreduce's step x its steps to the loss / (the algorithm's step x its steps), the steps from the shipped
statistical-efficiency study (docs/results/bagua_convergence, the factors `bagpipe plan`
uses: bagpipe plan --json lists them). allreduce at 25 Gbit runs three times.
Predicted: `bagpipe simulate` on the same two levels (--intra 1200 Gbit/s, --inter the
network, 2 ranks per node). Options: --steps N (5), --out DIR, --json FILE, --markdown
FILE, --table FILE (the markdown of an earlier --json).
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_runs import BP, CLUSTER, SIM_EAGER, Pool, add_output_args, save, spread, table_only  # noqa: E402

MODEL = ["--layers", "4", "--embd", "384", "--heads", "6", "--seq-len", "128", "--batch", "256"]
# (Gbit/s, dilation): real bytes per host at 800 Mbit/s or less (higher dilations, which
# would shrink host-side delays further, take too long here)
NETS = [(100, 128), (25, 64), (10, 32)]
ALGOS = ["allreduce", "bytegrad", "qadam", "decentralized", "lp-decentralized", "async",
         "powersgd", "easgd"]
# Steps to the loss relative to allreduce's: docs/results/bagua_convergence (2 ranks,
# defaults; the factors of src/parallel/dp/*.c that bagpipe plan uses).
STEPS_FACTOR = {"allreduce": 1.0, "bytegrad": 1.246, "qadam": 0.951, "decentralized": 1.083,
                "lp-decentralized": 1.118, "async": 1.156, "powersgd": 1.299, "easgd": 1.372}


# Steps of the algorithms whose timed steps must span their period (the docstring).
STEPS = {"easgd": 6, "async": 30}


def algo_opts(a):
    return ["--qadam-warmup", "2"] if a == "qadam" else []


def predict(algo, gbit):
    """simulate's step ms of this algorithm on the two-level network the hosts emulate."""
    sim = subprocess.run([BP, "simulate", "--device", "emu:v100", "--steps", "100000", "--dp", "16",
                          "--dp-algo", algo] + MODEL + algo_opts(algo) +
                         ["--intra", "bw=1200Gbit,lat=5us", "--inter", f"bw={gbit}Gbit,lat=50us",
                          "--ranks-per-node", "2"] + SIM_EAGER, capture_output=True, text=True)
    if sim.returncode:
        sys.exit(f"simulate failed: {sim.stderr}")
    return float(dict(line.split(None, 1) for line in sim.stdout.splitlines() if " " in line)["step_ms"])


def markdown(rows, path):
    """Step: the mean of the timed steps, which counts the steps that average (easgd's
    every 4th) as the time to a loss does."""
    lines = ["| algorithm | " + " | ".join(f"{g} Gbit/s: step ms (vs allreduce), time to loss vs allreduce; "
                                        "predicted" for g, _ in NETS) + " |",
             "|---|" + "---:|" * len(NETS)]
    by = {(r["gbit"], r["algo"]): dict(r, step_ms=r["mean_ms"]) for r in rows if not r["rep"]}
    rank, prank = {}, {}
    for g, _ in NETS:
        ar = by[(g, "allreduce")]["step_ms"]
        ttl = {a: ar / (by[(g, a)]["step_ms"] * STEPS_FACTOR[a]) for a in ALGOS}
        pred = {a: predict(a, g) for a in ALGOS}
        pttl = {a: pred["allreduce"] / (pred[a] * STEPS_FACTOR[a]) for a in ALGOS}
        rank[g] = sorted(ALGOS, key=lambda a: -ttl[a])
        prank[g] = sorted(ALGOS, key=lambda a: -pttl[a])
        for a in ALGOS:
            by[(g, a)].update(ttl=ttl[a], pred_ms=pred[a], pred_ttl=pttl[a])
    for a in ALGOS:
        cells = []
        for g, _ in NETS:
            r = by[(g, a)]
            cells.append(f"{r['step_ms']:.1f} ({by[(g, 'allreduce')]['step_ms'] / r['step_ms']:.2f}x), "
                         f"{r['ttl']:.2f}x; {r['pred_ms']:.1f}, {r['pred_ttl']:.2f}x")
        lines.append(f"| {a} (steps x{STEPS_FACTOR[a]}) | " + " | ".join(cells) + " |")
    lines.append("")
    for g, _ in NETS:
        lines.append(f"- {g} Gbit/s, fastest to the loss first: measured " + " > ".join(rank[g]))
        lines.append("  predicted " + " > ".join(prank[g]))
    reps = [r["mean_ms"] for r in rows if r["gbit"] == 25 and r["algo"] == "allreduce"]
    lines.append(f"- allreduce at 25 Gbit/s, {len(reps)} runs: {', '.join(f'{x:.1f}' for x in reps)} ms, "
                 f"spread (max - min) / mean {spread(reps):.3f}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    add_output_args(ap, "/tmp/bagpipe_bagua_emu")
    a = ap.parse_args()
    if table_only(a, markdown):
        return
    rows = []
    for gbit, K in NETS:
        subprocess.run([CLUSTER, "down"], check=True)
        subprocess.run([CLUSTER, "up", "8", "--rate", f"{gbit * 1000 // K}mbit"], check=True,
                       stdout=subprocess.DEVNULL)
        pool = Pool(8, 1)
        todo = [(al, 0) for al in ALGOS] + ([("allreduce", 1), ("allreduce", 2)] if gbit == 25 else [])
        for algo, rep in todo:
            steps = max(a.steps, STEPS.get(algo, 0))
            o = ["--device", "emu:v100", "--dilation", str(K), "--steps", str(steps), "--dp", "16",
                 "--dp-algo", algo] + MODEL + algo_opts(algo)
            d = os.path.join(a.out, f"{gbit}gbit_{algo}" + (f"_r{rep}" if rep else ""))
            m = pool.train(d, 16, 2, o).result()
            m.update(gbit=gbit, dilation=K, algo=algo, rep=rep)
            rows.append(m)
            print(f"{gbit:3d} Gbit/s {algo:16s} r{rep}: {m['step_ms']:7.1f} ms, dp MB/step "
                  f"{m['bytes']['dp'] / 1e6:6.2f}, exposed dp {m['exposed_ms']['dp']:6.1f} ms", flush=True)
    save(a, rows, markdown)


if __name__ == "__main__":
    main()
