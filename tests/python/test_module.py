"""BagpipeModule and with_bagpipe keep DistributedDataParallel's contract where
training scripts rely on it, under mpirun -np N (with torch.distributed for the
DDP references): process_group, buffers, load_state_dict, state_dict and resume,
QAdam's step count, LR schedulers, evaluation on some ranks, no_sync, DDP's
keyword arguments, wrapping once, and exceptions raised by optimizer.step. The
model has BatchNorm, tied weights and a parameter that the forward never uses."""
import io
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import common
import bagpipe
import bagpipe.torch as bpt
from bagpipe import _C

LR = 0.1
WEIGHT = ("decentralized", "lp-decentralized", "async", "easgd")
OPTIONS = {"decentralized": {"peers": "all"}, "lp-decentralized": {}, "async": {"sync_ms": 2},
           "easgd": {"tau": 1}}


class Net(torch.nn.Module):
    """BatchNorm on the inputs (its running statistics depend on the data only, so
    they can be compared with DDP's), two layers sharing one weight, an unused one."""

    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.bn = torch.nn.BatchNorm1d(10)
        self.a = torch.nn.Linear(10, 16)
        self.b = torch.nn.Linear(10, 16)
        self.b.weight = self.a.weight
        self.out = torch.nn.Linear(16, 3)
        self.unused = torch.nn.Linear(4, 4)

    def forward(self, x):
        x = self.bn(x)
        return self.out(torch.tanh(self.a(x)) + torch.tanh(self.b(0.5 * x)))


def flat_of(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def buffers_of(model):
    return torch.cat([b.detach().double().reshape(-1) for b in model.buffers()])


def equal_on_all_ranks(t, what):
    reps = common.gather(t.float())
    assert all(torch.equal(reps[0], r) for r in reps), f"{what} differ between ranks"


def wrap(algorithm, seed=None, optim=None, **options):
    base = Net(seed=_C.rank() if seed is None else seed)
    opt = (optim or (lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9)))(base.parameters())
    opts = dict(OPTIONS.get(algorithm, {}), **options)
    return base, opt, bpt.with_bagpipe(base, opt, algorithm, **opts)


def train(model, opt, steps, first=0):
    for t in range(first, first + steps):
        x, y = common.batch(_C.rank(), t)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def expect_error(start, fn):
    try:
        fn()
    except bagpipe.Error as e:
        assert str(e).startswith(start), str(e)
        assert "\n" not in str(e), str(e)
    else:
        raise AssertionError(f"accepted; expected '{start}...'")


def test_process_group_of_other_ranks_is_refused():
    """A group per rank (DDP keeps the replicas apart): bagpipe would average them
    over the whole world, so it refuses."""
    groups = [dist.new_group([r]) for r in range(_C.size())]
    mine = groups[_C.rank()]
    for algorithm in ("allreduce", "bytegrad", "decentralized", "easgd"):
        base = Net()
        opt = torch.optim.SGD(base.parameters(), lr=LR)
        expect_error(f"bagpipe: process_group over 1 of {_C.size()} ranks",
                     lambda: bpt.with_bagpipe(base, opt, algorithm, process_group=mine))
    base = Net()
    bpt.with_bagpipe(base, torch.optim.SGD(base.parameters(), lr=LR), "allreduce",
                     process_group=dist.group.WORLD)


def test_buffers_follow_rank_zero_as_ddp():
    """Buffers set differently per rank are rank 0's after wrapping, and after
    training steps on each rank's own data they are DDP's, bit for bit."""
    ref_base = Net(seed=_C.rank())
    ref_base.bn.running_mean.fill_(float(_C.rank()))
    ref = DDP(ref_base, find_unused_parameters=True)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=LR)
    train(ref, ref_opt, 3)
    for algorithm in WEIGHT:
        base = Net(seed=_C.rank())
        base.bn.running_mean.fill_(float(_C.rank()))
        base.bn.num_batches_tracked.fill_(_C.rank())
        opt = torch.optim.SGD(base.parameters(), lr=LR)
        model = bpt.with_bagpipe(base, opt, algorithm, **OPTIONS[algorithm])
        equal_on_all_ranks(buffers_of(base), f"{algorithm}: buffers after wrapping")
        assert base.bn.running_mean.eq(0).all() and base.bn.num_batches_tracked == 0
        train(model, opt, 3)
        assert torch.equal(buffers_of(base), buffers_of(ref_base)), \
            f"{algorithm}: buffers differ from DDP's"
        model.finish()


class Marked(Net):
    """Net with a buffer of another dtype that the script writes."""

    def __init__(self, seed=0):
        super().__init__(seed)
        self.register_buffer("marks", torch.zeros(3, dtype=torch.int64))


def change_buffers(model, base, t, x):
    """Step t's changes between two training forwards, some on rank 0 alone."""
    first, last = _C.rank() == 0, _C.rank() == _C.size() - 1
    if t == 1 and first:
        base.bn.running_mean.add_(1.5)
        base.marks[1] += 7
    if t == 2 and first:
        base.bn.reset_running_stats()
    if t == 3:  # buffers that differ per rank, through the wrapper
        sd = {f"module.{k}": v.clone() for k, v in base.state_dict().items()}
        sd["module.bn.running_var"].fill_(2.0 + _C.rank())
        sd["module.marks"].fill_(_C.rank())
        model.load_state_dict(sd)
    if t == 4 and first:
        model.eval()
        with torch.no_grad():
            model(x)
        model.train()
    if t == 4 and last:  # this rank's own statistics, which rank 0's replace
        with torch.no_grad():
            model(x)
    if t == 5 and first:
        with torch.no_grad():
            model(x)


def test_buffers_are_rank_zeros_at_every_forward_start():
    """At the start of every training forward each rank's buffers are rank 0's as
    they are at the start of its forward, bit for bit, whatever changed them on
    rank 0 alone since its last one: a write, reset_running_stats, load_state_dict
    (different on each rank), a training forward under no_grad, evaluation."""
    more = {"diloco": {"H": 3}, "streaming-diloco": {"H": 3}}
    for algorithm, options in dict(OPTIONS, **more).items():
        base = Marked(seed=_C.rank())
        opt = torch.optim.SGD(base.parameters(), lr=LR)
        model = bpt.with_bagpipe(base, opt, algorithm, **options)
        seen = []

        def record(module, inputs):
            if module.training and torch.is_grad_enabled():
                seen.append(buffers_of(module))

        base.register_forward_pre_hook(record)
        for t in range(8):
            x, y = common.batch(_C.rank(), t)
            change_buffers(model, base, t, x)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        model.finish()
        assert len(seen) == 8, f"{algorithm}: {len(seen)} training forwards"
        reps = common.gather(torch.stack(seen))
        for t in range(8):
            for r, rep in enumerate(reps):
                assert torch.equal(rep[t], reps[0][t]), \
                    f"{algorithm}: rank {r}'s buffers at forward {t} are not rank 0's"


def test_load_state_dict_after_wrapping_holds():
    """Weights loaded into a wrapped model (through the wrapper or its module)
    restart the algorithm: steps at lr 0 then move them exactly as they move the
    same weights freshly wrapped (not at all, but for lp-decentralized's rounding),
    so that no center, neighbour copy or snapshot pulls them back."""
    loaded = Net(seed=99).state_dict()

    def lr_zero_steps(model, opt):
        for g in opt.param_groups:
            g["lr"], g["momentum"] = 0.0, 0.0
        train(model, opt, 3, first=3)
        model.finish()

    for algorithm in WEIGHT:
        # async: loaded before its thread starts (warm-up), as a resume loads; a load
        # while it runs races with the rounds on the other ranks.
        opts = {"warmup": 3} if algorithm == "async" else {}
        fresh, opt, model = wrap(algorithm, seed=99, **opts)
        lr_zero_steps(model, opt)
        for through_wrapper in (False, True):
            base, opt, model = wrap(algorithm, **opts)
            train(model, opt, 3)
            if through_wrapper:
                model.load_state_dict({f"module.{k}": v for k, v in loaded.items()})
            else:
                base.load_state_dict(loaded)
            lr_zero_steps(model, opt)
            moved = (flat_of(base) - flat_of(fresh)).abs().max()
            assert torch.equal(flat_of(base), flat_of(fresh)), \
                f"{algorithm}: loaded weights moved by {moved:g}"
            if algorithm != "lp-decentralized":
                assert torch.equal(base.a.weight, loaded["a.weight"])


def saved(obj):
    """A deep copy of a state dict as torch.save and torch.load make it."""
    f = io.BytesIO()
    torch.save(obj, f)
    f.seek(0)
    return torch.load(f)


def test_state_dict_resumes_bit_exactly():
    """Every algorithm's state is in the wrapper's state_dict (per rank): a run
    stopped after 4 steps and resumed into fresh objects ends where the run that
    never stopped does, bit for bit."""
    for algorithm in ("decentralized", "lp-decentralized", "easgd"):
        opts = {"decentralized": {"peers": "shift_one" if _C.size() % 2 == 0 else "all"},
                "easgd": {"tau": 3}}.get(algorithm, {})
        base, opt, model = wrap(algorithm, **opts)
        train(model, opt, 8)
        model.finish()
        whole = flat_of(base)
        base, opt, model = wrap(algorithm, **opts)
        train(model, opt, 4)
        state, opt_state = saved(model.state_dict()), saved(opt.state_dict())
        model.finish()
        base, opt, model = wrap(algorithm, seed=1234, **opts)
        model.load_state_dict(state)
        opt.load_state_dict(opt_state)
        train(model, opt, 4, first=4)
        model.finish()
        assert torch.equal(flat_of(base), whole), \
            f"{algorithm}: resumed run ends {(flat_of(base) - whole).abs().max():g} away"


def test_powersgd_state_in_ddp_state_dict():
    """powersgd's error feedback and Q are in the DDP model's state_dict: a resumed
    run ends where the run that never stopped does, bit for bit."""
    def run(seed, steps, first=0, state=None):
        base = common.tiny_model(seed=seed)
        opt = torch.optim.SGD(base.parameters(), lr=LR, momentum=0.9)
        model = bpt.with_bagpipe(base, opt, "powersgd", rank=2, warmup=2)
        if state is not None:
            model.load_state_dict(state[0])
            opt.load_state_dict(state[1])
        train(model, opt, steps, first)
        return base, saved(model.state_dict()), saved(opt.state_dict())

    whole = flat_of(run(0, 8)[0])
    _, state, opt_state = run(0, 4)
    assert any(k.endswith(".q") for k in state), sorted(state)
    resumed = flat_of(run(5, 4, first=4, state=(state, opt_state))[0])
    assert torch.equal(resumed, whole), \
        f"resumed powersgd ends {(resumed - whole).abs().max():g} away"


def test_qadam_state_dict_holds_the_step():
    """A QAdamOptimizer resumed from its state_dict goes on after warm-up, as the
    run that never stopped (bit for bit), not from step 0."""
    def grads(t):
        return torch.sin(torch.arange(20.0) + t)

    def run(opt, p, first, steps):
        for t in range(first, first + steps):
            p.grad = grads(t)
            opt.step()

    p = torch.nn.Parameter(torch.ones(20))
    whole = bpt.QAdamOptimizer([p], lr=0.01, warmup=5)
    run(whole, p, 0, 10)
    q = torch.nn.Parameter(torch.ones(20))
    first = bpt.QAdamOptimizer([q], lr=0.01, warmup=5)
    run(first, q, 0, 6)
    state = saved(first.state_dict())
    r = torch.nn.Parameter(q.detach().clone())
    resumed = bpt.QAdamOptimizer([r], lr=0.01, warmup=5)
    resumed.load_state_dict(state)
    run(resumed, r, 6, 4)
    assert resumed.t == 10, resumed.t
    assert torch.equal(r, p), f"resumed QAdam ends {(r - p).abs().max():g} away"


def test_lr_scheduler_after_wrapping():
    for algorithm in WEIGHT:
        base, opt, model = wrap(algorithm)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        train(model, opt, 1)
        sched.step()
        train(model, opt, 1, first=1)
        sched.step()
        assert opt.param_groups[0]["lr"] == LR / 4, opt.param_groups[0]["lr"]
        model.finish()


def peers_all_rule(model, base, opt, t):
    """One step of decentralized (peers all): x_{t+1} = avg(x_t) - lr g(x_t) with SGD
    without momentum (avg: the sum over ranks scaled by 1/N, in the group's order)."""
    x_t = common.gather(flat_of(base))
    x, y = common.batch(_C.rank(), t)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    g = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                   for p in base.parameters()])
    opt.step()
    want = sum(x_t) / _C.size() - LR * g
    assert torch.allclose(flat_of(base), want, rtol=1e-5, atol=1e-6), \
        f"step {t}: {(flat_of(base) - want).abs().max():g}"


def test_evaluation_on_some_ranks_any_time():
    """Forward in eval() or under no_grad starts no exchange: rank 0 alone evaluates
    between steps and after finish(), and training goes on by the rule; finish()
    is idempotent."""
    _C.set_timeout(30)  # a rank left waiting ends the job (the test fails) soon
    try:
        for algorithm in WEIGHT:
            base, opt, model = wrap(algorithm, optim=lambda p: torch.optim.SGD(p, lr=LR))
            x, _ = common.batch(_C.rank(), 0)

            def evaluate_on_rank_zero():
                if _C.rank() == 0:
                    model.eval()
                    with torch.no_grad():
                        model(x)
                    model.train()
                    with torch.no_grad():
                        model(x)

            for t in range(3):
                evaluate_on_rank_zero()
                if algorithm == "decentralized":
                    peers_all_rule(model, base, opt, t)
                else:
                    train(model, opt, 1, first=t)
            evaluate_on_rank_zero()  # after the last step, before finish
            model.finish()
            assert model.finish() == 0
            if _C.rank() == 0:
                model.eval()
                with torch.no_grad():
                    model(x)
                model.train()
                model(x)  # after finish, even a training forward is local
            _C.barrier()
    finally:
        _C.set_timeout(bagpipe.DEFAULT_TIMEOUT)


def test_no_sync_accumulates_gradients():
    """Under no_sync the forwards start no exchange; the step after it mixes the
    accumulated gradients by the rule."""
    base, opt, model = wrap("decentralized", optim=lambda p: torch.optim.SGD(p, lr=LR))
    x_t = common.gather(flat_of(base))
    x, y = common.batch(_C.rank(), 0)
    opt.zero_grad()
    with model.no_sync():
        torch.nn.functional.cross_entropy(model(x[:8]), y[:8]).backward()
        assert not model._begun, "a forward under no_sync started an exchange"
    torch.nn.functional.cross_entropy(model(x[8:]), y[8:]).backward()
    g = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                   for p in base.parameters()])
    opt.step()
    want = sum(x_t) / _C.size() - LR * g
    assert torch.allclose(flat_of(base), want, rtol=1e-5, atol=1e-6)
    model.finish()


def test_ddp_keyword_arguments():
    """Gradient algorithms pass DDP's keyword arguments to DDP (an unused parameter
    needs find_unused_parameters there); weight algorithms take those that mean
    something to them and refuse the rest with one line."""
    for algorithm in ("allreduce", "bytegrad"):
        base = Net()
        opt = torch.optim.SGD(base.parameters(), lr=LR)
        model = bpt.with_bagpipe(base, opt, algorithm, find_unused_parameters=True,
                                 gradient_as_bucket_view=True, bucket_cap_mb=1,
                                 broadcast_buffers=True)
        assert isinstance(model, DDP) and model.find_unused_parameters
        train(model, opt, 3)
    base, opt, model = wrap("easgd", find_unused_parameters=True, broadcast_buffers=False)
    assert not model.broadcast_buffers
    train(model, opt, 2)
    base, opt, model = wrap("lp-decentralized", bucket_cap_mb=1)
    assert model.algorithm.chunk == 2**20 // 4
    for algorithm in WEIGHT:
        base = Net()
        opt = torch.optim.SGD(base.parameters(), lr=LR)
        expect_error(f"bagpipe: {algorithm} mixes weights, not gradient buckets: DDP's "
                     "gradient_as_bucket_view means nothing to it",
                     lambda: bpt.with_bagpipe(base, opt, algorithm, gradient_as_bucket_view=True))


def test_wrapping_twice_is_refused():
    base, opt, model = wrap("easgd")
    other = torch.optim.SGD(Net().parameters(), lr=LR)
    for algorithm in ("allreduce", "easgd"):
        expect_error("bagpipe: the model is wrapped already",
                     lambda: bpt.with_bagpipe(base, other, algorithm))
        expect_error("bagpipe: the model is wrapped already",
                     lambda: bpt.with_bagpipe(model, opt, algorithm))
        fresh = Net()
        expect_error("bagpipe: the optimizer steps a model wrapped already",
                     lambda: bpt.with_bagpipe(fresh, opt, algorithm))
        expect_error("bagpipe: the optimizer holds parameters that are not the model's",
                     lambda: bpt.with_bagpipe(fresh, other, algorithm))


class FailingSGD(torch.optim.SGD):
    """SGD whose step raises once, on rank 1 at step `at`."""

    def __init__(self, params, at):
        super().__init__(params, lr=LR)
        self.at, self.calls = at, 0

    def step(self, closure=None):
        self.calls += 1
        if _C.rank() == 1 and self.calls == self.at + 1:
            raise ValueError("step fails on purpose")
        return super().step(closure)


def test_exception_in_step_keeps_ranks_in_step():
    """optimizer.step raising on one rank (caught by the script) releases async's
    lock and leaves decentralized's exchanges in step: training goes on by the rule
    and finish() returns on every rank."""
    _C.set_timeout(30)
    try:
        for algorithm in ("async", "decentralized"):
            base, opt, model = wrap(algorithm, optim=lambda p: FailingSGD(p, at=1))
            for t in range(4):
                if algorithm == "decentralized" and t >= 2:
                    peers_all_rule(model, base, opt, t)
                    continue
                try:
                    train(model, opt, 1, first=t)
                except ValueError:
                    assert _C.rank() == 1 and t == 1
            model.finish()
    finally:
        _C.set_timeout(bagpipe.DEFAULT_TIMEOUT)


def test_polling_waits():
    """bagpipe.init(poll=s): the world's waits and those of communication threads
    made after test and sleep, with the bits of blocking waits; an interval outside
    0..1 s is refused with one line."""
    def run(poll):
        bagpipe.init(poll=poll)
        base, opt, model = wrap("lp-decentralized", seed=0)
        train(model, opt, 3)
        model.finish()
        return flat_of(base), buffers_of(base)

    try:
        blocking, polling = run(0), run(50e-6)
        assert all(torch.equal(a, b) for a, b in zip(blocking, polling))
        expect_error(f"rank {_C.rank()} of group 'world': poll interval 2 s: expected 0 to 1 s",
                     lambda: bagpipe.init(poll=2))
        expect_error("poll: must be a number of seconds >= 0 (0 blocks in MPI)",
                     lambda: _C.set_poll(-1))
    finally:
        bagpipe.init()


def test_bad_options_and_misuse_raise():
    for alpha in (float("nan"), -1.0, 0.0):
        expect_error("easgd: alpha must be a number above 0", lambda: bpt.EASGD(alpha=alpha))
    for warmup in (0, 1):  # with 1 the second moment is never trained: updates m / eps
        expect_error("qadam: warmup must be at least 2",
                     lambda: bpt.QAdamOptimizer(common.tiny_model().parameters(), warmup=warmup))
    x = torch.zeros(8)
    a = _C.Async(x.numpy(), 5)
    a.lock()
    expect_error("Async.lock: already locked", a.lock)
    a.unlock()
    a.stop()


def test_nan_gradient_raises_bagpipes_line():
    """A gradient that bytegrad cannot encode (NaN on every rank) fails backward
    with bagpipe's line, not a failed cast of it to a tensor."""
    for algorithm in ("bytegrad", "qadam"):
        base = common.tiny_model()
        opt = (bpt.QAdamOptimizer(base.parameters(), warmup=2) if algorithm == "qadam" else
               torch.optim.SGD(base.parameters(), lr=LR))
        model = bpt.with_bagpipe(base, opt, algorithm)
        train(model, opt, 2)  # qadam: after warm-up, its momentum goes through bytegrad
        x, y = common.batch(_C.rank(), 2)
        x[0, 0] = float("nan")
        try:
            torch.nn.functional.cross_entropy(model(x), y).backward()
        except RuntimeError as e:
            assert "minmax_u8: input value" in str(e) and "Unable to cast" not in str(e), str(e)
        else:
            raise AssertionError(f"{algorithm}: a NaN gradient was averaged")


def test_consensus_state_dict_is_the_average():
    base, opt, model = wrap("easgd", tau=2)
    train(model, opt, 3)
    avg = sum(common.gather(flat_of(base))) / _C.size()
    sd = model.consensus_state_dict()
    assert set(sd) == set(base.state_dict())
    got = torch.cat([sd[k].reshape(-1) for k, _ in base.named_parameters()])
    assert torch.allclose(got, avg, rtol=1e-6, atol=1e-7)
    assert torch.equal(sd["b.weight"], sd["a.weight"])
    model.finish()


if __name__ == "__main__":
    bpt.init_process_group()
    tests = [test_process_group_of_other_ranks_is_refused, test_buffers_follow_rank_zero_as_ddp,
             test_buffers_are_rank_zeros_at_every_forward_start,
             test_load_state_dict_after_wrapping_holds, test_state_dict_resumes_bit_exactly,
             test_powersgd_state_in_ddp_state_dict, test_qadam_state_dict_holds_the_step,
             test_lr_scheduler_after_wrapping,
             test_evaluation_on_some_ranks_any_time, test_no_sync_accumulates_gradients,
             test_ddp_keyword_arguments, test_wrapping_twice_is_refused,
             test_exception_in_step_keeps_ranks_in_step, test_bad_options_and_misuse_raise,
             test_nan_gradient_raises_bagpipes_line, test_consensus_state_dict_is_the_average,
             test_polling_waits]
    only = sys.argv[1:]
    tests = [t for t in tests if not only or t.__name__ in only]
    rc = common.run(tests)
    dist.destroy_process_group()
    sys.exit(1 if rc else 0)
