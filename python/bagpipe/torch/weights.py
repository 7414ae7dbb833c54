"""The weight algorithms in Bagua's style: the model's parameters are flattened
into one float32 buffer (each parameter becomes a view of it), every replica steps
its own optimizer on its local gradients, and the algorithm mixes the buffers of
the replicas at its points of the step:

  decentralized     (D_FP_S, Bagua's order) at steps 0, k, 2k, ...: the exchange of
                    x_t with the peers starts with the step's first forward, on the
                    communication thread; before the optimizer steps, the average
                    replaces the weights: x_{t+1} = avg_peers(x_t) - lr g(x_t)
  lp-decentralized  (D_LP_S) after the local step, at steps 0, k, ...: the ring of
                    MinMaxUInt8-compressed differences (bp_ring_lp)
  async             (C_FP_A) the first `warmup` steps average gradients; then a
                    background thread averages the weights every sync_ms
                    (x += avg(s) - s); the optimizer's update holds its lock, so
                    that no update of either is lost (forward and backward run
                    meanwhile: Python leaves too short a gap between two steps for
                    the thread to take a lock held from forward to update, and it
                    would average only every few dozen steps)
  easgd             every tau steps: D = alpha (x - C); x -= D; C += sum_r D

The rules are those of src/parallel/dp/ (docs/algorithms.md#data-parallel-algorithms)."""
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


class Decentralized(WeightAlgorithm):
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


class LowPrecisionDecentralized(WeightAlgorithm):
    def __init__(self, interval=1, chunk=BUCKET_FLOATS):
        super().__init__()
        if interval < 1:
            raise Error(f"lp-decentralized: interval must be at least 1, not {interval}")
        self.interval, self.chunk = interval, chunk

    def attach(self, flat, params):
        super().attach(flat, params)
        self.ring = _C.Ring(_tensors.buf(flat), self.chunk) if _C.size() > 1 else None

    def after(self):
        if self.ring is not None and self.t % self.interval == 0:
            self.ring.step(_tensors.buf(self.flat))
        super().after()


class Async(WeightAlgorithm):
    def __init__(self, sync_ms=20, warmup=0):
        super().__init__()
        if sync_ms < 1:
            raise Error(f"async: sync_ms must be at least 1, not {sync_ms}")
        if warmup < 0:
            raise Error(f"async: warmup must be >= 0, not {warmup}")
        self.sync_ms, self.warmup, self.thread, self.locked = sync_ms, warmup, None, False

    def attach(self, flat, params):
        super().attach(flat, params)
        self._start_if_due()

    def _start_if_due(self):
        if self.thread is None and self.t >= self.warmup and _C.size() > 1:
            self.thread = _C.Async(_tensors.buf(self.flat), self.sync_ms)

    def before(self):
        if self.thread is not None:
            self.thread.lock()
            self.locked = True
        if self.t < self.warmup and _C.size() > 1:
            grads = [p.grad for p in self.params if p.grad is not None]
            flat = torch.cat([g.reshape(-1) for g in grads])
            _C.allreduce_avg(_tensors.buf(flat))
            off = 0
            for g in grads:
                g.copy_(flat[off:off + g.numel()].view_as(g))
                off += g.numel()

    def after(self):
        super().after()
        if self.locked:
            self.thread.unlock()
            self.locked = False
        self._start_if_due()

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
    def __init__(self, alpha=None, tau=4):
        super().__init__()
        if tau < 1:
            raise Error(f"easgd: tau must be at least 1, not {tau}")
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

    @torch.no_grad()
    def after(self):
        super().after()
        if self.t % self.tau or _C.size() == 1:
            return
        d = (self.flat - self.center) * self.alpha
        self.flat.sub_(d)
        _C.allreduce_sum(_tensors.buf(d))
        self.center.add_(d)


ALGORITHMS = {
    "decentralized": Decentralized,
    "lp-decentralized": LowPrecisionDecentralized,
    "async": Async,
    "easgd": EASGD,
}


class BagpipeModule(torch.nn.Module):
    """The model with a weight algorithm: rank 0's weights go to every rank, and
    the optimizer's step is wrapped with the algorithm's points. Call finish()
    after the last step (async stops in a round every rank agrees on)."""

    def __init__(self, module, optimizer, algorithm):
        super().__init__()
        self.module, self.algorithm = module, algorithm
        params = [p for p in module.parameters()]
        flat = flatten(params)
        if _C.size() > 1:
            _C.bcast(_tensors.buf(flat), 0)
        algorithm.attach(flat, params)
        self._begun = False
        step = optimizer.step

        def wrapped(*args, **kwargs):
            self._begin()
            algorithm.before()
            out = step(*args, **kwargs)
            algorithm.after()
            self._begun = False
            return out

        optimizer.step = wrapped

    def _begin(self):
        if not self._begun:
            self._begun = True
            self.algorithm.begin()

    def forward(self, *args, **kwargs):
        self._begin()
        return self.module(*args, **kwargs)

    def finish(self):
        return self.algorithm.finish()
