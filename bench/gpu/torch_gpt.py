#!/usr/bin/env python3
"""PyTorch's step time for gpt on the GPU: bagpipe's model (bench/torch/models.py) with
PyTorch's fused attention (scaled_dot_product_attention, causal), AdamW (fused),
gradient clipping to 1.0; fp32 with TF32 products, or bf16 autocast over fp32 weights
(PyTorch's usual mixed precision); eager or torch.compile. Prints one JSON object.

  torch_gpt.py --layers 12 --embd 768 --heads 12 --seq-len 1024 --batch 16 --dtype bf16 --compile
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
import models  # noqa: E402


def sdpa_forward(self, x):
    B, T, C = x.shape
    q, k, v = self.c_attn(x).split(C, dim=2)
    q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


def main():
    ap = argparse.ArgumentParser()
    for name, default in (("layers", 4), ("embd", 128), ("heads", 4), ("seq-len", 64), ("batch", 16),
                          ("steps", 20)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    models.CausalSelfAttention.forward = sdpa_forward
    dev = torch.device("cuda")
    model = models.GPT(n_layer=a.layers, n_embd=a.embd, n_head=a.heads, seq_len=a.seq_len).to(dev)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0,
                            fused=True)
    fwd = torch.compile(model) if a.compile else model
    g = torch.Generator(device=dev).manual_seed(5)
    data = torch.randint(0, 256, (a.batch * a.seq_len + 1,), device=dev, generator=g)
    x = data[:-1].view(a.batch, a.seq_len)
    y = data[1:].view(a.batch, a.seq_len)
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if a.dtype == "bf16" else torch.autocast(
        "cuda", enabled=False)

    def step():
        opt.zero_grad(set_to_none=True)
        with ctx:
            _, loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    t0 = time.perf_counter()
    for _ in range(3):  # warm-up, and compilation
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    ms = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps(dict(impl="torch-compile" if a.compile else "torch-eager", dtype=a.dtype,
                          ms=statistics.median(ms), params=params, loss_last=float(loss),
                          warmup_s=warm_s, torch=torch.__version__,
                          gpu=torch.cuda.get_device_name())))


if __name__ == "__main__":
    main()
