"""PyTorch's own DistributedSampler and DistributedDataParallel, the
reference the DistLab tests compare against.

  pytorch_reference.py sampler                 reads cases on stdin, prints indices
  pytorch_reference.py ddp IN.pt OUT.pt RANKS   trains, saves rank 0's parameters
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BATCH = 6
EPOCHS = 2
SEED = 17


def sampler_cases():
    # each line: n replicas rank shuffle seed drop_last epoch
    for line in sys.stdin:
        n, replicas, rank, shuffle, seed, drop_last, epoch = (int(v) for v in line.split())
        s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=bool(shuffle), seed=seed,
                               drop_last=bool(drop_last))
        s.set_epoch(epoch)
        print(" ".join(str(i) for i in s))


def model():
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4))


def ddp_worker(rank, ranks, store_path, in_path, out_path):
    dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank, world_size=ranks)
    torch.set_num_threads(1)
    blob = torch.load(in_path)
    net = model()
    # Rank 0 starts from the given weights; the others from their own random
    # ones, which DDP's constructor replaces with rank 0's.
    if rank == 0:
        net.load_state_dict({k: v for k, v in blob.items() if k not in ("x", "y")})
    ddp = DistributedDataParallel(net)
    data = TensorDataset(blob["x"], blob["y"])
    sampler = DistributedSampler(data, num_replicas=ranks, rank=rank, shuffle=True, seed=SEED)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=0.01)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            optimizer.step()
    if rank == 0:
        torch.save({k: v.detach().clone() for k, v in net.state_dict().items()}, out_path)
    dist.destroy_process_group()


def main():
    if sys.argv[1] == "sampler":
        sampler_cases()
    elif sys.argv[1] == "ddp":
        in_path, out_path, ranks = sys.argv[2], sys.argv[3], int(sys.argv[4])
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(ddp_worker, args=(ranks, os.path.join(tmp, "store"), in_path, out_path), nprocs=ranks)
    else:
        raise SystemExit("usage: pytorch_reference.py sampler | ddp IN OUT RANKS")


if __name__ == "__main__":
    main()
