"""diloco and streaming-diloco for PyTorch models: the rules of src/parallel/dp/diloco.c
and streaming_diloco.c (docs/manual/diloco.md), run by their C code (bagpipe._C's
diloco_average and diloco_outer_step) on the flattened parameters, so that the
replicas get the CLI's bits.

    model = bpt.with_bagpipe(model, optimizer, "diloco", H=100)
    model = bpt.with_bagpipe(model, optimizer, "streaming-diloco", H=100, fragments=2)

The optimizer given is the inner one (its state is each replica's own). After every
H-th optimizer.step, the pseudo-gradients global - local are averaged over the ranks
(compressed with error feedback if `compress` says so), the outer Nesterov SGD steps
the global weights, and every replica goes on from them. streaming-diloco does this
per fragment at staggered steps and merges after `delay` steps with `mix`; the
average runs when the fragment is taken, not beside the next steps (the bits are
the same). Its blocks: a parameter's block is its name up to the first part, or
the first two where the second is a number (h.3 of h.3.attn.weight, a ModuleList's
entry); block b belongs to fragment b mod F, as the engine splits its blocks.

The state (the step count, the global weights, the outer momentum, the error
feedback and the average in flight) is in the BagpipeModule's state_dict."""
from .. import Error, _C
from . import _tensors, registry
from .weights import WeightAlgorithm, average_gradients

import torch


class DiLoCo(WeightAlgorithm):
    """diloco: the whole model every H steps (mix 0: replaced by the global weights)."""

    OPTIONS = {"H": "diloco:inner-steps", "outer_lr": "diloco:outer-lr",
               "outer_momentum": "diloco:outer-momentum", "compress": "diloco:outer-compress",
               "topk": "diloco:outer-topk", "exchange": "diloco:outer-exchange",
               "warmup": "diloco:outer-warmup"}
    NAME = "diloco"

    def __init__(self, H=100, outer_lr=0.7, outer_momentum=0.9, compress="none", topk=0.01,
                 exchange="allgather", warmup=0):
        super().__init__()
        given = dict(H=H, outer_lr=outer_lr, outer_momentum=outer_momentum, compress=compress,
                     topk=topk, exchange=exchange, warmup=warmup)
        for keyword, spec in DiLoCo.OPTIONS.items():
            algo, name = registry.option(spec)
            registry.check_value(self.NAME, keyword, registry.REGISTRY[algo].options[name],
                                 given[keyword])
            setattr(self, keyword, given[keyword])
        if self.compress == "none" and self.exchange != "allgather":
            raise Error(f"{self.NAME}: exchange '{self.exchange}' needs compress (float32 outer "
                        "gradients go by an allreduce)")

    def attach(self, flat, params):
        super().attach(flat, params)
        self.global_ = flat.detach().clone()
        self.momentum = torch.zeros_like(flat)
        self.delta = torch.zeros_like(flat)
        coded = self.compress != "none"
        self.error = torch.zeros_like(flat) if coded else None
        self.error_rs = torch.zeros_like(flat) if coded and self.exchange != "allgather" else None
        self.fragments = self._fragments(params)

    def _fragments(self, params):
        spans, off = [], 0
        for p in params:
            spans.append((off, p.numel()))
            off += p.numel()
        return [spans]

    def _buf(self, t):
        return None if t is None else _tensors.buf(t)

    def average(self, f):
        """Fragment f's pseudo-gradient, averaged over the ranks into delta."""
        _C.diloco_average(*(self._buf(t) for t in (self.flat, self.global_, self.delta,
                                                   self.error, self.error_rs)),
                          self.fragments[f], self.compress, float(self.topk), self.exchange)

    @torch.no_grad()
    def outer_step(self, f, mix):
        _C.diloco_outer_step(*(self._buf(t) for t in (self.flat, self.global_, self.momentum,
                                                      self.delta)),
                             self.fragments[f], float(self.outer_lr), float(self.outer_momentum),
                             float(mix))

    def before(self):
        """During the warm-up, every gradient averaged (zeros for those unused)."""
        if self.t < self.warmup and _C.size() > 1:
            average_gradients(self.params)

    @torch.no_grad()
    def warming_up(self):
        """After a step: whether it was one of the warm-up's (G then follows the
        weights, alike on every rank)."""
        if self.t > self.warmup:
            return False
        self.global_.copy_(self.flat)
        return True

    def after(self):
        super().after()
        # on one rank nothing is averaged (the CLI's)
        if _C.size() == 1 or self.warming_up() or (self.t - self.warmup) % self.H:
            return
        self.average(0)
        self.outer_step(0, 0.0)

    def reload(self):
        """Weights loaded without the algorithm's state: restart from them."""
        self.global_.copy_(self.flat)
        for t in (self.momentum, self.delta, self.error, self.error_rs):
            if t is not None:
                t.zero_()

    def _tensors(self):
        out = {"global": self.global_, "outer_momentum": self.momentum}
        if self.error is not None:
            out["error_feedback"] = self.error
        if self.error_rs is not None:
            out["error_feedback_reduced"] = self.error_rs
        return out

    def state(self):
        return dict(super().state(), **{k: v.clone() for k, v in self._tensors().items()})

    def load_state(self, state):
        super().load_state(state)
        for k, v in self._tensors().items():
            if k not in state:
                raise Error(f"{self.NAME}: the state dict has no '{k}' (saved with other "
                            "settings?)")
            v.copy_(state[k])


class StreamingDiLoCo(DiLoCo):
    """streaming-diloco: fragment f (blocks b with b mod F = f) after every step s > 0
    with s mod H = ((f + 1) H / F) mod H, merged `delay` steps later with `mix`."""

    OPTIONS = dict(DiLoCo.OPTIONS, fragments="fragments", delay="outer-delay", mix="outer-mix")
    EXTRAS = ("names",)
    NAME = "streaming-diloco"
    TAKES_NAMES = True  # with_bagpipe passes the parameters' names (their blocks)

    def __init__(self, fragments=2, delay=1, mix=0.5, H=100, outer_lr=0.7, outer_momentum=0.9,
                 compress="none", topk=0.01, exchange="allgather", warmup=0, names=None):
        super().__init__(H, outer_lr, outer_momentum, compress, topk, exchange, warmup)
        mine = registry.REGISTRY["streaming-diloco"].options
        for keyword, name, value in (("fragments", "fragments", fragments),
                                     ("delay", "outer-delay", delay), ("mix", "outer-mix", mix)):
            registry.check_value(self.NAME, keyword, mine[name], value)
        self.F, self.delay, self.mix = fragments, delay, mix
        if self.F > self.H:
            raise Error(f"{self.NAME}: {self.F} fragments need H of at least {self.F}, not {self.H}")
        if self.delay > self.H // self.F:
            raise Error(f"{self.NAME}: delay {self.delay} exceeds the {self.H // self.F} steps "
                        f"between two fragments' synchronizations (H {self.H} / fragments {self.F})")
        self.names, self.merge_at, self.merging = names, -1, 0

    def _fragments(self, params):
        names = self.names or [str(i) for i in range(len(params))]
        blocks, spans, off = {}, [[] for _ in range(self.F)], 0
        for name, p in zip(names, params):
            parts = name.split(".")
            key = ".".join(parts[:2]) if len(parts) > 2 and parts[1].isdigit() else parts[0]
            b = blocks.setdefault(key, len(blocks))
            spans[b % self.F].append((off, p.numel()))
            off += p.numel()
        return spans

    def fragment_at(self, s):
        for f in range(self.F):
            if s > 0 and s % self.H == (f + 1) * self.H // self.F % self.H:
                return f
        return -1

    def _merge(self):
        self.outer_step(self.merging, self.mix)
        self.merge_at = -1

    def after(self):
        WeightAlgorithm.after(self)
        if _C.size() == 1 or self.warming_up():
            return
        if self.merge_at >= 0 and self.t >= self.merge_at:
            self._merge()
        f = self.fragment_at(self.t - self.warmup)
        if f < 0:
            return
        self.average(f)
        self.merging, self.merge_at = f, self.t + self.delay

    def _resume_schedule(self):
        """The fragment in flight after step t (taken after step t - d, d < delay)."""
        self.merge_at = -1
        for d in range(self.delay):
            f = self.fragment_at(self.t - self.warmup - d)
            if f >= 0:
                self.merging, self.merge_at = f, self.t - d + self.delay
                return

    def reload(self):
        super().reload()
        self.merge_at = -1

    def _tensors(self):
        return dict(super()._tensors(), in_flight=self.delta)

    def load_state(self, state):
        super().load_state(state)
        self._resume_schedule()


BINDINGS = {"diloco": DiLoCo, "streaming-diloco": StreamingDiLoCo}
