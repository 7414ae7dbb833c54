"""The weight algorithms of bagpipe.torch against their reference rules (those of
src/parallel/dp/, docs/algorithms.md#data-parallel-algorithms), under mpirun -np N, without
torch.distributed: every rank's weights are gathered over bagpipe and the rule is
applied here to the same numbers."""
import inspect
import sys

import numpy as np
import torch

import common
import bagpipe
import bagpipe.torch as bpt
from bagpipe import _C

LR = 0.1


def flat_of(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def grads_of(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


class Run:
    """A model wrapped with `algorithm`, whose steps record, per step, every
    rank's weights when the step began and this rank's gradient."""

    def __init__(self, algorithm, optim=None, **options):
        self.base = common.tiny_model(seed=_C.rank())  # differs per rank: bcast must fix it
        self.opt = (optim or (lambda p: torch.optim.SGD(p, lr=LR)))(self.base.parameters())
        self.model = bpt.with_bagpipe(self.base, self.opt, algorithm, **options)

    def step(self, t):
        x_t = common.gather(flat_of(self.base))
        x, y = common.batch(_C.rank(), t)
        self.opt.zero_grad()
        torch.nn.functional.cross_entropy(self.model(x), y).backward()
        g = grads_of(self.base)
        self.opt.step()
        return x_t, g


def close(a, b, what):
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), f"{what}: {(a - b).abs().max()}"


def test_broadcast_gives_rank_zero_weights():
    run = Run("easgd")
    for other in common.gather(flat_of(run.base)):
        assert torch.equal(other, flat_of(common.tiny_model(seed=0)))


def check_decentralized(peers, interval):
    run = Run("decentralized", peers=peers, interval=interval)
    r, n, rounds = _C.rank(), _C.size(), 0
    for t in range(4):
        x_t, g = run.step(t)
        if t % interval:
            avg = x_t[r]
        elif peers == "all":
            avg = sum(x_t) / n
        else:
            avg = (x_t[r] + x_t[_C.shift_one_peer(r, n, rounds)]) / 2
        rounds += t % interval == 0
        close(flat_of(run.base), avg - LR * g, f"decentralized {peers} step {t}")
    run.model.finish()


def test_decentralized_shift_one():
    check_decentralized("shift_one", 1)


def test_decentralized_all_interval_2():
    check_decentralized("all", 2)


def test_lp_decentralized_ring():
    """z = x + l/3 + r/3 - 5w/3; w += D(C(z)) for every rank's w, tracked here from
    the gathered local steps; each rank's weights become its w."""
    run = Run("lp-decentralized")
    n, r = _C.size(), _C.rank()
    codec = _C.Codec.minmax_u8()
    w = common.gather(flat_of(run.base))
    for t in range(4):
        x, y = common.batch(r, t)
        run.opt.zero_grad()
        torch.nn.functional.cross_entropy(run.model(x), y).backward()
        # The local step, as the wrapper's optimizer takes it, on every rank's copy.
        stepped = common.gather(flat_of(run.base) - LR * grads_of(run.base))
        run.opt.step()
        new = []
        for j in range(n):
            z = stepped[j] + w[(j - 1) % n] / 3 + w[(j + 1) % n] / 3 - 5 * w[j] / 3
            dz = torch.empty_like(z)
            codec.decode(codec.encode(z.numpy()), dz.numpy())
            new.append(w[j] + dz)
        w = new
        close(flat_of(run.base), w[r], f"lp-decentralized step {t}")


def test_easgd_elastic_rule():
    tau, n = 2, _C.size()
    alpha = 0.9 / n
    run = Run("easgd", tau=tau)
    center = flat_of(run.base).clone()
    for t in range(4):
        x_t, g = run.step(t)
        stepped = common.gather(flat_of(run.base))  # after the wrapper's elastic step
        if (t + 1) % tau == 0:
            local = [xi - LR * gi for xi, gi in zip(x_t, common.gather(g))]
            d = [alpha * (xj - center) for xj in local]
            expect = [xj - dj for xj, dj in zip(local, d)]
            center = center + sum(d)
        else:
            expect = [xi - LR * gi for xi, gi in zip(x_t, common.gather(g))]
        for j in range(n):
            close(stepped[j], expect[j], f"easgd step {t} rank {j}")


def test_easgd_is_the_c_rule_bit_for_bit():
    """EASGD's averaging is the runtime's (bp_dp_easgd_average): on the same weights
    and center, the bits of the rule as src/parallel/dp/easgd.c computes it in
    float32 (alpha as a float; the weights exactly; the center's sum of the D's
    exactly on 2 ranks, where any order gives the same sum: the ring adds more ranks'
    in an order of its own)."""
    n = _C.size()
    g = torch.Generator().manual_seed(7 + _C.rank())
    flat = torch.randn(1000, generator=g)
    algo = bpt.EASGD(alpha=0.9 / n, tau=2)
    algo.attach(flat, [flat])
    algo.center.copy_(torch.randn(1000, generator=torch.Generator().manual_seed(99)))
    x, c, alpha = flat.numpy().copy(), algo.center.numpy().copy(), np.float32(0.9 / n)
    algo.after()
    assert torch.equal(flat, torch.from_numpy(x)), "easgd averaged at t = 1 of tau 2"
    algo.after()
    d = alpha * (x - c)
    total = sum(common.gather(torch.from_numpy(d))).numpy()
    expect_x, expect_c = x - d, c + total
    near = (lambda a, b: torch.allclose(a, b, rtol=0, atol=1e-6))
    for got, want, what, same in ((flat, expect_x, "weights", torch.equal),
                                  (algo.center, expect_c, "center",
                                   torch.equal if n == 2 else near)):
        want = torch.from_numpy(want)
        assert same(got, want), f"easgd: the {what} differ from the C rule's by " \
            f"{(got - want).abs().max()}"


def test_lp_decentralized_overlap_is_the_whole_step():
    """The ring's step split as optimizer.step takes it (the part that needs no
    neighbour at once, the exchange on the communication thread while the next
    step computes) gives the bits of the whole step, bp_ring_lp_step: the weights
    after every step and the three replicas, with chunks."""
    g = torch.Generator().manual_seed(11 + _C.rank())
    flat = torch.randn(2500, generator=g)
    ref = flat.clone()
    algo = bpt.LowPrecisionDecentralized(chunk=1000)
    algo.attach(flat, [flat])
    ring = _C.Ring(ref.numpy(), 1000)
    for t in range(6):
        d = 0.1 * torch.randn(2500, generator=g)
        flat -= d  # while the last exchange may still run
        ref -= d
        algo.after()
        ring.step(ref.numpy())
        assert torch.equal(flat, ref), f"lp-decentralized step {t}: {(flat - ref).abs().max()}"
    want = [torch.empty_like(ref) for _ in range(3)]
    ring.get(*(x.numpy() for x in want))
    for got, x, what in zip(algo._replicas(), want, ("w", "l", "r")):
        assert torch.equal(got, x), f"lp-decentralized: replica {what} differs"
    algo.finish()


def test_registry_gives_the_choices_and_checks():
    """The algorithms, their kinds and their options are the C registry's; a binding's
    keywords are checked by the registry's ranges and choices; an algorithm of the
    registry without a binding is refused with one line."""
    names = [a[0] for a in _C.algorithms()]
    assert list(bpt.ALGORITHMS) == names, (bpt.ALGORITHMS, names)
    assert set(bpt.GRADIENT_ALGORITHMS) | set(bpt.WEIGHT_ALGORITHMS) == set(names)
    assert {"allreduce", "bytegrad", "qadam", "powersgd"} <= set(bpt.GRADIENT_ALGORITHMS)
    # The bindings' defaults are the CLI's, but for PowerSGD's warm-up (DDP rebuilds
    # its buckets after the first step: at least 2).
    differ = {("powersgd", "warmup")}
    for name, binding in bpt.BINDINGS.items():
        assert name in names, f"binding {name} is not in the registry"
        made = binding.state if hasattr(binding, "hook") else binding
        params = inspect.signature(made).parameters
        for keyword, value in bpt.registry.defaults(name, binding).items():
            if value is not None and (name, keyword) not in differ:
                assert params[keyword].default == value, (name, keyword, value)
    assert bpt.registry.defaults("decentralized", bpt.Decentralized) == {
        "peers": "shift_one", "interval": 1}
    refused = {
        ("easgd", "tau", 0): "easgd: tau must be within [1, 1e+12] (--ea-period), not 0",
        ("decentralized", "peers", "ring"): "decentralized: peers 'ring' is not one of "
                                            "shift_one, all",
        ("decentralized", "order", "bagua"): "bagpipe: decentralized takes no option 'order' "
                                             "(it takes interval, peers; --decentralized-order "
                                             "only in bagpipe train)",
        ("async", "sync_ms", 2.5): "async: sync_ms must be an integer, not 2.5",
    }
    for (algorithm, keyword, value), message in refused.items():
        base = common.tiny_model()
        try:
            bpt.with_bagpipe(base, torch.optim.SGD(base.parameters(), lr=LR), algorithm,
                             **{keyword: value})
        except bagpipe.Error as e:
            assert str(e) == message, str(e)
        else:
            raise AssertionError(f"{algorithm} took {keyword}={value!r}")
    unbound = [n for n in names if n not in bpt.BINDINGS]
    for name in unbound:
        try:
            bpt.with_bagpipe(common.tiny_model(), None, name)
        except bagpipe.Error as e:
            assert str(e).startswith(f"bagpipe: algorithm '{name}' ("), str(e)
            assert "has no PyTorch binding: it runs in bagpipe train --dp-algo" in str(e), str(e)
        else:
            raise AssertionError(f"{name} without a binding was accepted")


def test_async_keeps_the_sum_and_averages():
    """x += avg(s) - s changes no sum over the ranks: after the thread stops, the
    ranks' weights add up to their start plus every local step -lr g; the warm-up
    steps average gradients, so the replicas agree after them."""
    warmup = 2
    run = Run("async", sync_ms=2, warmup=warmup)
    start = sum(common.gather(flat_of(run.base)))
    local = torch.zeros_like(start)
    for t in range(12):
        x, y = common.batch(_C.rank(), t)
        run.opt.zero_grad()
        torch.nn.functional.cross_entropy(run.model(x), y).backward()
        run.opt.step()
        # SGD's own step, -lr g. Reading the weights before and after step() would
        # also count rounds of the thread that land outside the optimizer's lock.
        local -= LR * grads_of(run.base)
        if t == warmup - 1:
            reps = common.gather(flat_of(run.base))
            assert all(torch.equal(reps[0], q) for q in reps), "warm-up left replicas apart"
    rounds = run.model.finish()
    assert rounds > 0, "the averaging thread never ran a round"
    total = sum(common.gather(flat_of(run.base)))
    close(total, start + sum(common.gather(local)), "async sum")


def test_errors_are_exceptions():
    try:
        bpt.with_bagpipe(common.tiny_model(), None, "sparse")
    except bagpipe.Error as e:
        assert str(e).startswith("bagpipe: algorithm 'sparse' is not one of allreduce"), str(e)
    else:
        raise AssertionError("an unknown algorithm was accepted")
    try:
        _C.bcast(torch.zeros(3).numpy(), _C.size())
    except bagpipe.Error as e:
        assert str(e) == f"bcast: root {_C.size()} is not a rank of {_C.size()}", str(e)
    else:
        raise AssertionError("a bad root was accepted")
    try:
        _C.allreduce_avg(torch.zeros(3, dtype=torch.float64).numpy())
    except TypeError as e:
        assert "float32" in str(e), str(e)
    else:
        raise AssertionError("float64 was accepted")


if __name__ == "__main__":
    bagpipe.init()
    tests = [test_broadcast_gives_rank_zero_weights, test_decentralized_all_interval_2,
             test_lp_decentralized_ring, test_lp_decentralized_overlap_is_the_whole_step,
             test_easgd_elastic_rule,
             test_easgd_is_the_c_rule_bit_for_bit, test_registry_gives_the_choices_and_checks,
             test_async_keeps_the_sum_and_averages, test_errors_are_exceptions]
    if _C.size() % 2 == 0:
        tests.insert(1, test_decentralized_shift_one)
    sys.exit(1 if common.run(tests) else 0)
