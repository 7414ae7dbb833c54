#!/usr/bin/python3
"""The table of bench/torch_hooks from run.sh's files: per rate and algorithm the
median step time (steps 3 on: DDP rebuilds its buckets at step 1 and the PowerSGD
hooks start at step 2), the speed-up over DDP's default, the training loss (mean
of the last 5 steps of rank 0), the test loss, and the time to a loss 2% above
DDP's final one (the first step whose 5-step mean of the loss is at most that, with
the time of every step up to it added up). The load averages before and after each
run are in the last column."""
import json
import os
import statistics
import sys

ALGOS = ("ddp", "fp16", "torch-powersgd", "bytegrad", "powersgd", "decentralized", "allreduce",
         "qadam", "lp-decentralized", "async", "easgd", "local")
NAMES = {"ddp": "DDP default (allreduce)", "fp16": "torch fp16_compress_hook",
         "torch-powersgd": "torch PowerSGD hook (r 4)", "bytegrad": "bagpipe bytegrad",
         "powersgd": "bagpipe powersgd (r 4)", "decentralized": "bagpipe decentralized",
         "allreduce": "bagpipe allreduce", "qadam": "bagpipe qadam (Adam, lr 1e-3)",
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


def smooth(losses, k=5):
    return [statistics.mean(losses[max(0, i - k + 1):i + 1]) for i in range(len(losses))]


def main():
    out, rates = sys.argv[1], sys.argv[2:]
    print("| rate | algorithm | step ms (median) | vs DDP | train loss | test loss | "
          "s to 1.02 x DDP's loss | load |")
    print("|---|---|---|---|---|---|---|---|")
    for rate in rates:
        runs = {a: read(f"{out}/{rate}-{a}.jsonl") for a in ALGOS
                if os.path.exists(f"{out}/{rate}-{a}.jsonl")}
        ddp_ms = statistics.median(s["ms"] for s in runs["ddp"][0][3:])
        target = 1.02 * smooth([s["loss"] for s in runs["ddp"][0]])[-1]
        for a in (a for a in ALGOS if a in runs):
            steps, end = runs[a]
            if not steps:
                print(f"| {rate} | {NAMES[a]} | (no result) | | | | | |")
                continue
            ms = statistics.median(s["ms"] for s in steps[3:])
            sm = smooth([s["loss"] for s in steps])
            hit = next((i for i, v in enumerate(sm) if v <= target), None)
            tto = f"{sum(s['ms'] for s in steps[:hit + 1]) / 1000:.1f}" if hit is not None else "not reached"
            with open(f"{out}/{rate}-{a}.load") as f:
                load = "; ".join(line.split("load average:")[1].split(",")[0].strip() for line in f)
            print(f"| {rate} | {NAMES[a]} | {ms:.0f} | {ddp_ms / ms:.2f}x | {sm[-1]:.3f} | "
                  f"{end.get('test_loss', float('nan')):.3f} | {tto} | {load} |")


if __name__ == "__main__":
    main()
