#!/usr/bin/python3
"""bytegrad against DDP's default side by side in one run, so that both see the
same load (run.sh's runs, a minute apart on a shared machine, do not):

  mpirun -np 2 python3 bench/torch_hooks/pair.py [--model gpt] [--rounds 3] [--steps 20]

Every rank holds copies of train.py's model, each with its own optimizer: one
trained alone (local: the computation's cost), one under DDP's default (gloo
allreduce), one under bagpipe's bytegrad (its default buckets: 0.25 MB), one
under bytegrad with DDP's buckets (1 MB, then 25 MB), and one under bytegrad whose
waits test every 50 us and sleep in between (bagpipe.init's poll; 0, the default,
blocks in MPI). They take their steps in turn on the same batches, each step's turn
starting one further along (so that none always follows DDP's or the local step);
rank 0 prints, per round and over all rounds, the median step (zero_grad to the end
of optimizer.step, steps 2 on) of each, DDP's step over it, and the training loss
of each at the last step."""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import train  # noqa: E402  (train.py of this folder)
import bagpipe.torch as bpt  # noqa: E402
from bagpipe import _C  # noqa: E402

#: name: (train.py's algorithm, poll interval of its waits, DDP's bucket_cap_mb and
#: first bucket in MB; None: with_bagpipe's default, DDP's 25 and 1 for DDP)
VARIANTS = {"local": ("local", 0, None, None), "DDP default": ("ddp", 0, None, None),
            "bytegrad": ("bytegrad", 0, None, None),
            "bytegrad, DDP's buckets": ("bytegrad", 0, 25, 1),
            "bytegrad, polling waits": ("bytegrad", 50e-6, None, None)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("cnn", "gpt", "mlp"), default="gpt")
    ap.add_argument("--text", default=None, help="gpt: the text (default: the KJV by `bible`)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=None, help="default: run.sh's for the model")
    args = ap.parse_args()
    batch = args.batch or {"mlp": 16, "cnn": 32, "gpt": 8}[args.model]
    torch.set_num_threads(1)
    bpt.init_process_group()
    rank = _C.rank()
    task = train.Task(args.model, args.text, rank)
    runs = {}
    first = dist._DEFAULT_FIRST_BUCKET_BYTES
    for name, (algo, poll, bucket_mb, first_mb) in VARIANTS.items():
        _C.set_poll(poll)  # its communication thread's, made now
        base = task.model()
        opt = train.optimizer(algo, args.model, base.parameters())
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(first_mb * 2**20) if first_mb else first
        runs[name] = (train.wrap(algo, base, opt, bucket_mb), opt, poll)
    dist._DEFAULT_FIRST_BUCKET_BYTES = first
    times = {name: [] for name in VARIANTS}
    losses = {}
    for _ in range(args.rounds):
        for name in VARIANTS:
            times[name].append([])
        for i in range(args.steps):
            x, y = task.batch(batch)
            order = list(runs.items())
            for name, (net, opt, poll) in order[i % len(order):] + order[:i % len(order)]:
                _C.set_poll(poll)
                t0 = time.perf_counter()
                opt.zero_grad()
                loss = task.loss(net, x, y)
                loss.backward()
                opt.step()
                times[name][-1].append(time.perf_counter() - t0)
                losses[name] = loss.item()
    if rank == 0:
        print(f"{_C.size()} ranks, {args.model}, {batch} a step; median step of each (ms), "
              "and DDP's step over it:")
        for r in range(args.rounds):
            print(f"round {r}: " + line({k: v[r][2:] for k, v in times.items()}))
        print("all: " + line({k: sum((s[2:] for s in v), []) for k, v in times.items()}))
        print("last training loss: " + ", ".join(f"{k} {v:.4f}" for k, v in losses.items()))
    dist.destroy_process_group()


def line(times):
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    ddp = med["DDP default"]
    return "; ".join(f"{k} {m:.1f} ({ddp / m:.2f}x)" for k, m in med.items())


if __name__ == "__main__":
    main()
