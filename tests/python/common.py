"""What the Python tests share: the package from the build tree, a tiny model,
gathering a tensor from every rank over bagpipe (no gloo needed) and a runner
that reports 'N passed, N failed' on rank 0."""
import os
import sys
import traceback

sys.path.insert(0, os.environ.get("BP_PYTHON_PATH", os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "python")))
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import torch  # noqa: E402
except ImportError as e:  # ctest reports exit code 77 as skipped
    print(f"skipped: {e} (scripts/setup.sh installs python3-torch)", flush=True)
    sys.exit(77)

import bagpipe  # noqa: E402
from bagpipe import _C  # noqa: E402

torch.set_num_threads(1)


def tiny_model(seed=0, hidden=24, layers=1):
    torch.manual_seed(seed)
    mods = [torch.nn.Linear(10, hidden), torch.nn.Tanh()]
    for _ in range(layers - 1):
        mods += [torch.nn.Linear(hidden, hidden), torch.nn.Tanh()]
    return torch.nn.Sequential(*mods, torch.nn.Linear(hidden, 3))


def batch(rank, step, n=16):
    g = torch.Generator().manual_seed(1000 * rank + step)
    x = torch.randn(n, 10, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    return x, y


def gather(t):
    """[t of rank 0, t of rank 1, ...]: each rank writes its slot of a zero buffer,
    and a sum over the ranks (x + 0 is exact) assembles them."""
    n, p, r = t.numel(), _C.size(), _C.rank()
    buf = torch.zeros(p * n)
    buf[r * n:(r + 1) * n] = t.detach().reshape(-1)
    _C.allreduce_sum(buf.numpy())
    return [buf[i * n:(i + 1) * n].view_as(t) for i in range(p)]


def run(tests):
    failed = 0
    for t in tests:
        try:
            t()
            ok = 1.0
        except Exception:
            ok = 0.0
            print(f"rank {_C.rank()}: {t.__name__} FAILED", flush=True)
            traceback.print_exc()
        flag = torch.tensor([ok])
        _C.allreduce_sum(flag.numpy())  # every rank must pass
        if flag.item() != _C.size():
            failed += 1
        elif _C.rank() == 0:
            print(f"{t.__name__}: ok", flush=True)
    if _C.rank() == 0:
        print(f"{len(tests) - failed} passed, {failed} failed", flush=True)
    return failed
