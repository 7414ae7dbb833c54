#!/usr/bin/python3
"""lp-decentralized's step against a local step, side by side in one run:

  mpirun -np 2 python3 bench/torch_hooks/lp_ratio.py [--rounds 3] [--steps 40]

Every rank holds copies of a small CNN with BatchNorm (20k parameters) on
Fashion-MNIST (VARIANTS): one trained alone (a local step: forward, backward, SGD),
one wrapped with bagpipe.torch's lp-decentralized (the ring's exchange on the
communication thread during the next forward and backward; rank 0's buffers
broadcast at each training forward), the same without the buffers' broadcast
(broadcast_buffers=False), and one with the ring's whole step inside
optimizer.step (`ring.step`, as before the exchange was overlapped). They take
their steps in turn, one each, each step's turn starting one further along (as
pair.py), so that all see the same load; rank 0 prints, per round and over all
of them, the median time of a whole step (zero_grad to the end of
optimizer.step) and of optimizer.step alone, and the ratios to the local step
(the target: within 1.2x)."""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from train import cnn, data  # noqa: E402  (train.py of this folder, bench/torch/data.py)
import bagpipe.torch as bpt  # noqa: E402
from bagpipe import _C  # noqa: E402
from bagpipe.torch import _tensors, weights  # noqa: E402


class WholeStep(weights.LowPrecisionDecentralized):
    """lp-decentralized with the ring's step, exchange included, in optimizer.step."""

    def after(self):
        if self.ring is not None and self.t % self.interval == 0:
            self.ring.step(_tensors.buf(self.flat))
        weights.WeightAlgorithm.after(self)


#: name: the model and optimizer wrapped (None: trained alone)
VARIANTS = {
    "local": None,
    "lp-decentralized": lambda b, o: bpt.with_bagpipe(b, o, "lp-decentralized"),
    "lp, no buffer broadcast": lambda b, o: bpt.with_bagpipe(b, o, "lp-decentralized",
                                                              broadcast_buffers=False),
    "whole ring step": lambda b, o: weights.BagpipeModule(b, o, WholeStep()),
}
NAMES = tuple(VARIANTS)


def step(net, opt, x, y):
    """(whole step s, optimizer.step s)"""
    t0 = time.perf_counter()
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    t1 = time.perf_counter()
    opt.step()
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1


def medians(times):
    """{name: [whole step ms, optimizer.step ms]}, medians of the steps given."""
    return {k: [statistics.median(s[j] for s in v) * 1e3 for j in (0, 1)]
            for k, v in times.items()}


def line(m):
    lo = m["local"]
    return "; ".join(f"{k} {v[0]:.2f} ms ({v[0] / lo[0]:.2f}x), optimizer.step {v[1]:.3f} ms"
                     for k, v in m.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(1)
    bpt.init_process_group()
    rank = _C.rank()
    images, labels = data.load_fashion("train")
    g = torch.Generator().manual_seed(1 + rank)
    nets = {}
    for name, make in VARIANTS.items():
        base = cnn(8, 24)
        opt = torch.optim.SGD(base.parameters(), lr=0.05, momentum=0.9)
        nets[name] = (make(base, opt) if make else base, opt)
    rounds = []
    for _ in range(args.rounds):
        idx = torch.randint(0, len(images), (args.steps, args.batch), generator=g)
        times = {name: [] for name in NAMES}
        for s, i in enumerate(idx):
            x, y = data.to_float(images[i]), labels[i]
            for k in range(len(NAMES)):
                name = NAMES[(s + k) % len(NAMES)]
                times[name].append(step(*nets[name], x, y))
        rounds.append(times)
    for name in NAMES[1:]:
        nets[name][0].finish()
    if rank:
        return
    print(f"{_C.size()} ranks, {sum(p.numel() for p in cnn(8, 24).parameters())} parameters, "
          f"{args.batch} images a step; median step of each, and its ratio to the local one:")
    for i, r in enumerate(rounds):
        print(f"round {i}: {line(medians({k: v[2:] for k, v in r.items()}))}")
    print(f"all: {line(medians({k: sum((r[k][2:] for r in rounds), []) for k in NAMES}))}")

if __name__ == "__main__":
    main()
