"""DistLab's DDP (or ZeRO-1, --zero) against PyTorch's, side by side in one run.

With --zero: DistLab's Zero1 against PyTorch's ZeroRedundancyOptimizer.

  /usr/bin/python3 bench/ddp_vs_pytorch.py --build build --nproc 2 4
  /usr/bin/python3 bench/ddp_vs_pytorch.py --build build --nproc 2 4 --zero

For each number of processes, --pairs times: DistLab
(distlab-run ... distlab-bench ddp --backend gloo --parts step, or --backend
auto with --backend auto; with --zero,
distlab-bench zero --parts step) and PyTorch (bench/pytorch_ddp_step.py,
with --zero its ZeroRedundancyOptimizer) with the same model, rows, bucket
cap, optimizer, threads and timing, the two taking turns (who goes first
alternates), so that other load on a shared machine slows both alike. Each
run reports the median of its rounds. The table shows, per side, the median
over its runs and their range; the ratio of the medians DistLab / PyTorch
(target: <= 0.9); and the median of the pairs' own ratios with their range.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys

from ddp_step_args import add_step_args, optimizer_of, step_args

HERE = os.path.dirname(os.path.abspath(__file__))


def run(command, pattern, timeout_s, tries=2):
    # A session of its own: on a timeout the whole tree goes (PyTorch's
    # spawned workers included), not only the process started here. A run
    # that fails or hangs is said on stderr, with its output, and run again
    # once.
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    try:
        output, _ = child.communicate(timeout=timeout_s)
        problem = "failed (exit %d)" % child.returncode
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        problem = "timed out after %d s" % timeout_s
    match = re.search(pattern + r" ([\d.]+)", output)
    if child.returncode == 0 and match is not None:
        return float(match.group(1)), output
    if tries > 1:
        print("# %s, running it again: %s\n%s" % (problem, " ".join(command), output), file=sys.stderr)
        return run(command, pattern, timeout_s, tries - 1)
    sys.exit("%s: %s\n%s" % (problem, " ".join(command), output))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build", help="DistLab's build folder")
    parser.add_argument("--nproc", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--pairs", type=int, default=3, help="DistLab/PyTorch runs per process count")
    add_step_args(parser)
    parser.add_argument("--backend", choices=["gloo", "auto"], default="gloo",
                        help="DistLab's backend: gloo (TCP, as PyTorch's) or auto (shared memory between the "
                             "processes of this host); PyTorch runs gloo either way")
    parser.add_argument("--target", type=float, default=0.9, help="the DistLab / PyTorch ratio to meet")
    parser.add_argument("--no-overlap", action="store_true",
                        help="DistLab's DDP all-reduces every bucket once the backward is done (PyTorch's always "
                             "overlaps)")
    parser.add_argument("--verbose", action="store_true", help="print every run's output")
    parser.add_argument("--run-timeout", type=float, default=300,
                        help="seconds one run may take before it is killed and run again once")
    args = parser.parse_args()

    common = step_args(args)
    params = args.layers * (args.width * args.width + args.width)
    if args.zero:
        what = "ZeRO-1: DistLab's Zero1 against PyTorch's ZeroRedundancyOptimizer%s" % (
            " (parameters_as_bucket_view, DDP's gradient_as_bucket_view)" if args.bucket_view else "")
    else:
        what = "DDP%s%s" % (", .grad a view of the bucket (both)" if args.bucket_view else "",
                             ", DistLab's buckets after the backward (--no-overlap)" if args.no_overlap else "")
    if args.zero and args.no_overlap:
        parser.error("--no-overlap is DDP's (not --zero)")
    print("# %s; %d x Linear(%d)+ReLU = %d parameters (%.1f MB of gradients), %d rows per rank, bucket cap %g MiB, "
          "%s, DistLab on %s, PyTorch on gloo, CPU; -n %d -w %d --rounds %d per run, %d pair%s" %
          (what, args.layers, args.width, params, params * 4 / 1e6, args.rows, args.bucket_mb, optimizer_of(args),
           "shared memory (--backend auto)" if args.backend == "auto" else "gloo",
           args.iters, args.warmup, args.rounds, args.pairs, "" if args.pairs == 1 else "s"))
    print("%-6s %10s %15s %10s %15s %7s %8s %13s  %s" %
          ("nproc", "distlab_ms", "distlab_range", "pytorch_ms", "pytorch_range", "ratio", "pair_med", "pair_range",
           "runs (distlab/pytorch ms)"))
    results = []
    for nproc in args.nproc:
        distlab = [os.path.join(args.build, "launcher", "distlab-run"), "--nproc-per-node", str(nproc),
                   "--master-port", "0", "--no-prefix", "--", os.path.join(args.build, "bench", "distlab-bench"),
                   "zero" if args.zero else "ddp", "--backend", args.backend, "--parts", "step"] + common + (
                       ["--no-overlap"] if args.no_overlap else [])
        pytorch = ["/usr/bin/python3", os.path.join(HERE, "pytorch_ddp_step.py"), "--nproc", str(nproc)] + common + (
            ["--zero"] if args.zero else [])
        ours, theirs = [], []
        for pair in range(args.pairs):
            order = [("distlab", distlab), ("pytorch", pytorch)]
            if pair % 2 == 1:
                order.reverse()
            for name, command in order:
                ms, output = run(command, name + "_step_ms", args.run_timeout)
                (ours if name == "distlab" else theirs).append(ms)
                if args.verbose:
                    print(output, end="")
        d, t = statistics.median(ours), statistics.median(theirs)
        pairs = [a / b for a, b in zip(ours, theirs)]
        results.append((nproc, d / t, statistics.median(pairs)))
        runs = " ".join("%.0f/%.0f" % (a, b) for a, b in zip(ours, theirs))
        print("%-6d %10.1f %15s %10.1f %15s %7.3f %8.3f %13s  %s" %
              (nproc, d, "%.0f-%.0f" % (min(ours), max(ours)), t, "%.0f-%.0f" % (min(theirs), max(theirs)), d / t,
               statistics.median(pairs), "%.3f-%.3f" % (min(pairs), max(pairs)), runs), flush=True)
    for nproc, ratio, pair_ratio in results:
        print("# %d processes: DistLab / PyTorch = %.3f (median of the pairs' ratios %.3f), target <= %g %s" %
              (nproc, ratio, pair_ratio, args.target, "met" if ratio <= args.target else "NOT met"))


if __name__ == "__main__":
    main()
