#!/usr/bin/python3
"""One run of bench/torch_hooks (run.sh): a model data-parallel on the ranks of
`mpirun`, with one of

  ddp             DDP's default (gloo allreduce)
  fp16            DDP with torch's fp16_compress_hook
  torch-powersgd  DDP with torch's PowerSGD hook (rank 4, from step 2, one bucket)
  bytegrad        bagpipe.torch's bytegrad hook (MinMaxUInt8, C_LP_S)
  powersgd        bagpipe.torch's PowerSGD hook (rank 4, from step 2)
  decentralized   bagpipe.torch's decentralized (shift_one, Bagua's order)
  allreduce, qadam, lp-decentralized, async, easgd: bagpipe.torch's others
                  (qadam: QAdamOptimizer, warm-up 5 steps, lr 1e-3; 5e-4 on gpt)
  local           no communication: each rank trains alone (the computation's cost)

Models (--model): mlp, 784-2560-2560-1024-10 (10.9 M parameters) on Fashion-MNIST,
SGD with momentum; cnn, two convolutions with BatchNorm and two linear layers
(207k parameters) on Fashion-MNIST, SGD with momentum; gpt, a causal transformer
over bytes (bench/torch/models.py: 2 layers, width 128, 4 heads, 64 positions,
431k parameters) on the KJV text (--text, the bytes of `bible`), AdamW at lr 5e-4.

Every rank its own batches. Rank 0 prints one JSON line per step ({"step", "ms",
"loss"}: milliseconds from the start of the step to the end of optimizer.step,
this rank's training loss) and a last line with the test loss of the model (the
average of the replicas for the weight algorithms): 2000 test images, or 16
fixed validation windows of the text's last tenth."""
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
import models  # noqa: E402  (bench/torch/models.py)
import bagpipe  # noqa: E402
import bagpipe.torch as bpt  # noqa: E402
from bagpipe import _C  # noqa: E402

ALGOS = ("ddp", "fp16", "torch-powersgd", "bytegrad", "powersgd", "decentralized", "allreduce",
         "qadam", "lp-decentralized", "async", "easgd", "local")


def mlp():
    torch.manual_seed(0)
    dims = [784, 2560, 2560, 1024, 10]
    layers = []
    for i in range(len(dims) - 1):
        layers += [torch.nn.Linear(dims[i], dims[i + 1]), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def cnn(width=16, hidden=128):
    """conv 1->w, BN, ReLU, pool; conv w->2w, BN, ReLU, pool; linear 98w->hidden->10
    (width 16, hidden 128: 207k parameters; lp_ratio.py's is width 8, hidden 24)."""
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Unflatten(1, (1, 28, 28)),
                         nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(width, 2 * width, 3, padding=1),
                         nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(98 * width, hidden), nn.ReLU(), nn.Linear(hidden, 10))


GPT_SHAPE = dict(n_layer=2, n_embd=128, n_head=4, seq_len=64)


class LM(torch.nn.Module):
    """models.GPT returning the loss (the wrappers see one tensor out)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gpt = models.GPT(**GPT_SHAPE)

    def forward(self, x, y):
        return self.gpt(x, y)[1]


class Task:
    """The model's batches, loss and test loss."""

    def __init__(self, name, text, rank):
        self.name, self.g = name, torch.Generator().manual_seed(1 + rank)
        if name == "gpt":
            self.train, self.val = data.split_text(data.load_text(text))
        else:
            self.images, self.labels = data.load_fashion("train")

    def model(self):
        return {"mlp": mlp, "cnn": cnn, "gpt": LM}[self.name]()

    def batch(self, n):
        if self.name == "gpt":
            return data.train_batch(self.train, n, GPT_SHAPE["seq_len"], self.g)
        idx = torch.randint(0, len(self.images), (n,), generator=self.g)
        return data.to_float(self.images[idx]), self.labels[idx]

    def loss(self, net, x, y):
        if self.name == "gpt":
            return net(x, y)
        return torch.nn.functional.cross_entropy(net(x), y)

    @torch.no_grad()
    def test_loss(self, base):
        base.eval()
        if self.name == "gpt":
            losses = [base(x, y) for x, y in data.val_batches(self.val, 8, GPT_SHAPE["seq_len"], 2)]
            return torch.stack(losses).mean()
        x, y = data.load_fashion("test")
        return torch.nn.functional.cross_entropy(base(data.to_float(x[:2000])), y[:2000])


def wrap(algo, base, opt, bucket_mb=None):
    if algo == "local":
        return base
    ddp = {} if bucket_mb is None else {"bucket_cap_mb": bucket_mb}
    if algo in ("bytegrad", "allreduce", "qadam"):
        return bpt.with_bagpipe(base, opt, algo, **ddp)
    if algo in ("decentralized", "lp-decentralized", "async", "easgd"):
        return bpt.with_bagpipe(base, opt, algo)
    if algo == "powersgd":
        return bpt.with_bagpipe(base, opt, "powersgd", rank=4, warmup=2)
    # torch's PowerSGD hook chains its allreduces with futures; with several buckets
    # on gloo the ranks can issue them in different orders and gloo aborts (a message
    # of the wrong size): it gets one bucket, the first one (1 MB by default) too.
    if algo == "torch-powersgd":
        dist._DEFAULT_FIRST_BUCKET_BYTES = 100 * 2**20
    ddp = DDP(base, bucket_cap_mb=100 if algo == "torch-powersgd" else bucket_mb or 25)
    if algo == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif algo == "torch-powersgd":
        state = torch_powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=4,
                                             start_powerSGD_iter=2)
        ddp.register_comm_hook(state, torch_powersgd.powerSGD_hook)
    return ddp


#: The transformer's Adam learning rate. At 1e-3 (8 windows a step, no warm-up)
#: single steps throw the loss up by 0.5-3.4 (first layer's attention) and the next
#: step brings it back, alone as under DDP: a last step that lands on one made the
#: table compare snapshots of spikes (README.md). 5e-4 showed none in 60 steps.
GPT_LR = 5e-4


def optimizer(algo, task, params):
    if algo == "qadam":
        return bpt.QAdamOptimizer(params, lr=GPT_LR if task == "gpt" else 1e-3, warmup=5)
    if task == "gpt":
        return torch.optim.AdamW(params, lr=GPT_LR)
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", choices=ALGOS, required=True)
    ap.add_argument("--model", choices=("mlp", "cnn", "gpt"), default="mlp")
    ap.add_argument("--text", default=None, help="gpt: the text (default: the KJV by `bible`)")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bucket-mb", type=float, default=None,
                    help="DDP's bucket_cap_mb for ddp, fp16, bytegrad, allreduce, qadam "
                    "(default: DDP's, 25)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    bpt.init_process_group()
    rank = _C.rank()
    task = Task(args.model, args.text, rank)
    base = task.model()
    opt = optimizer(args.algo, args.model, base.parameters())
    net = wrap(args.algo, base, opt, args.bucket_mb)
    for step in range(args.steps):
        x, y = task.batch(args.batch)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = task.loss(net, x, y)
        loss.backward()
        opt.step()
        ms = 1000 * (time.perf_counter() - t0)
        if rank == 0:
            print(json.dumps({"step": step, "ms": round(ms, 1), "loss": round(loss.item(), 4)}),
                  flush=True)
    if hasattr(net, "finish"):
        net.finish()
        base.load_state_dict(net.consensus_state_dict())
    test = task.test_loss(base)
    if rank == 0:
        print(json.dumps({"test_loss": round(test.item(), 4),
                          "params": sum(p.numel() for p in base.parameters())}), flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
