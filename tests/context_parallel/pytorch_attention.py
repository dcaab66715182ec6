#!/usr/bin/env python3
"""PyTorch's own attention on the whole sequence, for the context-parallel tests.

    pytorch_attention.py DIR

Reads DIR/q.pt, k.pt, v.pt ((B, H, S, D) float32, torch.save pickles written
by DistLab) and writes DIR/reference.pt: {"causal": out, "full": out,
"lse_causal": lse, "lse_full": lse} where out is PyTorch's scaled dot-product
attention (torch.nn.functional.scaled_dot_product_attention on torch 2.x,
the kernel nn.MultiheadAttention calls on 1.13) and lse the log-sum-exp of
the scores (which the attention functions do not return).
"""
import math
import os
import sys

import torch
import torch.nn.functional as F


def attention(q, k, v, causal):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, causal)[0]


def lse(q, k, causal):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = q.shape[-2]
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    return torch.logsumexp(scores, -1)


def main():
    folder = sys.argv[1]
    q, k, v = (torch.load(os.path.join(folder, name + ".pt")) for name in ("q", "k", "v"))
    out = {}
    for causal in (True, False):
        name = "causal" if causal else "full"
        out[name] = attention(q, k, v, causal)
        out["lse_" + name] = lse(q, k, causal)
    torch.save(out, os.path.join(folder, "reference.pt"))


if __name__ == "__main__":
    main()
