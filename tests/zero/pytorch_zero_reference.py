"""PyTorch's own ZeroRedundancyOptimizer, the reference ZeRO-1 is tested
against (tests/zero/pytorch_reference_test.cpp).

  pytorch_zero_reference.py check                     exits 0 when this python has torch,
                                                      gloo and ZeroRedundancyOptimizer
  pytorch_zero_reference.py train IN.pt OUT.pt RANKS STEPS
                                                      trains, saves every rank's parameters

IN.pt holds the model's initial parameters ("0.weight", ...) and the data
"x" (rows, 8) and "y" (rows, 4). RANKS gloo processes each wrap the same
model in DistributedDataParallel (which averages the gradients) and step it
with a ZeroRedundancyOptimizer, once with SGD (lr 0.1, momentum 0.9) and once
with Adam (lr 0.01): STEPS steps, step s on rank r taking the rows
((s * RANKS + r) * b, b more), b = rows / (STEPS * RANKS). OUT.pt holds
"sgd/<rank>/<name>" and "adam/<rank>/<name>" for every rank, and
"owner/<name>": the rank whose optimizer stepped that parameter.

ZeroRedundancyOptimizer gives each parameter whole to one rank (sorted
greedy, largest first); that rank steps it and broadcasts it to the others.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

OPTIMIZERS = {
    "sgd": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    "adam": (torch.optim.Adam, {"lr": 0.01}),
}


def model():
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4))


def train(rank, ranks, steps, blob, which):
    net = model()
    net.load_state_dict({k: v for k, v in blob.items() if k not in ("x", "y")})
    ddp = DistributedDataParallel(net)
    optimizer_class, options = OPTIMIZERS[which]
    zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=optimizer_class, **options)
    b = blob["x"].size(0) // (steps * ranks)
    for s in range(steps):
        first = (s * ranks + rank) * b
        zero.zero_grad()
        torch.nn.functional.mse_loss(ddp(blob["x"][first:first + b]), blob["y"][first:first + b]).backward()
        zero.step()
    # Which rank stepped each parameter: those its local optimizer holds.
    mine = {id(p) for group in zero.optim.param_groups for p in group["params"]}
    owned = torch.tensor([rank if id(p) in mine else -1 for p in net.parameters()])
    owners = [torch.empty_like(owned) for _ in range(ranks)]
    dist.all_gather(owners, owned)
    owner = torch.stack(owners).max(dim=0).values
    return {name: p.detach().clone() for name, p in net.named_parameters()}, \
        {name: owner[i] for i, (name, _) in enumerate(net.named_parameters())}


def worker(rank, ranks, steps, store_path, in_path, out_path):
    dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank, world_size=ranks)
    torch.set_num_threads(1)
    blob = torch.load(in_path)
    out = {}
    for which in OPTIMIZERS:
        params, owner = train(rank, ranks, steps, blob, which)
        # Every rank's parameters to rank 0, which saves them all.
        for name, p in params.items():
            gathered = [torch.empty_like(p) for _ in range(ranks)]
            dist.all_gather(gathered, p)
            for r, q in enumerate(gathered):
                out["%s/%d/%s" % (which, r, name)] = q
        for name, r in owner.items():
            out["owner/" + name] = r.reshape(1)
    if rank == 0:
        torch.save(out, out_path)
    dist.destroy_process_group()


def check():
    if not dist.is_available() or not dist.is_gloo_available():
        sys.exit("torch %s has no gloo backend" % torch.__version__)
    print("torch %s with gloo and ZeroRedundancyOptimizer" % torch.__version__)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "check":
        check()
    elif len(sys.argv) == 6 and sys.argv[1] == "train":
        in_path, out_path, ranks, steps = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(worker, args=(ranks, steps, os.path.join(tmp, "store"), in_path, out_path), nprocs=ranks)
    else:
        sys.exit("usage: pytorch_zero_reference.py check | train IN.pt OUT.pt RANKS STEPS")


if __name__ == "__main__":
    main()
