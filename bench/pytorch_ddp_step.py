"""PyTorch's own DistributedDataParallel, timed the way `distlab-bench ddp
--parts step` times DistLab's: the same model, data shape, bucket cap,
optimizer, thread count and timing. With --zero, PyTorch's ZeRO-1, timed
as `distlab-bench zero --parts step` times DistLab's Zero1: the same DDP
(which all-reduces the gradients) and a ZeroRedundancyOptimizer around the
optimizer (each rank steps the parameters it owns, whole, and broadcasts
them; parameters_as_bucket_view with --bucket-view).

  /usr/bin/python3 bench/pytorch_ddp_step.py --nproc 2
  /usr/bin/python3 bench/pytorch_ddp_step.py --nproc 2 --zero

The model: LAYERS x Linear(WIDTH, WIDTH) + ReLU, loss mean(y^2), SGD (or
--optimizer); each rank ROWS random rows. A round is ITERS steps (forward,
backward with DDP's gradient synchronization, optimizer step) after a
barrier; its time is the slowest rank's. Prints each round and
"pytorch_step_ms <median>".

gloo, CPU, processes spawned here with a file store (torchrun in Debian's
python3-torch 1.13 needs --redirects 1 --tee 1; spawning avoids it).
"""
import argparse
import datetime
import faulthandler
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

from ddp_step_args import add_step_args, optimizer_of


def make_model(width, layers):
    modules = []
    for _ in range(layers):
        modules += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*modules)


def make_optimizer(args, params):
    """--optimizer (lr 1e-6, as distlab-bench's), or ZeRO-1 around it with --zero."""
    optimizer_class, options = {
        "sgd": (torch.optim.SGD, {"lr": 1e-6}),
        "momentum": (torch.optim.SGD, {"lr": 1e-6, "momentum": 0.9}),
        "adam": (torch.optim.Adam, {"lr": 1e-6}),
    }[optimizer_of(args)]
    if not args.zero:
        return optimizer_class(params, **options)
    return ZeroRedundancyOptimizer(params, optimizer_class=optimizer_class,
                                   parameters_as_bucket_view=args.bucket_view, **options)


def worker(rank, args, store_path):
    # A worker that hangs prints where it is and exits, so that the run
    # fails with a traceback instead of waiting for the driver to kill it.
    faulthandler.dump_traceback_later(args.hang_s, exit=True)
    # Every collective gives up after a minute instead of waiting forever for a rank that is gone.
    dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank, world_size=args.nproc,
                            timeout=datetime.timedelta(seconds=60))
    # Ranks share the machine's cores, as in distlab-bench ddp.
    threads = args.threads if args.threads > 0 else max(1, (os.cpu_count() or 1) // args.nproc)
    torch.set_num_threads(threads)
    torch.manual_seed(1 + rank)
    model = make_model(args.width, args.layers)
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb, gradient_as_bucket_view=args.bucket_view)
    optimizer = make_optimizer(args, ddp.parameters())
    x = torch.randn(args.rows, args.width)

    def step():
        optimizer.zero_grad()
        ddp(x).pow(2).mean().backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    rounds = []
    for _ in range(args.rounds):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            step()
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        rounds.append(elapsed.item() / args.iters)
    if rank == 0:
        print("# pytorch %s, gloo, %d ranks, %d intra-op thread(s) each, %s%s" %
              (torch.__version__, args.nproc, threads, optimizer_of(args),
               " in a ZeroRedundancyOptimizer" if args.zero else ""))
        print("# rounds (ms/step): " + " ".join("%.1f" % (r * 1e3) for r in rounds))
        print("pytorch_step_ms %.3f" % (statistics.median(rounds) * 1e3), flush=True)
    dist.destroy_process_group()
    # Leave at once. Freeing DDP's reducer as the worker returns, after the
    # process group is gone, hung in C++ in a few of many runs (4 ranks,
    # gradient_as_bucket_view), with the results already printed.
    sys.stdout.flush()
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nproc", type=int, default=2)
    add_step_args(parser)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--hang-s", type=float, default=240,
                        help="a worker still running after this many seconds prints its stack and exits")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(args, os.path.join(tmp, "store")), nprocs=args.nproc)


if __name__ == "__main__":
    main()
