#!/usr/bin/python3
"""The tables of bench/torch_hooks from run.sh's files (OUT/RATE-MODEL-ALGO.REP.jsonl):
per rate, model and algorithm, over the repeats, the median step time (the median
of each repeat's steps 3 on: DDP rebuilds its buckets at step 1 and the PowerSGD
hooks start at step 2; then the median of the repeats and their range), the mean
step time (each repeat's mean of the same steps, then their median: a configuration
whose steps alternate between two lengths reads wrong by its median alone), the
speed-up over DDP's default (medians), the training loss (rank 0's mean of the
last 5 steps, averaged over the repeats), the test loss (averaged), and the load
average (1 minute) before the runs, lowest to highest; under each table, DDP's
step over bytegrad's in each repeat.

  summarize.py OUT RATE..."""
import glob
import json
import os
import re
import statistics
import sys

ALGOS = ("ddp", "fp16", "torch-powersgd", "bytegrad", "powersgd", "decentralized", "allreduce",
         "qadam", "lp-decentralized", "async", "easgd", "local")
NAMES = {"ddp": "DDP default (allreduce)", "fp16": "torch fp16_compress_hook",
         "torch-powersgd": "torch PowerSGD hook (r 4)", "bytegrad": "bagpipe bytegrad",
         "powersgd": "bagpipe powersgd (r 4)", "decentralized": "bagpipe decentralized",
         "allreduce": "bagpipe allreduce", "qadam": "bagpipe qadam (warm-up 5)",
         "lp-decentralized": "bagpipe lp-decentralized", "async": "bagpipe async",
         "easgd": "bagpipe easgd", "local": "local (no communication)"}


def read(path):
    steps, end = [], {}
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                d = json.loads(line)
                (steps.append(d) if "step" in d else end.update(d))
    return steps, end


def load_of(path):
    with open(path) as f:
        return float(f.readline().split("load average:")[1].split(",")[0])


def runs(out, rate, model, algo):
    """Per repeat: (median step ms, train loss, test loss, load before, mean step ms)."""
    got = []
    for path in sorted(glob.glob(f"{out}/{rate}-{model}-{algo}.*.jsonl")):
        steps, end = read(path)
        if len(steps) < 4:
            continue
        timed = [s["ms"] for s in steps[3:]]
        got.append((statistics.median(timed), statistics.mean(s["loss"] for s in steps[-5:]),
                    end.get("test_loss", float("nan")), load_of(path[:-len("jsonl")] + "load"),
                    statistics.mean(timed)))
    return got


def main():
    out, rates = sys.argv[1], sys.argv[2:]
    models = sorted({re.match(r".*?-(\w+)-", os.path.basename(p)).group(1)
                     for p in glob.glob(f"{out}/*.jsonl")})
    for rate in rates:
        for model in models:
            table = {a: runs(out, rate, model, a) for a in ALGOS}
            if not table["ddp"]:
                continue
            ddp = statistics.median(r[0] for r in table["ddp"])
            print(f"\n{rate}, {model} ({len(table['ddp'])} repeats)\n")
            print("| algorithm | step ms: median (range) | mean | vs DDP | train loss | test loss | load |")
            print("|---|---|---|---|---|---|---|")
            for a, rs in table.items():
                if not rs:
                    print(f"| {NAMES[a]} | (no result) | | | | | |")
                    continue
                ms = [r[0] for r in rs]
                med = statistics.median(ms)
                loads = sorted(r[3] for r in rs)
                mean = statistics.median(r[4] for r in rs)
                print(f"| {NAMES[a]} | {med:.0f} ({min(ms):.0f}-{max(ms):.0f}) | {mean:.0f} | {ddp / med:.2f}x | "
                      f"{statistics.mean(r[1] for r in rs):.3f} | "
                      f"{statistics.mean(r[2] for r in rs):.3f} | {loads[0]:.1f}-{loads[-1]:.1f} |")
            paired(table)


def paired(table):
    """DDP's step over bytegrad's, repeat by repeat (the two ran a minute apart, under
    about the same load)."""
    pairs = [d[0] / b[0] for d, b in zip(table["ddp"], table["bytegrad"])]
    if pairs:
        print(f"\nDDP's step over bytegrad's, repeat by repeat: "
              f"{', '.join(f'{x:.2f}x' for x in pairs)}")


if __name__ == "__main__":
    main()
