#!/usr/bin/python3
"""bagpipe's `gpt` (or `mlp`) trained data-parallel with PyTorch DDP: the peer of
`bagpipe train --dp-algo allreduce|powersgd` under mpirun.

W processes on this machine (torch.multiprocessing, gloo over loopback), each with
--threads BLAS/intra-op threads. The global batch --batch is split as batch/W per rank,
each rank draws its own random windows (seed + rank), AdamW (gpt) or SGD (mlp) as in
train.py. Rank 0 times whole steps (batch, forward, backward with DDP's overlapped bucket
allreduce, optimizer step) and prints them as JSON lines in bagpipe's metrics schema.

  ddp.py --world 2 --time-steps 30                    # plain DDP (allreduce)
  ddp.py --world 2 --time-steps 30 --hook powersgd --rank 4 --powersgd-start 10
  ddp.py --world 2 --steps 300 --eval-every 20        # training run with validation loss
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time


# train.py sets OpenBLAS's thread count from --threads before it imports torch (see
# there why that must come first), so it is imported before torch here too; children
# started by torch.multiprocessing (spawn) import this module again and inherit the
# environment.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402  (model, optimizer, data and evaluation of the single-process peer)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", type=int, default=2, help="processes (default 2)")
    p.add_argument("--hook", choices=["none", "powersgd"], default="none",
                   help="DDP communication hook (default none: plain allreduce of gradient buckets)")
    p.add_argument("--rank", type=int, default=4, help="powersgd: matrix_approximation_rank (default 4)")
    p.add_argument("--powersgd-start", type=int, default=2,
                   help="powersgd: start_powerSGD_iter, steps of plain allreduce first (PyTorch needs >= 2 "
                        "with error feedback; default 2)")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb (default 25, DDP's own)")
    p.add_argument("--first-bucket-mb", type=float,
                   help="size of DDP's first bucket (DDP's own default: 1 MB; with --hook powersgd the default "
                        "is --bucket-mb, one bucket, because with gloo and two or more buckets the hook's chained "
                        "allreduces of different buckets start in a different order on different ranks and "
                        "the job aborts: 'gloo::EnforceNotMet ... op.preamble.length <= op.nbytes')")
    # the rest is train.py's command line (model, batch = global batch, steps, lr, seed, ...)
    a, rest = p.parse_known_args(argv)
    t = train.parse_args(rest)
    for k, v in vars(a).items():
        setattr(t, "ddp_" + k if k == "rank" else k, v)
    if t.first_bucket_mb is None:
        t.first_bucket_mb = t.bucket_mb if t.hook == "powersgd" else dist._DEFAULT_FIRST_BUCKET_BYTES / 2**20
    if t.batch % t.world:
        p.error(f"--batch {t.batch} is not divisible by --world {t.world}")
    return t


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    gen = torch.Generator().manual_seed(a.seed + rank)  # each rank its own batches
    per_rank, full_batch = a.batch // a.world, a.batch
    ta = argparse.Namespace(**vars(a))  # the rank's own view: per-rank batch
    ta.batch = per_rank
    task = train.Task(ta, gen)
    model = train.build_model(a)
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(a.first_bucket_mb * 2**20)  # DDP reads it when it is built
    ddp = DDP(model, bucket_cap_mb=a.bucket_mb)
    if a.hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=a.ddp_rank,
                                   start_powerSGD_iter=a.powersgd_start, use_error_feedback=True,
                                   warm_start=True, random_seed=a.seed)
        ddp.register_comm_hook(state, psgd.powerSGD_hook)
    opt = train.make_optimizer(a, model)

    def emit(obj):
        if rank == 0:
            print(json.dumps(obj), flush=True)

    def step(lr):
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = task.next_batch()
        _, loss = ddp(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    nparam = sum(p.numel() for p in model.parameters())
    emit({"type": "config", "impl": "torch-ddp", "torch": torch.__version__, "model": a.model, "params": nparam,
          "world": a.world, "batch": full_batch, "per_rank_batch": per_rank, "threads": torch.get_num_threads(),
          "hook": a.hook, "rank": a.ddp_rank if a.hook == "powersgd" else None,
          "powersgd_start": a.powersgd_start if a.hook == "powersgd" else None, "bucket_cap_mb": a.bucket_mb,
          "first_bucket_mb": a.first_bucket_mb})
    total = a.time_warmup + a.time_steps if a.time_steps else a.steps
    times = []
    for k in range(total):
        t0 = time.perf_counter()
        loss = step(train.lr_at(a, k, total))
        ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        emit({"type": "step", "step": k + 1, "loss": loss, "step_ms": ms})
        done = k + 1
        if not a.time_steps and a.model == "gpt" and ((a.eval_every and done % a.eval_every == 0) or done == total):
            if rank == 0:  # replicas are identical; rank 0 evaluates, the others wait at the barrier
                ta.batch = full_batch  # the fixed validation windows are batches of the global batch
                emit({"type": "eval", "step": done, **task.evaluate(model)})
                ta.batch = per_rank
            dist.barrier()
    timed = times[a.time_warmup:] if a.time_steps else times
    emit({"type": "summary", "impl": "torch-ddp", "median_step_ms": statistics.median(timed)})
    dist.destroy_process_group()


def main(argv=None):
    a = parse_args(argv)
    mp.spawn(worker, args=(a, free_port()), nprocs=a.world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
