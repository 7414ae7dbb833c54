#!/usr/bin/python3
"""Data protocol shared with bagpipe.

Text: the bytes of `bible "Gen1:1-Rev22:21"` (or any file), split at floor(0.9 n):
train first, validation after. Training windows are random; validation windows
are fixed and evenly spaced, so both systems evaluate on exactly the same bytes.
Fashion-MNIST: IDX .gz files, pixels scaled to [0, 1].
"""
import gzip
import os
import struct
import subprocess

import numpy as np
import torch

KJV_RANGE = "Gen1:1-Rev22:21"
FASHION_DIR = "/usr/share/datasets/fashion-mnist"


def load_text(path=None):
    """Bytes of `path`, or of the whole KJV Bible printed by the `bible` command."""
    if path and path != "kjv":
        with open(path, "rb") as f:
            raw = f.read()
    else:
        raw = subprocess.run(["bible", KJV_RANGE], check=True, stdout=subprocess.PIPE).stdout
    if not raw:
        raise ValueError(f"{path or 'kjv'}: empty text")
    return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).astype(np.int64))


def split_text(data):
    """Train = first floor(0.9 n) bytes, validation = the rest.

    Integer arithmetic (9n // 10) equals floor(0.9 n) exactly, with no float rounding."""
    n_train = len(data) * 9 // 10
    return data[:n_train], data[n_train:]


def train_batch(train, B, T, gen):
    """B random windows of T+1 bytes, start uniform in [0, n_train - T - 1]."""
    starts = torch.randint(0, len(train) - T, (B,), generator=gen)
    win = torch.stack([train[s : s + T + 1] for s in starts.tolist()])
    return win[:, :-1], win[:, 1:]


def val_starts(n_val, T, N):
    """start_i = floor(i (n_val - T - 1) / (N - 1)), i = 0..N-1 (exact integers)."""
    if N == 1:
        return [0]
    span = n_val - T - 1
    return [i * span // (N - 1) for i in range(N)]


def val_batches(val, B, T, eval_batches=20):
    """The fixed validation set as eval_batches batches of B windows, in order."""
    starts = val_starts(len(val), T, eval_batches * B)
    win = torch.stack([val[s : s + T + 1] for s in starts])
    for j in range(eval_batches):
        w = win[j * B : (j + 1) * B]
        yield w[:, :-1], w[:, 1:]


def _read_idx(path, want_magic, want_dims):
    """Read one IDX .gz file, validating magic, dimensions and length."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 + 4 * want_dims:
        raise ValueError(f"{path}: truncated header")
    magic = struct.unpack(">I", raw[:4])[0]
    if magic != want_magic:
        raise ValueError(f"{path}: bad magic {magic:#x}, want {want_magic:#x}")
    dims = struct.unpack(f">{want_dims}I", raw[4 : 4 + 4 * want_dims])
    body = raw[4 + 4 * want_dims :]
    if len(body) != int(np.prod(dims)):
        raise ValueError(f"{path}: {len(body)} data bytes, header says {int(np.prod(dims))}")
    return np.frombuffer(body, dtype=np.uint8).reshape(dims)


def load_fashion(split="train", root=FASHION_DIR):
    """(images uint8 [N, 784], labels int64 [N]); scale images with to_float()."""
    prefix = "train" if split == "train" else "t10k"
    imgs = _read_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"), 0x803, 3)
    labels = _read_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"), 0x801, 1)
    if len(imgs) != len(labels):
        raise ValueError(f"{split}: {len(imgs)} images but {len(labels)} labels")
    # kept as bytes (4x smaller than floats); scaled per batch
    return torch.from_numpy(imgs.reshape(len(imgs), -1).copy()), torch.from_numpy(labels.astype(np.int64))


def to_float(images_u8):
    return images_u8.float() / 255.0
