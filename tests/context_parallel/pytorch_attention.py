#!/usr/bin/env python3
"""PyTorch's own attention on the whole sequence, for the context-parallel tests.

    pytorch_attention.py DIR

Reads DIR/q.pt, k.pt, v.pt ((B, H, S, D) float32, torch.save pickles written
by DistLab) and dout.pt (the same shape: the gradient of a loss with respect
to the output) and writes DIR/reference.pt: {"causal": out, "full": out,
"lse_causal": lse, "lse_full": lse, "dq_causal": ..., "dk_causal": ...,
"dv_causal": ..., "dq_full": ..., "dk_full": ..., "dv_full": ...} where out
is PyTorch's scaled dot-product attention
(torch.nn.functional.scaled_dot_product_attention on torch 2.x, the kernel
nn.MultiheadAttention calls on 1.13), lse the log-sum-exp of the scores
(which the attention functions do not return), and dq, dk, dv PyTorch's
autograd of sum(out * dout) through the plain attention written out below,
softmax(q k^T / sqrt(D), masked) v.
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


def scores(q, k, causal):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return s


def lse(q, k, causal):
    return torch.logsumexp(scores(q, k, causal), -1)


def gradients(q, k, v, dout, causal):
    """dq, dk, dv of sum(out * dout), out the plain attention, by autograd."""
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    out = torch.softmax(scores(q, k, causal), -1) @ v
    out.backward(dout)
    return q.grad, k.grad, v.grad


def main():
    folder = sys.argv[1]
    q, k, v, dout = (torch.load(os.path.join(folder, name + ".pt")) for name in ("q", "k", "v", "dout"))
    out = {}
    for causal in (True, False):
        name = "causal" if causal else "full"
        out[name] = attention(q, k, v, causal)
        out["lse_" + name] = lse(q, k, causal)
        out["dq_" + name], out["dk_" + name], out["dv_" + name] = gradients(q, k, v, dout, causal)
    torch.save(out, os.path.join(folder, "reference.pt"))


if __name__ == "__main__":
    main()
