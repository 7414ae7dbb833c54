#!/usr/bin/python3
"""lp-decentralized's step against its computation in the CLI, measured in one run:

  bench/dp/lp_ratio.py [--ranks 2] [--rounds 3] [--steps 40] [--bagpipe BIN[,BIN...]] [-- ARGS]

Each round runs `bagpipe train --dp-algo lp-decentralized` on --ranks ranks of this
machine (a small gpt unless ARGS say otherwise) with every binary given, one after
the other, and reads the metrics log: per step, step_ms (the whole step) and
compute_ms (forward, backward and the optimizer's update: a local step's
computation). Prints per binary the medians over steps 5 on of every round and
their ratio (the target: within 1.2x); several binaries compare builds side by
side, e.g. before and after a change."""
import argparse
import statistics

from common import Bagpipe, BAGPIPE

SMALL = ["--layers", "2", "--embd", "64", "--heads", "2", "--seq-len", "64", "--batch", "8",
         "--eval-every", "0", "--log-every", "1"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--bagpipe", default=BAGPIPE, help="binaries, comma-separated")
    p.add_argument("args", nargs="*", help="after --: options for every run")
    a = p.parse_args()
    bins = a.bagpipe.split(",")
    runners = [Bagpipe(b) for b in bins]
    args = (a.args or SMALL) + ["--dp-algo", "lp-decentralized", "--steps", str(a.steps)]
    got = {b: ([], []) for b in bins}
    for _ in range(a.rounds):
        for b, r in zip(bins, runners):
            steps = r.train(a.ranks, args).steps[5:]
            got[b][0].extend(x["step_ms"] for x in steps)
            got[b][1].extend(x["compute_ms"] for x in steps)
    for r in runners:
        r.close()
    for b, (step, compute) in got.items():
        s, c = statistics.median(step), statistics.median(compute)
        print(f"{b}: step {s:.2f} ms, computation {c:.2f} ms: {s / c:.2f}x "
              f"({a.ranks} ranks, {a.rounds} x {a.steps} steps)")


if __name__ == "__main__":
    main()
