#!/usr/bin/python3
"""One run of bench/torch_hooks (run.sh): an MLP of 10.9 M parameters
(784-2560-2560-1024-10) on Fashion-MNIST, data-parallel on the ranks of
`mpirun`, with one of

  ddp             DDP's default (gloo allreduce)
  fp16            DDP with torch's fp16_compress_hook
  torch-powersgd  DDP with torch's PowerSGD hook (rank 4, from step 2, one bucket)
  bytegrad        bagpipe.torch's bytegrad hook (MinMaxUInt8, C_LP_S)
  powersgd        bagpipe.torch's PowerSGD hook (rank 4, from step 2)
  decentralized   bagpipe.torch's decentralized (shift_one, Bagua's order)
  allreduce, qadam, lp-decentralized, async, easgd: bagpipe.torch's others
                  (qadam: QAdamOptimizer, lr 1e-3, warm-up 5 steps)
  local           no communication: each rank trains alone (the computation's cost)

SGD with momentum; every rank its own batches. Rank 0 prints one JSON line per
step ({"step", "ms", "loss"}: milliseconds from the start of the step to the end
of optimizer.step, this rank's training loss) and a last line with the test loss
of the model (the average of the replicas for decentralized)."""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.algorithms.ddp_comm_hooks.default_hooks as default_hooks
import torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook as torch_powersgd
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "torch"))
import data  # noqa: E402  (bench/torch/data.py)
import bagpipe  # noqa: E402
import bagpipe.torch as bpt  # noqa: E402
from bagpipe import _C  # noqa: E402

ALGOS = ("ddp", "fp16", "torch-powersgd", "bytegrad", "powersgd", "decentralized", "allreduce",
         "qadam", "lp-decentralized", "async", "easgd", "local")


def model():
    torch.manual_seed(0)
    dims = [784, 2560, 2560, 1024, 10]
    layers = []
    for i in range(len(dims) - 1):
        layers += [torch.nn.Linear(dims[i], dims[i + 1]), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def wrap(algo, base, opt):
    if algo == "local":
        return base
    if algo in ("bytegrad", "decentralized", "allreduce", "qadam", "lp-decentralized", "async",
                "easgd"):
        return bpt.with_bagpipe(base, opt, algo)
    if algo == "powersgd":
        return bpt.with_bagpipe(base, opt, "powersgd", rank=4, warmup=2)
    # torch's PowerSGD hook chains its allreduces with futures; with several buckets
    # on gloo the ranks can issue them in different orders and gloo aborts (a message
    # of the wrong size): it gets one bucket.
    ddp = DDP(base, bucket_cap_mb=100 if algo == "torch-powersgd" else 25)
    if algo == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif algo == "torch-powersgd":
        state = torch_powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=4,
                                             start_powerSGD_iter=2)
        ddp.register_comm_hook(state, torch_powersgd.powerSGD_hook)
    return ddp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", choices=ALGOS, required=True)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()
    torch.set_num_threads(1)
    bpt.init_process_group()
    rank = _C.rank()
    base = model()
    opt = (bpt.QAdamOptimizer(base.parameters(), lr=1e-3, warmup=5) if args.algo == "qadam" else
           torch.optim.SGD(base.parameters(), lr=args.lr, momentum=0.9))
    net = wrap(args.algo, base, opt)
    images, labels = data.load_fashion("train")
    g = torch.Generator().manual_seed(1 + rank)
    for step in range(args.steps):
        idx = torch.randint(0, len(images), (args.batch,), generator=g)
        x, y = data.to_float(images[idx]), labels[idx]
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        ms = 1000 * (time.perf_counter() - t0)
        if rank == 0:
            print(json.dumps({"step": step, "ms": round(ms, 1), "loss": round(loss.item(), 4)}),
                  flush=True)
    if hasattr(net, "finish"):
        net.finish()
        base.load_state_dict(net.consensus_state_dict())
    test_x, test_y = data.load_fashion("test")
    with torch.no_grad():
        test = torch.nn.functional.cross_entropy(base(data.to_float(test_x[:2000])), test_y[:2000])
    if rank == 0:
        print(json.dumps({"test_loss": round(test.item(), 4),
                          "params": sum(p.numel() for p in base.parameters())}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
