#!/usr/bin/python3
"""PyTorch peers of bagpipe's `gpt` and `mlp` (docs/ARCHITECTURE.md#models).

Parameter names and layouts equal bagpipe's safetensors tensor names, so a bagpipe
checkpoint loads with load_state_dict. Initialization follows the same rules as
bagpipe (not the same random numbers: the generators differ).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)  # q, k, v in this order along the output
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        # [B, T, C] -> [B, nh, T, hs]
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLPBlock(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = MLPBlock(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-2 over bytes: learned positions, pre-LN blocks, LM head tied to wte."""

    def __init__(self, n_layer=4, n_embd=128, n_head=4, seq_len=64, vocab=256):
        super().__init__()
        self.cfg = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head, seq_len=seq_len, vocab=vocab)
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(seq_len, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)
        self.init_weights()

    def init_weights(self):
        L = self.cfg["n_layer"]
        for name, p in self.named_parameters():
            if name.startswith("ln_f") or ".ln_" in name:
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            elif name.endswith("c_proj.weight"):
                # residual projections (attn and mlp) are scaled down by depth, as in GPT-2
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head, no bias
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))
        return logits, loss

    def activation_floats(self, B, T=None):
        """Floats a straightforward implementation keeps for backward at batch B.

        The same count as bagpipe's layer-by-layer buffers would need (llm.c's list):
        per block ln_1 out, mean, rstd, qkv, pre-softmax and softmax scores, attention
        output, attn proj, residual, ln_2 out, mean, rstd, fc, gelu, mlp proj, residual;
        plus embedding sum, ln_f out/mean/rstd, logits, probabilities and losses.
        """
        c = self.cfg
        T = T or c["seq_len"]
        C, L, nh, V = c["n_embd"], c["n_layer"], c["n_head"], c["vocab"]
        BT = B * T
        per_block = BT * C * 7 + BT * 4 + BT * 3 * C + 2 * B * nh * T * T + BT * 4 * C * 2
        return BT * C + L * per_block + BT * C + 2 * BT + 2 * BT * V + BT


class MLP(nn.Module):
    """784-H-H-10 ReLU classifier; PyTorch's default nn.Linear initialization."""

    def __init__(self, in_dim=784, hidden=256, n_class=10):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc_out = nn.Linear(hidden, n_class)

    def forward(self, x, targets=None):
        logits = self.fc_out(F.relu(self.fc2(F.relu(self.fc1(x)))))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits, targets)

    def activation_floats(self, B, T=None):
        """Input, pre- and post-ReLU of each hidden layer, logits, probabilities."""
        H = self.fc1.out_features
        return B * (self.fc1.in_features + 4 * H + 2 * self.fc_out.out_features)


def build(name, **kw):
    if name == "gpt":
        return GPT(**kw)
    if name == "mlp":
        return MLP(**kw)
    raise ValueError(f"unknown model {name!r} (gpt or mlp)")
