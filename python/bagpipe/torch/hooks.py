"""The gradient algorithms as DDP communication hooks.

Each hook hands its bucket to a bagpipe communication thread (bagpipe._C.Worker,
with a group of its own) and returns at once a future that the thread completes
when the bucket's average has arrived, so backward goes on with the next buckets
meanwhile. DDP launches buckets in the same order on every rank, and the thread
runs them in the order they came, so every rank issues the same collectives.

    model = DDP(model)
    model.register_comm_hook(bytegrad_state(), bytegrad_hook)
"""
import threading

import torch

from .. import Error, _C
from . import _tensors


class HookState:
    """What every hook holds: the communication thread its buckets go to."""

    def __init__(self, worker=None):
        _require_init()
        self.worker = worker if worker is not None else _C.Worker("ddp-hook")

    def state_dict(self):
        """What a resume needs to go on as if never stopped: tensors by name."""
        return {}

    def load_state_dict(self, state):
        pass


def _require_init():
    if not _C.initialized():
        raise Error("bagpipe is not initialized: call bagpipe.init() (or "
                    "bagpipe.torch.init_process_group()) first")


def _future(submit, tensor, *args):
    """Submit tensor's bucket; a future that the communication thread completes
    with the tensor (averaged in place), or fails with bagpipe's message."""
    fut = torch.futures.Future()

    def done(err):
        fut.set_result(tensor if err is None else Error(err))

    submit(_tensors.buf(tensor, "gradient bucket"), done, *args)
    return fut.then(_raise_error)


def _raise_error(fut):
    """The tensor, or bagpipe's error raised. A future failed by set_exception holds
    the exception as its value, which DDP then tries to cast to a tensor ("Unable to
    cast ... to Tensor"); one raised in a callback fails the future as DDP expects."""
    value = fut.value()
    if isinstance(value, Exception):
        raise value
    return value


def allreduce_hook(state, bucket):
    """C_FP_S: the bucket averaged over the ranks (DDP's default result)."""
    return _future(state.worker.allreduce, bucket.buffer())


def bytegrad_hook(state, bucket):
    """C_LP_S with MinMaxUInt8 (Bagua's ByteGrad): chunks compressed to bytes on
    their way to their owner and back; every rank decodes the same bytes."""
    return _future(state.worker.bytegrad, bucket.buffer())


class PowerSGDState(HookState):
    """PowerSGD's state, by the rules of PyTorch's PowerSGD hook: `rank`, plain
    allreduce for the first `warmup` iterations (at least 2: DDP rebuilds its
    buckets after the first), matrices compressed only when (rows + cols) r *
    min_rate < rows cols, Q orthonormalized before each use. The state of each
    matrix (its error and Q) lives in the C codec, on the communication thread."""

    def __init__(self, rank=8, warmup=10, min_rate=2.0, seed=0, orth_q=True, worker=None):
        if rank < 1:
            raise Error(f"powersgd: rank must be at least 1, not {rank}")
        if warmup < 2:
            raise Error(f"powersgd: warmup must be at least 2 iterations, not {warmup} "
                        "(DDP rebuilds its buckets after the first)")
        super().__init__(worker)
        self.rank, self.warmup, self.min_rate = rank, warmup, min_rate
        self.seed, self.orth_q = seed, orth_q
        self.iter = 0
        self.parts = {}  # bucket index -> (parameter ids, [(offset, length, codec or None)])
        self.codecs = {}  # matrix name -> codec: kept when DDP rebuilds its buckets
        self.names = {}  # id(parameter) -> its name in the model (with_bagpipe sets it)
        self.pending = {}  # loaded state of codecs not made yet: "<name>.error", "<name>.q"

    def _name(self, p, index, i):
        return self.names.get(id(p), f"{index}.{i}")

    def state_dict(self):
        """The iteration and each compressed matrix's error feedback and Q, by the
        parameter's name (the buckets of a resumed DDP differ until it rebuilds them)."""
        out = {"iter": torch.tensor(self.iter)}
        for name, codec in self.codecs.items():
            sizes = codec.state_sizes if codec is not None else None
            if sizes:
                e, q = torch.empty(sizes[0]), torch.empty(sizes[1])
                codec.copy_state(e.numpy(), q.numpy(), True)
                out[f"{name}.error"], out[f"{name}.q"] = e, q
        return out

    def load_state_dict(self, state):
        self.iter = int(state["iter"])
        self.pending = {k: v for k, v in state.items() if k != "iter"}
        for name, codec in self.codecs.items():
            self._restore(name, codec)

    def _restore(self, name, codec):
        e, q = self.pending.pop(f"{name}.error", None), self.pending.pop(f"{name}.q", None)
        if codec is not None and e is not None and q is not None:
            codec.copy_state(e.contiguous().numpy(), q.contiguous().numpy(), False)

    def _codec(self, p, index, i):
        """The codec of matrix p, made when first compressed (seeded by its first
        bucket index and position) and kept after."""
        name = self._name(p, index, i)
        if name not in self.codecs:
            n = p.numel()
            rows = p.shape[0] if p.dim() > 1 else 1
            cols = n // rows if rows else 0
            r = min(self.rank, rows, cols)
            codec = None
            if p.dim() > 1 and (rows + cols) * r * self.min_rate < rows * cols:
                codec = _C.Codec.powersgd(rows, cols, self.rank, self.seed + 1000003 * index + i)
            self.codecs[name] = codec
            self._restore(name, codec)
        return self.codecs[name]

    def parts_of(self, bucket):
        """(offset, length, codec or None) of each parameter in the bucket, made
        again when DDP has rebuilt the bucket with other parameters."""
        index, params = bucket.index(), bucket.parameters()
        ids = tuple(id(p) for p in params)
        if index not in self.parts or self.parts[index][0] != ids:
            parts, off = [], 0
            for i, p in enumerate(params):
                parts.append((off, p.numel(), self._codec(p, index, i)))
                off += p.numel()
            self.parts[index] = (ids, parts)
        return self.parts[index][1]


def powersgd_hook(state, bucket):
    """Rank-r PowerSGD with error feedback (PyTorch's rules, bagpipe's C code)."""
    warm = state.iter < state.warmup
    if bucket.is_last():
        state.iter += 1
    if warm:
        return allreduce_hook(state, bucket)
    return _future(state.worker.powersgd, bucket.buffer(), state.parts_of(bucket),
                   state.orth_q)


class QAdamOptimizer(torch.optim.Optimizer):
    """Bagua's QAdam (bagpipe's qadam): Adam whose momentum is averaged with
    MinMaxUInt8 after `warmup` steps. With t the 1-based step and g the gradient
    that the hook left:
      t < warmup:  g += wd p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2
      t > warmup:  m = g (the hook averaged the momentum and left it as the gradient)
      every step:  p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
    by the C runtime's kernel (bagpipe._C.qadam_update). Use with qadam_hook, whose
    state holds this optimizer."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 warmup=100):
        if warmup < 2:
            raise Error("qadam: warmup must be at least 2 (the second moment is trained in "
                        "the first warmup - 1 steps: with fewer it stays 0 and updates divide "
                        "by eps)")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.warmup, self.t = warmup, 0
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["exp_avg"] = torch.zeros_like(p)
                self.state[p]["exp_avg_sq"] = torch.zeros_like(p)

    def state_dict(self):
        """torch's, with the step count t (a resume goes on after warm-up)."""
        return dict(super().state_dict(), qadam_t=self.t)

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        t = state_dict.pop("qadam_t", None)
        if t is None:
            raise Error("qadam: the state dict has no step count (qadam_t): it was not "
                        "saved by QAdamOptimizer.state_dict")
        super().load_state_dict(state_dict)
        self.t = int(t)

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        self.t += 1
        t = self.t
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m, v = self.state[p]["exp_avg"], self.state[p]["exp_avg_sq"]
                if t > self.warmup:
                    m.copy_(p.grad)
                _C.qadam_update(*(_tensors.buf(x) for x in (p.data, p.grad, m, v)),
                                group["lr"], b1, b2, group["eps"], group["weight_decay"], t,
                                t < self.warmup)
        return loss


class QAdamState(HookState):
    def __init__(self, optimizer, worker=None):
        if not isinstance(optimizer, QAdamOptimizer):
            raise Error("qadam: the optimizer must be bagpipe.torch.QAdamOptimizer")
        super().__init__(worker)
        self.optim = optimizer


def qadam_hook(state, bucket):
    """During warm-up the gradients' average; after it, the momentum
    b1 m + (1 - b1) g of this rank, averaged with MinMaxUInt8 traffic."""
    opt = state.optim
    if opt.t + 1 <= opt.warmup:
        return allreduce_hook(state, bucket)
    b1 = opt.param_groups[0]["betas"][0]
    m = torch.cat([opt.state[p]["exp_avg"].reshape(-1) for p in bucket.parameters()])
    _C.momentum(_tensors.buf(bucket.buffer(), "gradient bucket"), _tensors.buf(m), b1)
    return _future(state.worker.bytegrad, m)


class _Done:
    """A job's completion that the main thread waits for (the wait releases the GIL)."""

    def __init__(self):
        self.event, self.err = threading.Event(), None

    def __call__(self, err):
        self.err = err
        self.event.set()

    def wait(self):
        self.event.wait()
        if self.err is not None:
            raise Error(self.err)
