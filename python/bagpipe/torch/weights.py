"""The weight algorithms in Bagua's style: the model's parameters are flattened
into one float32 buffer (each parameter becomes a view of it), every replica steps
its own optimizer on its local gradients, and the algorithm mixes the buffers of
the replicas at its points of the step:

  decentralized     (D_FP_S, Bagua's order) at steps 0, k, 2k, ...: the exchange of
                    x_t with the peers starts with the step's first forward, on the
                    communication thread; before the optimizer steps, the average
                    replaces the weights: x_{t+1} = avg_peers(x_t) - lr g(x_t)
  lp-decentralized  (D_LP_S) after the local step, at steps 0, k, ...: the ring of
                    MinMaxUInt8-compressed differences (bp_ring_lp); x = w at once,
                    the neighbours' messages travel on the communication thread
                    during the next forward and backward
  async             (C_FP_A) the first `warmup` steps average gradients; then a
                    background thread averages the weights every sync_ms
                    (x += avg(s) - s); the optimizer's update holds its lock, so
                    that no update of either is lost (forward and backward run
                    meanwhile: Python leaves too short a gap between two steps for
                    the thread to take a lock held from forward to update, and it
                    would average only every few dozen steps)
  easgd             every tau steps: D = alpha (x - C); x -= D; C += sum_r D

The rules are those of src/parallel/dp/ (docs/algorithms.md#data-parallel-algorithms),
run by its C code through bagpipe._C (peer averaging, the ring, the averaging thread,
the elastic averaging), so that the replicas get the CLI's bits. Each algorithm's state
(its step count, center, neighbour copies) is part of the BagpipeModule's state_dict,
per rank.

BagpipeModule keeps DistributedDataParallel's contract where a training script
relies on it: rank 0's parameters and buffers go to every rank at wrap time, the
buffers again at every training forward (broadcast_buffers), exchanges happen only
in a training forward (module.training and grad enabled) and in optimizer.step,
so that any subset of ranks may evaluate at any time; load_state_dict restarts
the algorithm from the loaded weights."""
import contextlib
import types

import torch

from .. import Error, _C
from . import _tensors
from .hooks import _Done

BUCKET_FLOATS = 10 * 2**20 // 4  # lp-decentralized compresses chunks of 10 MB, as --bucket-mb


def flatten(params):
    """Move params into one contiguous float32 buffer (their .data become views of
    it, so the optimizer keeps the same Parameter objects); the buffer."""
    params = list(params)
    if not params:
        raise Error("bagpipe: the model has no parameters")
    for i, p in enumerate(params):
        _tensors.check(p, f"parameter {i}")
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    off = 0
    for p in params:
        n = p.numel()
        p.data = flat[off:off + n].view_as(p)
        off += n
    return flat


def average_gradients(params):
    """Every parameter's gradient averaged, zeros for those this rank did not use
    (so that every rank sends the same count), as DDP does (async's and diloco's
    warm-ups)."""
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                      for p in params])
    _C.allreduce_avg(_tensors.buf(flat))
    off = 0
    for p in params:
        g = flat[off:off + p.numel()].view_as(p)
        off += p.numel()
        if p.grad is not None:
            p.grad.copy_(g)
        elif g.any():
            p.grad = g.clone()


class WeightAlgorithm:
    """The hooks of a weight algorithm into a step: begin (first forward), before
    (the optimizer's update), after (once it stepped). `t` counts steps taken."""

    def __init__(self):
        self.t = 0
        self.flat = None

    def attach(self, flat, params):
        self.flat, self.params = flat, params

    def begin(self):
        pass

    def before(self):
        pass

    def after(self):
        self.t += 1

    def finish(self):
        pass

    def quiet(self):
        """A context in which nothing but the caller writes the weights."""
        return contextlib.nullcontext()

    def reload(self):
        """The weights were loaded from a state dict: restart from them (every rank
        is taken to have loaded the same weights)."""

    def state(self):
        """This rank's state: tensors by name, for the module's state_dict."""
        return {"t": torch.tensor(self.t)}

    def load_state(self, state):
        self.t = int(state["t"])


class Decentralized(WeightAlgorithm):
    OPTIONS = {"peers": "peers", "interval": "interval"}  # keyword -> the registry's option

    def __init__(self, peers="shift_one", interval=1):
        super().__init__()
        if interval < 1:
            raise Error(f"decentralized: interval must be at least 1, not {interval}")
        if peers not in ("all", "shift_one"):
            raise Error(f"decentralized: peers '{peers}' is not one of all, shift_one")
        self.peers, self.interval, self.rounds, self.pending = peers, interval, 0, None

    def attach(self, flat, params):
        super().attach(flat, params)
        if self.peers == "shift_one" and _C.size() % 2 and _C.size() > 1:
            raise Error(f"decentralized: peers shift_one needs an even number of ranks, "
                        f"not {_C.size()}")
        self.avg = torch.empty_like(flat)
        self.worker = _C.Worker("decentralized")

    def begin(self):
        if self.t % self.interval or _C.size() == 1:
            return
        self.avg.copy_(self.flat)
        self.pending = _Done()
        self.worker.peer_avg(_tensors.buf(self.avg), self.pending, self.peers, self.rounds)
        self.rounds += 1

    def before(self):
        if self.pending is not None:
            done, self.pending = self.pending, None
            done.wait()
            with torch.no_grad():
                self.flat.copy_(self.avg)

    def finish(self):
        self.worker.stop()

    def state(self):
        return dict(super().state(), rounds=torch.tensor(self.rounds))

    def load_state(self, state):
        super().load_state(state)
        self.rounds = int(state["rounds"])


class LowPrecisionDecentralized(WeightAlgorithm):
    OPTIONS = {"interval": "decentralized:interval"}
    EXTRAS = ("chunk",)

    def __init__(self, interval=1, chunk=BUCKET_FLOATS):
        super().__init__()
        if interval < 1:
            raise Error(f"lp-decentralized: interval must be at least 1, not {interval}")
        self.interval, self.chunk = interval, chunk

    def attach(self, flat, params):
        super().attach(flat, params)
        self.ring = self.worker = None
        if _C.size() > 1:
            self.ring = _C.Ring(_tensors.buf(flat), self.chunk)
            self.worker = _C.Worker("lp-decentralized")

    def after(self):
        """The part of the ring's step that needs no neighbour here (x = w at once);
        the exchange, which changes only the neighbours' copies l and r, on the
        communication thread during the next forward and backward: the rule's bits."""
        if self.ring is not None and self.t % self.interval == 0:
            self.worker.settle()
            self.ring.begin(_tensors.buf(self.flat))
            self.worker.ring_exchange(self.ring)
        super().after()

    def _settle(self):
        """Wait for the last exchange: l and r hold the neighbours' updates again."""
        if self.worker is not None:
            self.worker.settle()

    def finish(self):
        self._settle()
        if self.worker is not None:
            self.worker.stop()

    def _replicas(self):
        """Copies of this rank's w and of its neighbours' l and r (the ring's)."""
        self._settle()
        w, l, r = (torch.empty_like(self.flat) for _ in range(3))
        self.ring.get(*(_tensors.buf(t) for t in (w, l, r)))
        return w, l, r

    def reload(self):
        if self.ring is not None:
            self._settle()
            x = _tensors.buf(self.flat)
            self.ring.set(x, x, x)

    def state(self):
        out = super().state()
        if self.ring is not None:
            out.update(zip(("w", "left", "right"), self._replicas()))
        return out

    def load_state(self, state):
        super().load_state(state)
        if self.ring is not None:
            self._settle()
            self.ring.set(*(_tensors.buf(state[k].contiguous()) for k in ("w", "left", "right")))


class Async(WeightAlgorithm):
    OPTIONS = {"sync_ms": "sync-ms", "warmup": "async-warmup"}

    def __init__(self, sync_ms=20, warmup=0):
        super().__init__()
        if sync_ms < 1:
            raise Error(f"async: sync_ms must be at least 1, not {sync_ms}")
        if warmup < 0:
            raise Error(f"async: warmup must be >= 0, not {warmup}")
        self.sync_ms, self.warmup, self.thread, self.locked = sync_ms, warmup, None, False

    def _start_if_due(self):
        """The thread starts with the first step after warm-up (not at wrap time,
        so that weights loaded before training are averaged only from then on)."""
        if self.thread is None and self.t >= self.warmup and _C.size() > 1:
            self.thread = _C.Async(_tensors.buf(self.flat), self.sync_ms)

    def before(self):
        self._start_if_due()
        if self.thread is not None:
            self.thread.lock()
            self.locked = True
        if self.t < self.warmup and _C.size() > 1:
            self._average_gradients()

    @contextlib.contextmanager
    def quiet(self):
        if self.thread is None or self.locked:
            yield
            return
        self.thread.lock()
        try:
            yield
        finally:
            self.thread.unlock()

    def _average_gradients(self):
        average_gradients(self.params)

    def after(self):
        super().after()
        if self.locked:
            self.thread.unlock()
            self.locked = False

    def finish(self):
        """Stop averaging (collective: every rank stops after the same round); the
        rounds done."""
        if self.thread is None:
            return 0
        if self.locked:
            self.thread.unlock()
            self.locked = False
        rounds, self.thread = self.thread.stop(), None
        return rounds


class EASGD(WeightAlgorithm):
    OPTIONS = {"alpha": "ea-alpha", "tau": "ea-period"}

    def __init__(self, alpha=None, tau=4):
        super().__init__()
        if tau < 1:
            raise Error(f"easgd: tau must be at least 1, not {tau}")
        if alpha is not None and not alpha > 0:
            raise Error(f"easgd: alpha must be a number above 0, not {alpha}")
        self.alpha, self.tau = alpha, tau

    def attach(self, flat, params):
        super().attach(flat, params)
        n = _C.size()
        if self.alpha is None:
            self.alpha = 0.9 / n
        if self.alpha * (n + 1) >= 2:
            raise Error(f"easgd: alpha {self.alpha:g} makes the elastic averaging of {n} ranks "
                        f"diverge; alpha must be below 2 / (N + 1) = {2 / (n + 1):g}")
        self.center = flat.detach().clone()
        self.diff = torch.empty_like(flat)

    @torch.no_grad()
    def after(self):
        super().after()
        if self.t % self.tau or _C.size() == 1:
            return
        _C.easgd_average(*(_tensors.buf(x) for x in (self.flat, self.center, self.diff)),
                         self.alpha)

    def reload(self):
        self.center.copy_(self.flat)

    def state(self):
        return dict(super().state(), center=self.center.clone())

    def load_state(self, state):
        super().load_state(state)
        self.center.copy_(state["center"])


#: The weight algorithms of the registry that this module drives.
BINDINGS = {
    "decentralized": Decentralized,
    "lp-decentralized": LowPrecisionDecentralized,
    "async": Async,
    "easgd": EASGD,
}


STATE_KEY = "_bagpipe"  # the algorithm's entries in the state dict: <prefix>_bagpipe.<name>


class BagpipeModule(torch.nn.Module):
    """The model with a weight algorithm: rank 0's weights and buffers go to every
    rank, and the optimizer's step is wrapped with the algorithm's points. Call
    finish() after the last step (async stops in a round every rank agrees on).
    broadcast_buffers: rank 0's buffers (BatchNorm's running statistics) go to
    every rank at each training forward, as DDP's option of that name does."""

    def __init__(self, module, optimizer, algorithm, broadcast_buffers=True):
        super().__init__()
        self.module, self.algorithm = module, algorithm
        self.broadcast_buffers = broadcast_buffers
        params = [p for p in module.parameters()]
        flat = flatten(params)
        if _C.size() > 1:
            _C.bcast(_tensors.buf(flat), 0)
        self._sync_buffers()
        algorithm.attach(flat, params)
        self._begun = self._finished = self._no_sync = False
        self._wrap_step(optimizer)
        module.register_load_state_dict_post_hook(lambda *_: algorithm.reload())
        self.register_load_state_dict_post_hook(lambda *_: self._restore_pending())
        self._pending = None

    def _wrap_step(self, optimizer):
        """optimizer.step becomes a bound method again (an LR scheduler created
        later wraps it through __self__ and __func__). The algorithm's points run
        around the update even when the update raises, so that every rank issues
        the same collectives and async's lock is released."""
        step = optimizer.step

        def wrapped(opt, *args, **kwargs):
            if self._finished:
                raise Error("bagpipe: optimizer.step after finish(): the algorithm has stopped")
            self._begin()
            self.algorithm.before()
            try:
                return step(*args, **kwargs)
            finally:
                self._begun = False
                self.algorithm.after()

        optimizer.step = types.MethodType(wrapped, optimizer)

    def _begin(self):
        if not self._begun:
            self._begun = True
            self.algorithm.begin()

    def _exchanging(self):
        """Whether this forward is a training one, which may communicate."""
        return (self.training and torch.is_grad_enabled() and not self._no_sync
                and not self._finished)

    def _sync_buffers(self):
        """Rank 0's buffers to every rank, bit for bit (any dtype: as bytes). At a
        training forward's start every rank then starts after rank 0 has, and that
        wait, not the bytes, is what it costs; no exact protocol avoids it: until
        rank 0 reaches its forward, no rank can know whether rank 0's script changed
        the buffers since its last one (a write, reset_running_stats,
        load_state_dict, a training forward under no_grad). Sending them ahead (as
        each forward left them, without waiting, then a header at the next forward
        saying whether they changed, the others waiting only for that) was exact
        and slower than this broadcast in eight of eight side-by-side runs
        (bench/torch_hooks/README.md)."""
        bufs = [b for b in self.module.buffers()]
        if not bufs or _C.size() == 1:
            return
        raw = [b.detach().contiguous().reshape(-1).view(torch.uint8) for b in bufs]
        n = sum(r.numel() for r in raw)
        packed = torch.zeros((n + 3) // 4 * 4, dtype=torch.uint8)
        torch.cat(raw, out=packed[:n])
        _C.bcast(_tensors.buf(packed.view(torch.float32), "buffers"), 0)
        off = 0
        with torch.no_grad():
            for b, r in zip(bufs, raw):
                b.copy_(packed[off:off + r.numel()].view(b.dtype).view(b.shape))
                off += r.numel()

    def forward(self, *args, **kwargs):
        if self._exchanging():
            if self.broadcast_buffers:
                self._sync_buffers()
            self._begin()
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """As DDP's: the forwards inside start no exchange (gradient accumulation);
        the mixing happens at the next optimizer.step as always."""
        before, self._no_sync = self._no_sync, True
        try:
            yield
        finally:
            self._no_sync = before

    def finish(self):
        """Stop the algorithm (collective); idempotent. Evaluation works after it."""
        if self._finished:
            return 0
        self._finished = True
        return self.algorithm.finish()

    def consensus_state_dict(self):
        """The module's state dict at the average of the replicas, as the CLI's
        checkpoints hold it (collective): parameters and float32 buffers averaged
        over the ranks, other buffers as they are (rank 0's, broadcast)."""
        sd = self.module.state_dict(keep_vars=True)
        unique = {id(v): v for v in sd.values() if v.dtype == torch.float32}  # tied: once
        with self.algorithm.quiet():
            avg = torch.cat([v.detach().reshape(-1) for v in unique.values()])
        if _C.size() > 1:
            _C.allreduce_avg(_tensors.buf(avg))
        means, off = {}, 0
        for key, v in unique.items():
            means[key] = avg[off:off + v.numel()].view_as(v)
            off += v.numel()
        return type(sd)((k, means.get(id(v), v.detach()).clone()) for k, v in sd.items())

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for name, value in self.algorithm.state().items():
            destination[f"{prefix}{STATE_KEY}.{name}"] = value

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Take the algorithm's entries out (restored once the module's weights are
        loaded, by _restore_pending); a state dict without them restarts the
        algorithm from the loaded weights."""
        mine = f"{prefix}{STATE_KEY}."
        state = {k[len(mine):]: state_dict.pop(k) for k in list(state_dict) if k.startswith(mine)}
        self._pending = state or None
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def _restore_pending(self):
        if self._pending is not None:
            state, self._pending = self._pending, None
            self.algorithm.load_state(state)
