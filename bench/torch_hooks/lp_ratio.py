#!/usr/bin/python3
"""lp-decentralized's step against a local step, side by side in one run:

  mpirun -np 2 python3 bench/torch_hooks/lp_ratio.py [--rounds 3] [--steps 40]

Every rank holds copies of a small CNN with BatchNorm (20k parameters) on
Fashion-MNIST (VARIANTS): one trained alone (a local step: forward, backward, SGD),
one wrapped with bagpipe.torch's lp-decentralized (the ring's exchange on the
communication thread during the next forward and backward), the same with waits
that test every 50 us and sleep between (bagpipe.init's poll) and without the
buffers' broadcast at each training forward (broadcast_buffers=False), and one
with the ring's whole step inside optimizer.step (`ring.step`, as before the
exchange was overlapped).
They take their steps in turn, one each, so that all see the same load; rank 0
prints, per round and over all of them, the median time of a whole step
(zero_grad to the end of optimizer.step) and of optimizer.step alone, and the
ratios to the local step (the target: within 1.2x)."""
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

#: name: (algorithm, poll interval of its waits, broadcast_buffers)
VARIANTS = {
    "local": (None, 0, False),
    "lp-decentralized": ("lp", 0, True),
    "lp, polling waits": ("lp", 50e-6, True),
    "lp, no buffer broadcast": ("lp", 0, False),
    "whole ring step": ("whole", 0, True),
}
NAMES = tuple(VARIANTS)


class WholeStep(weights.LowPrecisionDecentralized):
    """lp-decentralized with the ring's step, exchange included, in optimizer.step."""

    def after(self):
        if self.ring is not None and self.t % self.interval == 0:
            self.ring.step(_tensors.buf(self.flat))
        weights.WeightAlgorithm.after(self)


def step(net, opt, x, y, poll):
    """(whole step s, optimizer.step s)"""
    _C.set_poll(poll)  # this thread's waits (the buffers' broadcast)
    t0 = time.perf_counter()
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    t1 = time.perf_counter()
    opt.step()
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1


def medians(times):
    """{name: [whole step ms, optimizer.step ms]}, medians over steps 2 on."""
    return {k: [statistics.median(s[j] for s in v[2:]) * 1e3 for j in (0, 1)]
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
    for name, (algo, poll, bcast) in VARIANTS.items():
        base = cnn(8, 24)
        opt = torch.optim.SGD(base.parameters(), lr=0.05, momentum=0.9)
        _C.set_poll(poll)  # its communication thread's, made now
        if algo is None:
            nets[name] = (base, opt, poll)
        elif algo == "lp":
            nets[name] = (bpt.with_bagpipe(base, opt, "lp-decentralized", broadcast_buffers=bcast),
                          opt, poll)
        else:
            nets[name] = (weights.BagpipeModule(base, opt, WholeStep()), opt, poll)
    rounds = []
    for _ in range(args.rounds):
        idx = torch.randint(0, len(images), (args.steps, args.batch), generator=g)
        times = {name: [] for name in NAMES}
        for i in idx:
            x, y = data.to_float(images[i]), labels[i]
            for name, (net, opt, poll) in nets.items():
                times[name].append(step(net, opt, x, y, poll))
        rounds.append(times)
    for name in NAMES[1:]:
        nets[name][0].finish()
    if rank:
        return
    print(f"{_C.size()} ranks, {sum(p.numel() for p in cnn(8, 24).parameters())} parameters, "
          f"{args.batch} images a step; median step of each, and its ratio to the local one:")
    for i, r in enumerate(rounds):
        print(f"round {i}: {line(medians(r))}")
    print(f"all: {line(medians({k: sum((r[k][2:] for r in rounds), []) for k in NAMES}))}")

if __name__ == "__main__":
    main()
