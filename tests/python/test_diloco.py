"""bagpipe.torch's diloco and streaming-diloco against a reference of their rules
(src/parallel/dp/diloco.c, streaming_diloco.c) written here in torch, under mpirun -np N:
a second copy of the model on every rank takes the same inner SGD steps on the same
batches, and the reference's outer step (the pseudo-gradients of every rank gathered
over bagpipe, averaged, the Nesterov step, the merge) is applied to it. On 2 ranks
every step's weights agree bit for bit (a sum of two floats has one order); on more,
within float32's summation order for the uncompressed allreduce. The state in the
module's state_dict resumes bit for bit."""
import sys

import torch

import common
import bagpipe
import bagpipe.torch as bpt
from bagpipe import _C

LR, STEPS = 0.1, 9


def flat_of(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def set_flat(model, x):
    torch.nn.utils.vector_to_parameters(x.clone(), model.parameters())


def model_of():
    return common.tiny_model(seed=0, layers=2)  # blocks 0, 2, 4 (Linear layers)


def inner_step(model, opt, t):
    x, y = common.batch(_C.rank(), t)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


class Ref:
    """The rule on a copy of the model: G, M, E (and F for reduce-scatter) here."""

    def __init__(self, H, compress="none", exchange="allgather", F=1, delay=1, mix=0.0,
                 lr=0.7, mu=0.9, warmup=0):
        self.model = model_of()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=LR)
        w = flat_of(self.model)
        self.G, self.M, self.D = w.clone(), torch.zeros_like(w), torch.zeros_like(w)
        self.E, self.Fe = torch.zeros_like(w), torch.zeros_like(w)
        self.H, self.F, self.delay, self.mix = H, F, delay, mix
        self.alpha = torch.tensor(mix)  # the merge's two weights in float32, as in C
        self.beta = torch.tensor(1.0) - self.alpha
        self.lr, self.mu = torch.tensor(lr, dtype=torch.float32), torch.tensor(mu)
        self.codec = _C.Codec.minmax_u8() if compress == "minmax8" else None
        self.exchange, self.t, self.merge_at, self.merging = exchange, 0, -1, 0
        self.warmup = warmup
        spans, off = [[] for _ in range(F)], 0
        for i, p in enumerate(self.model.parameters()):  # Linear layer i // 2 is block i // 2
            spans[(i // 2) % F].append((off, p.numel()))
            off += p.numel()
        self.spans = spans

    def _code(self, u):
        """decode(encode(u)), and the bytes."""
        out = torch.empty_like(u)
        raw = self.codec.encode(u.numpy())
        self.codec.decode(raw, out.numpy())
        return out

    def average(self, f):
        w, p, inv = flat_of(self.model), _C.size(), torch.tensor(1.0 / _C.size())
        for off, n in self.spans[f]:
            d = self.G[off:off + n] - w[off:off + n]
            if self.codec is None:
                self.D[off:off + n] = sum(common.gather(d)) / p
            elif self.exchange == "allgather":
                u = d + self.E[off:off + n]
                c = self._code(u)
                self.E[off:off + n] = u - c
                all_c = common.gather(c)
                s = all_c[0].clone()
                for r in range(1, p):
                    s = s + all_c[r]
                self.D[off:off + n] = s * inv
            else:
                self._reduce_scatter(d, off, n, p, inv)

    def _reduce_scatter(self, d, off, n, p, inv):
        u = d + self.E[off:off + n]
        c = torch.empty_like(u)
        for j in range(p):
            o, k = _C.chunk(n, p, j)
            if k:
                c[o:o + k] = self._code(u[o:o + k])
        self.E[off:off + n] = u - c
        all_c = common.gather(c)
        o, k = _C.chunk(n, p, _C.rank())
        mine = torch.zeros(n)
        if k:
            s = all_c[0][o:o + k].clone()
            for r in range(1, p):
                s = s + all_c[r][o:o + k]
            v = s * inv + self.Fe[off + o:off + o + k]
            mine[o:o + k] = self._code(v)
            self.Fe[off + o:off + o + k] = v - mine[o:o + k]
        reduced = common.gather(mine)
        for j in range(p):
            o, k = _C.chunk(n, p, j)
            self.D[off + o:off + o + k] = reduced[j][o:o + k]

    def outer(self, f, mix):
        w = flat_of(self.model)
        for off, n in self.spans[f]:
            s = slice(off, off + n)
            d = self.D[s]
            self.M[s] = self.mu * self.M[s] + d
            self.G[s] = self.G[s] - self.lr * (d + self.mu * self.M[s])
            w[s] = self.G[s] if mix == 0 else self.alpha * w[s] + self.beta * self.G[s]
        set_flat(self.model, w)

    def step(self):
        if self.t < self.warmup:  # gradients averaged: the replicas stay alike
            x, y = common.batch(_C.rank(), self.t)
            self.opt.zero_grad()
            torch.nn.functional.cross_entropy(self.model(x), y).backward()
            for p in self.model.parameters():
                p.grad.copy_(sum(common.gather(p.grad)) / _C.size())
            self.opt.step()
            self.t += 1
            self.G = flat_of(self.model)
            return
        inner_step(self.model, self.opt, self.t)
        self.t += 1
        s = self.t - self.warmup
        if self.F == 1 and self.mix == 0:
            if s % self.H == 0:
                self.average(0)
                self.outer(0, 0.0)
            return
        if self.merge_at >= 0 and self.t >= self.merge_at:
            self.outer(self.merging, self.mix)
            self.merge_at = -1
        for f in range(self.F):
            if s > 0 and s % self.H == (f + 1) * self.H // self.F % self.H:
                self.average(f)
                self.merging, self.merge_at = f, self.t + self.delay


def same(a, b, what):
    if _C.size() == 2:
        assert torch.equal(a, b), f"{what}: differs by {(a - b).abs().max()}"
    else:
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), f"{what}: {(a - b).abs().max()}"


def wrapped(algorithm, **options):
    base = common.tiny_model(seed=_C.rank(), layers=2)  # differs per rank: bcast fixes it
    opt = torch.optim.SGD(base.parameters(), lr=LR)
    return base, opt, bpt.with_bagpipe(base, opt, algorithm, **options)


def check(algorithm, ref, **options):
    base, opt, model = wrapped(algorithm, **options)
    for t in range(STEPS):
        inner_step(model, opt, t)
        ref.step()
        same(flat_of(base), flat_of(ref.model), f"{algorithm} {options} step {t + 1}")
    model.finish()


def test_diloco_float32():
    check("diloco", Ref(3), H=3)


def test_diloco_minmax8_allgather():
    check("diloco", Ref(2, "minmax8", lr=0.5, mu=0.8), H=2, compress="minmax8", outer_lr=0.5,
          outer_momentum=0.8)


def test_diloco_minmax8_reduce_scatter():
    check("diloco", Ref(2, "minmax8", "reduce-scatter"), H=2, compress="minmax8",
          exchange="reduce-scatter")


def test_warmup():
    """3 steps of averaged gradients, then H 2 (diloco) or 4 (streaming) from there."""
    check("diloco", Ref(2, warmup=3), H=2, warmup=3)
    check("streaming-diloco", Ref(4, F=2, delay=2, mix=0.3, warmup=3), H=4, fragments=2, delay=2,
          mix=0.3, warmup=3)


def test_streaming_diloco():
    """2 fragments (Linear 0 and 4, Linear 2) at offsets 2 and 0 of H 4, merged 2 steps
    later with mix 0.3; and with minmax8 by reduce-scatter, delay 1, mix 0.5."""
    check("streaming-diloco", Ref(4, F=2, delay=2, mix=0.3), H=4, fragments=2, delay=2, mix=0.3)
    check("streaming-diloco", Ref(4, "minmax8", "reduce-scatter", F=2, delay=1, mix=0.5), H=4,
          fragments=2, delay=1, compress="minmax8", exchange="reduce-scatter")


def check_resume(algorithm, stop, **options):
    """`stop` steps, the module's and the optimizer's state_dicts saved, STEPS - stop
    more; a fresh model loaded from them takes the same steps to the same bits."""
    base, opt, model = wrapped(algorithm, **options)
    for t in range(stop):
        inner_step(model, opt, t)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    saved_opt = opt.state_dict()
    keys = {k.split("_bagpipe.")[-1] for k in saved if k.startswith("_bagpipe.")}
    for t in range(stop, STEPS):
        inner_step(model, opt, t)
    want = flat_of(base)
    model.finish()
    base2, opt2, model2 = wrapped(algorithm, **options)
    model2.load_state_dict(saved)
    opt2.load_state_dict(saved_opt)
    for t in range(stop, STEPS):
        inner_step(model2, opt2, t)
    assert torch.equal(flat_of(base2), want), f"{algorithm} {options}: resumed after {stop} differs"
    model2.finish()
    return keys


def test_state_dict_resumes_bit_exactly():
    keys = check_resume("diloco", 5, H=3, compress="minmax8", exchange="reduce-scatter")
    assert keys == {"t", "global", "outer_momentum", "error_feedback",
                    "error_feedback_reduced"}, keys
    # H 4, 2 fragments: offsets 2 and 0, fragment 0 taken at steps 2 and 6, fragment 1
    # at 4 and 8; with delay 2, after step 5 fragment 1's average is in flight
    keys = check_resume("streaming-diloco", 5, H=4, fragments=2, delay=2, mix=0.3)
    assert keys == {"t", "global", "outer_momentum", "in_flight"}, keys


def test_options_are_the_registry_checks():
    for algorithm, options, line in [
            ("diloco", {"H": 0}, "diloco: H must be within [1, 1e+12] (--inner-steps), not 0"),
            ("diloco", {"compress": "int3"},
             "diloco: compress 'int3' is not one of none, minmax8, minmax4, topk2, minmax2"),
            ("diloco", {"exchange": "reduce-scatter"},
             "diloco: exchange 'reduce-scatter' needs compress (float32 outer gradients go by an "
             "allreduce)"),
            ("streaming-diloco", {"H": 4, "fragments": 2, "delay": 3},
             "streaming-diloco: delay 3 exceeds the 2 steps between two fragments' "
             "synchronizations (H 4 / fragments 2)")]:
        try:
            wrapped(algorithm, **options)
        except bagpipe.Error as e:
            assert str(e) == line, str(e)
        else:
            raise AssertionError(f"{algorithm} {options} was accepted")


if __name__ == "__main__":
    bagpipe.init()
    sys.exit(1 if common.run([test_diloco_float32, test_diloco_minmax8_allgather,
                              test_diloco_minmax8_reduce_scatter, test_streaming_diloco, test_warmup,
                              test_state_dict_resumes_bit_exactly,
                              test_options_are_the_registry_checks]) else 0)
