"""Tensors as the C library takes them: float32 host memory, contiguous."""
import torch

from .. import Error


def check(t, what="tensor"):
    """Refuse what the C library cannot take, with one line that says why."""
    if t.device.type != "cpu":
        raise Error(f"bagpipe: {what} is on {t.device}: CUDA tensors are not supported yet "
                    "(the device backend has not landed); keep the model on the CPU")
    if t.dtype != torch.float32:
        raise Error(f"bagpipe: {what} is {t.dtype}; bagpipe communicates float32")
    if not t.is_contiguous():
        raise Error(f"bagpipe: {what} is not contiguous")


def buf(t, what="tensor"):
    """A writable buffer over t's memory (no copy) for bagpipe._C."""
    check(t, what)
    return t.detach().numpy()
