"""The gradient hooks against their references, under mpirun -np N:
allreduce gives DDP's default gradients; bytegrad gives, bit for bit, C_LP_S
computed here with the C codec from every rank's bucket, and qadam the same of
each rank's momentum after warm-up; powersgd compresses and keeps the replicas
identical."""
import math
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import common
import bagpipe.torch as bpt
from bagpipe import _C


def grads_after_backward(model, rank, step=0):
    x, y = common.batch(rank, step)
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def test_allreduce_hook_is_ddp_default():
    ref = DDP(common.tiny_model())
    ours = DDP(common.tiny_model())
    ours.register_comm_hook(bpt.HookState(), bpt.allreduce_hook)
    for step in range(3):  # DDP rebuilds its buckets after the first
        a = grads_after_backward(ref, _C.rank(), step)
        b = grads_after_backward(ours, _C.rank(), step)
        for ga, gb in zip(a, b):
            if _C.size() in (1, 2):  # x/2 + y/2 == (x + y)/2 exactly
                assert torch.equal(ga, gb), (ga - gb).abs().max()
            else:
                assert torch.allclose(ga, gb, rtol=1e-6, atol=1e-7), (ga - gb).abs().max()


def lp_reference(buffers, codec):
    """C_LP_S by comm.h's rule: chunk j of every rank encoded, decoded and summed in
    rank order by its owner, scaled by 1/p, encoded again; everyone decodes."""
    p, n = len(buffers), buffers[0].numel()
    out = torch.empty(n)
    for j in range(p):
        off, ln = _C.chunk(n, p, j)
        acc, dec = torch.empty(ln), torch.empty(ln)
        for r in range(p):
            codec.decode(codec.encode(buffers[r][off:off + ln].contiguous().numpy()),
                         (acc if r == 0 else dec).numpy())
            if r:
                acc += dec
        acc *= torch.tensor(1.0 / p, dtype=torch.float32)
        seg = torch.empty(ln)
        codec.decode(codec.encode(acc.numpy()), seg.numpy())
        out[off:off + ln] = seg
    return out


def test_bytegrad_hook_gives_the_codec_bytes():
    seen = []

    def recording(state, bucket):
        before = bucket.buffer().clone()
        fut = bpt.bytegrad_hook(state, bucket)

        def keep(f):
            seen.append((before, f.value().clone()))
            return f.value()
        return fut.then(keep)

    model = DDP(common.tiny_model(hidden=64, layers=2))
    model.register_comm_hook(bpt.HookState(), recording)
    codec = _C.Codec.minmax_u8()
    for step in range(2):
        seen.clear()
        grads_after_backward(model, _C.rank(), step)
        assert seen
        for before, after in seen:
            expect = lp_reference(common.gather(before), codec)
            assert torch.equal(after, expect), (after - expect).abs().max()


def replicas_agree(model):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    for other in common.gather(flat):
        assert torch.equal(other, flat)


def train(model, opt, steps):
    for step in range(steps):
        x, y = common.batch(_C.rank(), step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def test_powersgd_hook_keeps_replicas_identical():
    base = common.tiny_model(hidden=64)
    opt = torch.optim.SGD(base.parameters(), lr=0.1)
    state = bpt.PowerSGDState(rank=2, warmup=2)
    model = DDP(base)
    model.register_comm_hook(state, bpt.powersgd_hook)
    train(model, opt, 5)
    replicas_agree(base)
    # The 64 x 10 matrix was worth compressing at rank 2: its codec ran.
    assert any(c is not None and c.compresses for c in state.codecs.values()), state.codecs


def test_qadam_averages_the_momentum_compressed():
    """After warm-up the hook's result is C_LP_S (bit for bit, by the C codec) of
    each rank's b1 m + (1 - b1) g, m being the optimizer's averaged momentum."""
    base = common.tiny_model()
    opt = bpt.QAdamOptimizer(base.parameters(), lr=0.01, warmup=2)
    state = bpt.QAdamState(opt)
    seen = []

    def recording(state, bucket):
        local = torch.cat([opt.state[p]["exp_avg"].reshape(-1) for p in bucket.parameters()])
        _C.momentum(bucket.buffer().numpy(), local.numpy(), 0.9)  # the C runtime's kernel
        fut = bpt.qadam_hook(state, bucket)
        return fut.then(lambda f: (seen.append((opt.t + 1, local, f.value().clone())),
                                   f.value())[1])

    model = DDP(base)
    model.register_comm_hook(state, recording)
    train(model, opt, 5)
    replicas_agree(base)
    codec = _C.Codec.minmax_u8()
    late = [(local, out) for t, local, out in seen if t > 2]
    assert late, "no step after warm-up"
    for local, out in late:
        expect = lp_reference(common.gather(local), codec)
        assert torch.equal(out, expect), (out - expect).abs().max()


def qadam_kernel(p, g, m, v, lr, b1, b2, eps, wd, t, moments):
    """The cpu backend's BP_UPDATE_QADAM (src/core/backend_cpu.c) in float32, its
    constants rounded where the C code rounds them."""
    f = np.float32
    if moments:
        gi = g + f(wd) * p
        m[:] = f(b1) * m + (f(1) - f(b1)) * gi
        v[:] = f(b2) * v + (f(1) - f(b2)) * gi * gi
    step, sqrt_bc2 = f(lr / (1.0 - math.pow(b1, t))), f(math.sqrt(1.0 - math.pow(b2, t)))
    p -= step * m / (np.sqrt(v) / sqrt_bc2 + f(eps))


def test_qadam_optimizer_is_the_c_update():
    """QAdamOptimizer's steps give the bits of the C runtime's QAdam update on the
    same gradients: AdamW's moments on g + wd p while t < warmup, none at t =
    warmup, then the momentum the hook left as the gradient, v frozen."""
    gen = torch.Generator().manual_seed(3)
    w = torch.nn.Parameter(torch.randn(257, generator=gen))
    lr, betas, eps, wd, warmup = 0.01, (0.9, 0.999), 1e-8, 0.01, 3
    opt = bpt.QAdamOptimizer([w], lr=lr, betas=betas, eps=eps, weight_decay=wd, warmup=warmup)
    p, m, v = (x.detach().numpy().copy() for x in (w, w * 0, w * 0))
    for t in range(1, 7):
        g = torch.randn(257, generator=gen)
        w.grad = g.clone()
        opt.step()
        if t > warmup:
            m[:] = g.numpy()
        qadam_kernel(p, g.numpy(), m, v, lr, *betas, eps, wd, t, t < warmup)
        assert torch.equal(w.detach(), torch.from_numpy(p)), \
            f"step {t}: {(w.detach() - torch.from_numpy(p)).abs().max()}"


def test_qadam_leaves_the_weights_of_dead_inputs():
    """The weights of an input that is always zero have zero gradients, moments and
    (v frozen at 0 after warm-up) must still not move: MinMaxUInt8 gives 0 back
    exactly, so the compressed momentum there is 0, not a quantization error that
    eps alone would divide. (An input zero only during the warm-up does diverge,
    as in the C runtime and Bagua: python/README.md.)"""
    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    opt = bpt.QAdamOptimizer(base.parameters(), lr=1e-3, warmup=3)
    model = bpt.with_bagpipe(base, opt, "qadam")
    dead = base[0].weight.detach()[:, :8].clone()
    gen = torch.Generator().manual_seed(1 + _C.rank())
    for _ in range(8):
        x, y = torch.randn(32, 20, generator=gen), torch.randint(0, 3, (32,), generator=gen)
        x[:, :8] = 0
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    assert torch.equal(base[0].weight.detach()[:, :8], dead), "dead inputs' weights moved"
    assert opt.state[base[0].weight]["exp_avg_sq"][:, :8].eq(0).all()


def rebuilt_buckets(algorithm, **ddp):
    """The sizes in bytes of the buckets that DDP rebuilt after its first steps over
    eight 128x128 layers (66 KB each: 528 KB, one DDP bucket by DDP's own sizes)."""
    base = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(8)])
    opt = (bpt.QAdamOptimizer(base.parameters(), lr=1e-3, warmup=10) if algorithm == "qadam"
           else torch.optim.SGD(base.parameters(), lr=0.01))
    first = dist._DEFAULT_FIRST_BUCKET_BYTES
    model = bpt.with_bagpipe(base, opt, algorithm, **ddp)
    assert dist._DEFAULT_FIRST_BUCKET_BYTES == first, "DDP's first bucket size left changed"
    for step in range(3):
        opt.zero_grad()
        model(torch.randn(16, 128, generator=torch.Generator().manual_seed(step))).sum().backward()
        opt.step()
    logged = model._get_ddp_logging_data()
    assert logged["has_rebuilt_buckets"] == 1
    return [int(b) for b in logged["rebuilt_bucket_sizes"].split(",")]


def test_compressed_buckets_are_small_unless_asked():
    for algorithm in ("bytegrad", "qadam"):
        small = rebuilt_buckets(algorithm)
        cap = int(bpt.DEFAULT_BUCKET_MB[algorithm] * 2**20)
        assert len(small) >= 2 and all(b < cap + 128 * 129 * 4 for b in small), (algorithm, small)
        assert rebuilt_buckets(algorithm, bucket_cap_mb=25) == [8 * 128 * 129 * 4]
    assert rebuilt_buckets("allreduce") == [8 * 128 * 129 * 4]  # DDP's own


def test_cuda_tensors_refused_with_one_line():
    t = torch.zeros(4, device="meta")
    try:
        bpt._tensors.buf(t)
    except bpt.Error as e:
        assert "CUDA tensors are not supported yet" in str(e), str(e)
    else:
        raise AssertionError("a device tensor was accepted")


if __name__ == "__main__":
    bpt.init_process_group()
    rc = common.run([test_allreduce_hook_is_ddp_default, test_bytegrad_hook_gives_the_codec_bytes,
                     test_powersgd_hook_keeps_replicas_identical,
                     test_qadam_averages_the_momentum_compressed,
                     test_qadam_optimizer_is_the_c_update,
                     test_qadam_leaves_the_weights_of_dead_inputs,
                     test_compressed_buckets_are_small_unless_asked,
                     test_cuda_tensors_refused_with_one_line])
    dist.destroy_process_group()
    sys.exit(1 if rc else 0)
