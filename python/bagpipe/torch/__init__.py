"""bagpipe's algorithms for any PyTorch model (host tensors).

    import bagpipe.torch as bpt
    bpt.init_process_group()                    # bagpipe's MPI world and a gloo group
    model = bpt.with_bagpipe(model, optimizer, "bytegrad")   # or "decentralized", ...

The algorithms are those of bagpipe's C registry (bagpipe.torch.registry). Gradient
algorithms (allreduce, bytegrad, qadam, powersgd) return DDP with one of bagpipe's
communication hooks; weight algorithms (decentralized, lp-decentralized, async,
easgd) return a BagpipeModule over the parameters flattened into one buffer.
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
from . import registry
from .registry import ALGORITHMS, GRADIENT_ALGORITHMS, WEIGHT_ALGORITHMS
from .weights import (BINDINGS as WEIGHT_BINDINGS, EASGD, STATE_KEY, Async, BagpipeModule,
                      Decentralized, LowPrecisionDecentralized, flatten)
from .diloco import BINDINGS as DILOCO_BINDINGS, DiLoCo, StreamingDiLoCo


class _Hook:
    """A gradient algorithm's binding: its DDP hook and the state it holds, with
    the registry's options it takes (keyword -> option) and keywords of its own."""

    def __init__(self, hook, state, options=None, extras=(), optimizer=False):
        self.hook, self.state, self.OPTIONS, self.EXTRAS = hook, state, options or {}, extras
        self.optimizer = optimizer  # the state holds the optimizer (qadam)

    def make(self, optimizer, options):
        return self.state(optimizer, **options) if self.optimizer else self.state(**options)


#: The algorithms of the registry that bagpipe.torch drives, by name.
BINDINGS = dict({
    "allreduce": _Hook(allreduce_hook, HookState),
    "bytegrad": _Hook(bytegrad_hook, HookState),
    "qadam": _Hook(qadam_hook, QAdamState, optimizer=True),  # its warm-up: QAdamOptimizer's
    "powersgd": _Hook(powersgd_hook, PowerSGDState, {"rank": "rank", "warmup": "powersgd-warmup"},
                      ("min_rate", "seed", "orth_q")),
}, **WEIGHT_BINDINGS, **DILOCO_BINDINGS)


def _bcast_text(text, root=0):
    """A short string from root to every rank, over bagpipe (one float per byte)."""
    data = torch.zeros(256)
    if _C.rank() == root:
        raw = text.encode()[:255]
        data[0] = len(raw)
        data[1:1 + len(raw)] = torch.tensor(list(raw), dtype=torch.float32)
    _C.bcast(_tensors.buf(data), root)
    return bytes(int(v) for v in data[1:1 + int(data[0])]).decode()


def init_process_group(timeout=None, net=None, poll=None):
    """Start bagpipe (MPI) and, unless there is one, torch.distributed's gloo group
    over the same ranks: rank 0 listens on MASTER_ADDR (default 127.0.0.1) at
    MASTER_PORT (default: a free port, told to the others over bagpipe). timeout
    (default bagpipe.DEFAULT_TIMEOUT) bounds bagpipe's operations (the watchdog) and
    gloo's alike, so that a rank lost in DDP's own collectives is noticed too. poll
    (default bagpipe.DEFAULT_POLL): as bagpipe.init's."""
    timeout = bagpipe.DEFAULT_TIMEOUT if timeout is None else timeout
    init(timeout=timeout, net=net, poll=bagpipe.DEFAULT_POLL if poll is None else poll)
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


#: DistributedDataParallel's keyword arguments (torch 1.13), passed on to DDP for the
#: gradient algorithms.
DDP_OPTIONS = ("device_ids", "output_device", "dim", "broadcast_buffers", "process_group",
               "bucket_cap_mb", "find_unused_parameters", "check_reduction",
               "gradient_as_bucket_view", "static_graph")
#: Those that mean something to the weight algorithms: broadcast_buffers as DDP's;
#: find_unused_parameters needs nothing (the weights are mixed whole, used or not);
#: bucket_cap_mb is lp-decentralized's compression chunk.
WEIGHT_DDP_OPTIONS = ("broadcast_buffers", "process_group", "find_unused_parameters",
                      "bucket_cap_mb")


#: Gradient algorithms whose DDP buckets default to other sizes than DDP's (1 MB, then
#: 25 MB), in MB, first and later ones alike; bucket_cap_mb overrides both. bytegrad
#: and qadam send a byte per float: a bucket costs a quarter of its bytes on the wire,
#: and what is left of the step after backward is mostly the last bucket (complete
#: only when backward ends) and its codec's passes, which smaller buckets shorten. On
#: 2 hosts at 100 Mbit (bench/torch_hooks/pair.py) DDP's buckets gave bytegrad
#: 1.81-1.94x DDP's step on the transformer and 0.25 MB ones 2.21-2.31x (qadam
#: 1.80-1.85x and 2.06-2.09x); at 1 Gbit, and on the CNN and an 11 M-parameter MLP,
#: bytegrad's two were within 5% of each other.
DEFAULT_BUCKET_MB = {"bytegrad": 0.25, "qadam": 0.25}


def _ddp(model, algorithm, ddp):
    """DDP over model with its keyword arguments, the algorithm's buckets by default."""
    mb = DEFAULT_BUCKET_MB.get(algorithm)
    if mb is None or "bucket_cap_mb" in ddp:
        return DDP(model, **ddp)
    first = dist._DEFAULT_FIRST_BUCKET_BYTES  # read by DDP's constructor, as torch documents
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(mb * 2**20)
    try:
        return DDP(model, bucket_cap_mb=mb, **ddp)
    finally:
        dist._DEFAULT_FIRST_BUCKET_BYTES = first


def _check_group(group):
    """bagpipe's algorithms run over the whole MPI world: a process_group over other
    ranks is refused (DDP would keep the groups apart; averaging over the world
    would mix them silently)."""
    if group is None or (dist.is_initialized() and group is dist.group.WORLD):
        return
    size = dist.get_world_size(group) if dist.is_initialized() else -1
    if size != _C.size():
        raise Error(f"bagpipe: process_group over {max(size, 0)} of {_C.size()} ranks: bagpipe's "
                    "algorithms average over every rank of the job; pass no process_group "
                    "(or launch only those ranks)")


def _check_fresh(model, optimizer):
    """A model or an optimizer is wrapped once, and the optimizer steps the model's
    own parameters."""
    if isinstance(model, (DDP, BagpipeModule)) or getattr(model, "_bagpipe_wrapped", False):
        raise Error("bagpipe: the model is wrapped already (with_bagpipe or DDP): wrap the "
                    "plain module once")
    if optimizer is None:
        return
    if getattr(optimizer, "_bagpipe_wrapped", False):
        raise Error("bagpipe: the optimizer steps a model wrapped already: give each "
                    "with_bagpipe its own optimizer")
    own = {id(p) for p in model.parameters()}
    if any(id(p) not in own for g in optimizer.param_groups for p in g["params"]):
        raise Error("bagpipe: the optimizer holds parameters that are not the model's: give "
                    "with_bagpipe the optimizer over model.parameters()")


def _weight_module(model, optimizer, algorithm, ddp):
    bad = [k for k in ddp if k not in WEIGHT_DDP_OPTIONS or
           (k == "bucket_cap_mb" and algorithm != "lp-decentralized")]
    if bad:
        raise Error(f"bagpipe: {algorithm} mixes weights, not gradient buckets: DDP's "
                    f"{', '.join(bad)} means nothing to it (it takes broadcast_buffers, "
                    "find_unused_parameters, process_group"
                    f"{', bucket_cap_mb' if algorithm == 'lp-decentralized' else ''})")
    if optimizer is None:
        raise Error(f"bagpipe: {algorithm} wraps the optimizer's step: pass the optimizer")
    _check_group(ddp.get("process_group"))
    options = {}
    if "bucket_cap_mb" in ddp:
        options["chunk"] = max(1, int(ddp["bucket_cap_mb"] * 2**20 // 4))
    return options, ddp.get("broadcast_buffers", True)


def _keep_hook_state(ddp, state):
    """The hook's state (PowerSGD's error feedback and Q) in DDP's state_dict, under
    <prefix>_bagpipe., and restored by its load_state_dict, as BagpipeModule does."""
    def save(module, sd, prefix, local_metadata):
        for k, v in state.state_dict().items():
            sd[f"{prefix}{STATE_KEY}.{k}"] = v

    def load(sd, prefix, local_metadata, strict, missing, unexpected, errors):
        mine = f"{prefix}{STATE_KEY}."
        got = {k[len(mine):]: sd.pop(k) for k in list(sd) if k.startswith(mine)}
        if got:
            state.load_state_dict(got)

    ddp._register_state_dict_hook(save)
    ddp._register_load_state_dict_pre_hook(load)


def with_bagpipe(model, optimizer, algorithm, **options):
    """The model trained with `algorithm` (one of ALGORITHMS, the C registry's; those
    of BINDINGS run here), as Bagua's with_bagua.

    Gradient algorithms: DDP(model) with the algorithm's hook (options: DDP's keyword
    arguments, and those of PowerSGDState for powersgd; qadam needs a
    QAdamOptimizer). Weight algorithms: a BagpipeModule (options: those of the
    algorithm's class and WEIGHT_DDP_OPTIONS), whose optimizer.step does the
    algorithm's mixing; call .finish() after the last step. A model, or an
    optimizer, is wrapped once."""
    if algorithm not in ALGORITHMS:
        raise Error(f"bagpipe: algorithm '{algorithm}' is not one of {', '.join(ALGORITHMS)}")
    binding = BINDINGS.get(algorithm)
    if binding is None:
        raise Error(registry.no_binding(algorithm))
    if not _C.initialized():
        raise Error("bagpipe is not initialized: call bagpipe.torch.init_process_group() first")
    _check_host(model)
    _check_fresh(model, optimizer)
    ddp = {k: options.pop(k) for k in DDP_OPTIONS if k in options}
    registry.check_options(algorithm, binding, options)
    if algorithm in WEIGHT_ALGORITHMS:
        extra, broadcast_buffers = _weight_module(model, optimizer, algorithm, ddp)
        if getattr(binding, "TAKES_NAMES", False):  # its blocks (streaming-diloco's fragments)
            extra["names"] = [name for name, _ in model.named_parameters()]
        wrapped = BagpipeModule(model, optimizer, binding(**options, **extra),
                                broadcast_buffers=broadcast_buffers)
    else:
        if not dist.is_initialized():
            raise Error("bagpipe: gradient algorithms run as DDP hooks and need "
                        "torch.distributed: call bagpipe.torch.init_process_group() first")
        _check_group(ddp.get("process_group"))
        state = binding.make(optimizer, options)
        if algorithm == "powersgd":
            state.names = {id(p): n for n, p in model.named_parameters()}
        wrapped = _ddp(model, algorithm, ddp)
        wrapped.register_comm_hook(state, binding.hook)
        _keep_hook_state(wrapped, state)
    model._bagpipe_wrapped = True
    if optimizer is not None:
        optimizer._bagpipe_wrapped = True
    return wrapped


__all__ = ["ALGORITHMS", "GRADIENT_ALGORITHMS", "WEIGHT_ALGORITHMS", "BINDINGS", "DDP_OPTIONS",
           "WEIGHT_DDP_OPTIONS", "DEFAULT_BUCKET_MB", "init_process_group", "with_bagpipe",
           "HookState", "PowerSGDState", "QAdamState", "QAdamOptimizer", "allreduce_hook",
           "bytegrad_hook", "powersgd_hook", "qadam_hook", "BagpipeModule", "Decentralized",
           "LowPrecisionDecentralized", "Async", "EASGD", "DiLoCo", "StreamingDiLoCo", "flatten",
           "Error"]
