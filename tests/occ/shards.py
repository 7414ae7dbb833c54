#!/usr/bin/env python3
"""Read bagpipe checkpoint shards (safetensors) with the standard library only.

  shards.py same FILE_A FILE_B NAME
      exit 0 when tensor NAME holds the same bytes (and dtype and shape) in both
      files, 1 when not; prints the tensor's size and a digest of each.
  shards.py digest FILE NAME
      a digest of the tensor's bytes.
  shards.py floats FILE RANK [SKIP]
      two numbers: the floats of all tensors of the shard (what a full-precision
      reduction carries), and the floats PowerSGD of rank RANK carries (P and Q,
      (rows + cols) * min(RANK, rows, cols), for each 2-D tensor whose sides both
      exceed 1; the others whole). A tensor named SKIP is left out of both.
  shards.py numel FILE NAME
      the number of elements of tensor NAME.

safetensors: an 8-byte little-endian header length, a JSON header naming each
tensor's dtype, shape and [begin, end) data offsets, then the data.
"""
import hashlib
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        sys.exit(f"{path}: not a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    header.pop("__metadata__", None)
    return header, blob[8 + n :]


def tensor(path, name):
    header, data = read(path)
    if name not in header:
        sys.exit(f"{path}: no tensor {name}")
    t = header[name]
    begin, end = t["data_offsets"]
    return t["dtype"], tuple(t["shape"]), data[begin:end]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def main(argv):
    if len(argv) == 5 and argv[1] == "same":
        a, b = tensor(argv[2], argv[4]), tensor(argv[3], argv[4])
        for path, t in ((argv[2], a), (argv[3], b)):
            print(f"{path}: {argv[4]} {t[0]} {list(t[1])} "
                  f"sha256 {hashlib.sha256(t[2]).hexdigest()[:16]}")
        return 0 if a == b else 1
    if len(argv) == 4 and argv[1] == "digest":
        print(hashlib.sha256(tensor(argv[2], argv[3])[2]).hexdigest())
        return 0
    if len(argv) == 4 and argv[1] == "numel":
        print(numel(tensor(argv[2], argv[3])[1]))
        return 0
    if len(argv) in (4, 5) and argv[1] == "floats":
        header, _ = read(argv[2])
        rank, skip = int(argv[3]), argv[4] if len(argv) == 5 else None
        full = low = 0
        for name, t in header.items():
            if name == skip:
                continue
            shape = t["shape"]
            full += numel(shape)
            if len(shape) == 2 and shape[0] > 1 and shape[1] > 1:
                low += (shape[0] + shape[1]) * min(rank, shape[0], shape[1])
            else:
                low += numel(shape)
        print(full, low)
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
