"""The PyTorch reference for tests/models: the seeds' models in Python.

Run by pytorch_reference_test.cpp with /usr/bin/python3 (python3-torch):

    reference_models.py gpt --dim 32 --n-layers 2 --n-heads 4 --vocab-size 50 DIR
    reference_models.py lm --ntokens 50 --emsize 32 --nhid 64 --nlayers 2 --nhead 2 [--causal] DIR
    reference_models.py gpt_layer --dim 32 --n-heads 4 DIR

DIR holds state.pt (a state_dict that DistLab wrote with torch::pickle_save),
input.pt and targets.pt. The script builds the model, loads the state dict
with strict=True (so every name and shape must match DistLab's), runs the
input in eval mode (dropout off), takes the cross-entropy against the
targets, backpropagates, and writes DIR/reference.pt: {"output": logits,
"loss": loss, "grads": {name: gradient}, "trainable": number of trainable
parameters, "pe_max_diff": |own positional table - DistLab's| (lm only)}.

gpt_layer is one layer of the pipelining tutorial's model, nn.TransformerDecoderLayer(dim,
n_heads) called as layer(h, h) (tests/tensor_parallel holds the
tensor-parallel layer against it): input.pt is h (A, B, dim), targets.pt a
probe of the same shape, the loss sum(layer(h, h) * probe), and "grads"
holds the input's gradient as "input" besides every parameter's.
"""
import argparse
import math
import os

import torch
import torch.nn as nn
from dataclasses import dataclass
from torch.nn import TransformerEncoderLayer


# ------------------------------------------------- the pipelining tutorial
# The GPT-style model of the pipelining tutorial, as written there.

@dataclass
class ModelArgs:
    dim: int = 512
    n_layers: int = 8
    n_heads: int = 8
    vocab_size: int = 10000


class Transformer(nn.Module):
    def __init__(self, model_args: ModelArgs):
        super().__init__()

        self.tok_embeddings = nn.Embedding(model_args.vocab_size, model_args.dim)

        # Using a ModuleDict lets us delete layers witout affecting names,
        # ensuring checkpoints will correctly save and load.
        self.layers = torch.nn.ModuleDict()
        for layer_id in range(model_args.n_layers):
            self.layers[str(layer_id)] = nn.TransformerDecoderLayer(model_args.dim, model_args.n_heads)

        self.norm = nn.LayerNorm(model_args.dim)
        self.output = nn.Linear(model_args.dim, model_args.vocab_size)

    def forward(self, tokens: torch.Tensor):
        # Handling layers being 'None' at runtime enables easy pipeline splitting
        h = self.tok_embeddings(tokens) if self.tok_embeddings else tokens

        for layer in self.layers.values():
            h = layer(h, h)

        h = self.norm(h) if self.norm else h
        output = self.output(h).float() if self.output else h
        return output


# ------------------------------------------------- the DDP + Pipe tutorial
# The DDP + Pipe tutorial's model. PositionalEncoding is the tutorial's. Its
# Encoder (embedding + positions) and Decoder (linear) sit in an
# nn.Sequential whose names depend on the split ("0.0.encoder.weight"); here
# the same modules live in one module with flat names that do not:
#   encoder.weight, pos_encoder.pe, layers.<i>.*, decoder.weight, decoder.bias

class PositionalEncoding(nn.Module):

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)

        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.pe = nn.Parameter(pe, requires_grad=False)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerLm(nn.Module):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.2, causal=False):
        super().__init__()
        # The tutorial's Encoder(ntoken, ninp, dropout).
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        # The tutorial's loop: TransformerEncoderLayer(emsize, nhead, nhid, dropout).
        self.layers = nn.ModuleDict()
        for i in range(nlayers):
            self.layers[str(i)] = TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        # The tutorial's Decoder(ntoken, ninp).
        self.decoder = nn.Linear(ninp, ntoken)
        self.causal = causal
        initrange = 0.1
        self.encoder.weight.data.uniform_(-initrange, initrange)
        self.decoder.bias.data.zero_()
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, src):
        # src (N, S), batch first as the tutorial's Pipe input; Encoder.forward:
        src = src.t()
        src = self.encoder(src) * math.sqrt(self.ninp)
        h = self.pos_encoder(src)
        # The tutorial's nn.Sequential calls each layer with no mask.
        mask = None
        if self.causal:  # the single-GPU tutorial's generate_square_subsequent_mask
            s = h.size(0)
            mask = torch.triu(torch.ones(s, s) * float('-inf'), diagonal=1)
        for layer in self.layers.values():
            h = layer(h, src_mask=mask)
        # Decoder.forward: batch first again, (N, S, ntoken).
        return self.decoder(h).permute(1, 0, 2)


def gpt_layer(args, state):
    layer = nn.TransformerDecoderLayer(args.dim, args.n_heads)  # as the pipelining tutorial's Transformer builds each
    layer.load_state_dict(state, strict=True)
    layer.eval()
    h = torch.load(os.path.join(args.dir, 'input.pt')).requires_grad_()
    probe = torch.load(os.path.join(args.dir, 'targets.pt'))
    output = layer(h, h)
    loss = (output * probe).sum()
    loss.backward()
    grads = {name: p.grad for name, p in layer.named_parameters()}
    grads['input'] = h.grad
    result = {'output': output.detach().contiguous(), 'loss': loss.detach(), 'grads': grads,
              'trainable': torch.tensor(sum(p.numel() for p in layer.parameters()))}
    torch.save(result, os.path.join(args.dir, 'reference.pt'))
    print('reference: gpt layer output', tuple(output.shape), 'loss %.6f' % loss.item())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('model', choices=['gpt', 'lm', 'gpt_layer'])
    parser.add_argument('dir')
    for name in ['dim', 'n-layers', 'n-heads', 'vocab-size', 'ntokens', 'emsize', 'nhid', 'nlayers', 'nhead']:
        parser.add_argument('--' + name, type=int)
    parser.add_argument('--causal', action='store_true')
    args = parser.parse_args()

    torch.manual_seed(0)
    state = torch.load(os.path.join(args.dir, 'state.pt'))
    if args.model == 'gpt_layer':
        return gpt_layer(args, state)
    tokens = torch.load(os.path.join(args.dir, 'input.pt'))
    targets = torch.load(os.path.join(args.dir, 'targets.pt'))
    result = {}
    if args.model == 'gpt':
        model = Transformer(ModelArgs(args.dim, args.n_layers, args.n_heads, args.vocab_size))
    else:
        model = TransformerLm(args.ntokens, args.emsize, args.nhead, args.nhid, args.nlayers, causal=args.causal)
        result['pe_max_diff'] = (model.pos_encoder.pe.detach() - state['pos_encoder.pe']).abs().max()
    model.load_state_dict(state, strict=True)
    model.eval()
    if args.model == 'gpt':
        output = model(tokens)                           # tokens (A, B) -> (A, B, vocab)
    else:
        output = model(tokens.t()).permute(1, 0, 2)      # (S, N) -> seed's (N, S) -> (S, N, ntokens)
    loss = nn.functional.cross_entropy(output.reshape(-1, output.size(-1)), targets.reshape(-1))
    loss.backward()
    result['output'] = output.detach().contiguous()
    result['loss'] = loss.detach()
    result['grads'] = {name: p.grad for name, p in model.named_parameters() if p.requires_grad}
    result['trainable'] = torch.tensor(sum(p.numel() for p in model.parameters() if p.requires_grad))
    torch.save(result, os.path.join(args.dir, 'reference.pt'))
    print('reference: output', tuple(output.shape), 'loss %.6f' % loss.item(), 'trainable parameters', int(result['trainable']))


if __name__ == '__main__':
    main()
