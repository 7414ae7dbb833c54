"""bagpipe's algorithms for any PyTorch model (host tensors).

    import bagpipe.torch as bpt
    bpt.init_process_group()                    # bagpipe's MPI world and a gloo group
    model = bpt.with_bagpipe(model, optimizer, "bytegrad")   # or "decentralized", ...

Gradient algorithms (allreduce, bytegrad, qadam, powersgd) return DDP with one of
bagpipe's communication hooks; weight algorithms (decentralized, lp-decentralized,
async, easgd) return a BagpipeModule over the parameters flattened into one buffer.
Run under MPI: mpirun -np N python3 train.py."""
import datetime
import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import bagpipe

from .. import Error, _C, init
from . import _tensors
from .hooks import (HookState, PowerSGDState, QAdamOptimizer, QAdamState, allreduce_hook,
                    bytegrad_hook, powersgd_hook, qadam_hook)
from .weights import (ALGORITHMS as WEIGHT_ALGORITHMS, EASGD, Async, BagpipeModule,
                      Decentralized, LowPrecisionDecentralized, flatten)

GRADIENT_ALGORITHMS = ("allreduce", "bytegrad", "qadam", "powersgd")
ALGORITHMS = GRADIENT_ALGORITHMS + tuple(WEIGHT_ALGORITHMS)


def _bcast_text(text, root=0):
    """A short string from root to every rank, over bagpipe (one float per byte)."""
    data = torch.zeros(256)
    if _C.rank() == root:
        raw = text.encode()[:255]
        data[0] = len(raw)
        data[1:1 + len(raw)] = torch.tensor(list(raw), dtype=torch.float32)
    _C.bcast(_tensors.buf(data), root)
    return bytes(int(v) for v in data[1:1 + int(data[0])]).decode()


def init_process_group(timeout=None, net=None):
    """Start bagpipe (MPI) and, unless there is one, torch.distributed's gloo group
    over the same ranks: rank 0 listens on MASTER_ADDR (default 127.0.0.1) at
    MASTER_PORT (default: a free port, told to the others over bagpipe). timeout
    (default bagpipe.DEFAULT_TIMEOUT) bounds bagpipe's operations (the watchdog) and
    gloo's alike, so that a rank lost in DDP's own collectives is noticed too."""
    timeout = bagpipe.DEFAULT_TIMEOUT if timeout is None else timeout
    init(timeout=timeout, net=net)
    if dist.is_initialized():
        if dist.get_world_size() != _C.size() or dist.get_rank() != _C.rank():
            raise Error(f"bagpipe: torch.distributed has rank {dist.get_rank()} of "
                        f"{dist.get_world_size()}, MPI rank {_C.rank()} of {_C.size()}")
        return
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = os.environ.get("MASTER_PORT", "")
    if not port and _C.rank() == 0:
        with socket.socket() as s:
            s.bind((addr, 0))
            port = str(s.getsockname()[1])
    port = _bcast_text(port)
    gloo_timeout = datetime.timedelta(seconds=timeout) if timeout > 0 else None
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=_C.rank(),
                            world_size=_C.size(),
                            **({"timeout": gloo_timeout} if gloo_timeout else {}))


def _check_host(model):
    for name, p in model.named_parameters():
        _tensors.check(p, f"parameter {name}")


def with_bagpipe(model, optimizer, algorithm, process_group=None, **options):
    """The model trained with `algorithm` (one of ALGORITHMS), as Bagua's with_bagua.

    Gradient algorithms: DDP(model) with the algorithm's hook (options: those of
    PowerSGDState for powersgd; qadam needs a QAdamOptimizer). Weight algorithms: a
    BagpipeModule (options: those of the algorithm's class), whose optimizer.step
    does the algorithm's mixing; call .finish() after the last step."""
    if algorithm not in ALGORITHMS:
        raise Error(f"bagpipe: algorithm '{algorithm}' is not one of {', '.join(ALGORITHMS)}")
    if not _C.initialized():
        raise Error("bagpipe is not initialized: call bagpipe.torch.init_process_group() first")
    _check_host(model)
    if algorithm in WEIGHT_ALGORITHMS:
        return BagpipeModule(model, optimizer, WEIGHT_ALGORITHMS[algorithm](**options))
    if not dist.is_initialized() and process_group is None:
        raise Error("bagpipe: gradient algorithms run as DDP hooks and need torch.distributed: "
                    "call bagpipe.torch.init_process_group() first")
    if algorithm == "powersgd":
        state, hook = PowerSGDState(**options), powersgd_hook
    elif algorithm == "qadam":
        state, hook = QAdamState(optimizer, **options), qadam_hook
    else:
        if options:
            raise Error(f"bagpipe: {algorithm} takes no options, not {', '.join(options)}")
        state, hook = HookState(), {"allreduce": allreduce_hook, "bytegrad": bytegrad_hook}[algorithm]
    ddp = DDP(model, process_group=process_group)
    ddp.register_comm_hook(state, hook)
    return ddp


__all__ = ["ALGORITHMS", "GRADIENT_ALGORITHMS", "WEIGHT_ALGORITHMS", "init_process_group",
           "with_bagpipe", "HookState", "PowerSGDState", "QAdamState", "QAdamOptimizer",
           "allreduce_hook", "bytegrad_hook", "powersgd_hook", "qadam_hook", "BagpipeModule",
           "Decentralized", "LowPrecisionDecentralized", "Async", "EASGD", "flatten", "Error"]
