"""The step options that bench/pytorch_ddp_step.py and bench/ddp_vs_pytorch.py
share with `distlab-bench ddp --parts step` and `distlab-bench zero --parts
step` (bench/step_bench.hpp on the C++ side): one definition, so that both
sides of the comparison always get the same model and timing."""


def add_step_args(parser):
    parser.add_argument("--width", type=int, default=2048, help="features of each Linear layer")
    parser.add_argument("--layers", type=int, default=6, help="Linear layers")
    parser.add_argument("--rows", type=int, default=16, help="rows per rank per step")
    parser.add_argument("--iters", "-n", type=int, default=3, help="timed steps per round")
    parser.add_argument("--warmup", "-w", type=int, default=2, help="untimed steps first")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median is reported")
    parser.add_argument("--bucket-mb", type=float, default=25, help="bucket cap, MiB")
    parser.add_argument("--bucket-view", action="store_true",
                        help=".grad shares the buckets' memory (gradient_as_bucket_view)")
    parser.add_argument("--optimizer", choices=["sgd", "momentum", "adam"], default=None,
                        help="sgd (no state), momentum (SGD, 0.9) or adam, lr 1e-6; default sgd, with --zero adam")
    parser.add_argument("--zero", action="store_true",
                        help="ZeRO-1: DistLab's Zero1 against PyTorch's ZeroRedundancyOptimizer (instead of DDP)")


def optimizer_of(args):
    """--optimizer, or its default: adam for ZeRO (state to shard), sgd for DDP."""
    return args.optimizer or ("adam" if args.zero else "sgd")


def step_args(args):
    """The same options as a command line, for distlab-bench or pytorch_ddp_step.py (--zero itself not included:
    it picks the subcommand)."""
    out = ["--width", str(args.width), "--layers", str(args.layers), "--rows", str(args.rows), "-n", str(args.iters),
           "-w", str(args.warmup), "--rounds", str(args.rounds), "--bucket-mb", str(args.bucket_mb),
           "--optimizer", optimizer_of(args)]
    return out + (["--bucket-view"] if args.bucket_view else [])
