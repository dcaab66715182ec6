"""The same-host transport against gloo's TCP, side by side in one run.

  /usr/bin/python3 bench/wire.py --build build
  /usr/bin/python3 bench/wire.py --build build --pairs 1 --p2p-max 4M --allreduce-max 4M --nproc 2

Point to point (distlab-bench p2p: rank 0 and rank 1 of 2 processes play
ping-pong; one-way time = round trip / 2): gloo's TCP, shared memory in two
copies through the ring (DISTLAB_SHM_SINGLE_COPY=0) and in one copy
(process_vm_readv), beside memcpy measured by the same runs; 8 bytes for the
latency. All-reduce (distlab-bench collective) on each --nproc: gloo's own,
the backend's native one on --backend auto through the shared arena
(DISTLAB_SHM_SINGLE_COPY=0) and in one copy (the default from 4 MiB), and
DistLab's ring over the shared-memory rings. Each variant runs --pairs times, the variants taking
turns (who goes first rotates), so that other load slows them alike. Each
cell is the median over the runs and, in brackets, their range.
"""
import argparse
import os
import statistics
import subprocess
import sys

P2P = [("gloo TCP", "gloo", {}), ("shm, two copies", "auto", {"DISTLAB_SHM_SINGLE_COPY": "0"}),
       ("shm, one copy", "auto", {})]
ALL_REDUCE = [("gloo", "gloo", "native", {}), ("shm arena", "auto", "native", {"DISTLAB_SHM_SINGLE_COPY": "0"}),
              ("shm one copy", "auto", "native", {}), ("ring over shm", "auto", "ring", {})]


def run(build, nproc, args, env_extra, timeout_s=900):
    command = [os.path.join(build, "launcher", "distlab-run"), "--nproc-per-node", str(nproc), "--master-port", "0",
               "--no-prefix", "--", os.path.join(build, "bench", "distlab-bench")] + args
    env = dict(os.environ, DISTLAB_QUIET="1", **env_extra)
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          timeout=timeout_s)
    if done.returncode != 0:
        sys.exit("wire.py: %s failed (exit %d):\n%s" % (" ".join(command), done.returncode, done.stdout))
    return [line.split() for line in done.stdout.splitlines() if line.strip() and not line.startswith("#")]


def cell(values):
    if not values:
        return "-"
    return "%.2f [%.2f-%.2f]" % (statistics.median(values), min(values), max(values))


def rotated(items, k):
    k %= len(items)
    return items[k:] + items[:k]


def p2p(o):
    bw = {}      # (variant, size) -> GB/s per run
    copy = {}    # size -> memcpy GB/s per run
    lat = {}     # variant -> one-way microseconds for 8 bytes
    sizes = []
    for pair in range(o.pairs):
        for name, backend, env in rotated(P2P, pair):
            rows = run(o.build, 2, ["p2p", "--backend", backend, "-b", "8", "-e", "8"], env)
            lat.setdefault(name, []).append(float(rows[0][2]))
            rows = run(o.build, 2, ["p2p", "--backend", backend, "-b", o.p2p_min, "-e", o.p2p_max, "-f", "4"], env)
            for size, _iters, _us, gbps, memcpy, _ratio, wrong in rows:
                if wrong != "0":
                    sys.exit("wire.py: %s at %s: %s bytes wrong" % (name, size, wrong))
                if size not in sizes:
                    sizes.append(size)
                bw.setdefault((name, size), []).append(float(gbps))
                copy.setdefault(size, []).append(float(memcpy))
    print("## Point to point, 2 processes: one-way bandwidth (GB/s), median [min-max] of %d runs each" % o.pairs)
    print()
    head = ["size"] + [n for n, _, _ in P2P] + ["memcpy", "two copies / memcpy", "one copy / memcpy",
                                                "two copies / gloo", "one copy / gloo"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    med = lambda v: statistics.median(v)
    for size in sizes:
        g, two, one = (med(bw[(n, size)]) for n, _, _ in P2P)
        m = med(copy[size])
        print("| " + " | ".join([size] + [cell(bw[(n, size)]) for n, _, _ in P2P] + [
            cell(copy[size]), "%.2f" % (two / m), "%.2f" % (one / m), "%.2f" % (two / g), "%.2f" % (one / g)]) + " |")
    print()
    print("Latency of an 8-byte message (one way, microseconds): " + ", ".join(
        "%s %s" % (n, cell(lat[n])) for n, _, _ in P2P) + "; TCP / shared memory: %.1fx" % (
            med(lat["gloo TCP"]) / med(lat["shm, one copy"])))
    print()


def all_reduce(o):
    for nproc in o.nproc:
        bus = {}
        sizes = []
        for pair in range(o.pairs):
            for name, backend, algorithm, env in rotated(ALL_REDUCE, pair):
                rows = run(o.build, nproc, ["collective", "--backend", backend, "--algorithm", algorithm, "-b",
                                            o.allreduce_min, "-e", o.allreduce_max, "-f", "4", "-n", str(o.iters),
                                            "-w", "1"], env)
                for row in rows:
                    size, wrong = row[0], row[-1]
                    if wrong not in ("0", "N/A"):
                        sys.exit("wire.py: all-reduce %s at %s: %s elements wrong" % (name, size, wrong))
                    if size not in sizes:
                        sizes.append(size)
                    bus.setdefault((name, size), []).append(float(row[-2]))
        print("## All-reduce, %d processes: bus bandwidth (GB/s), median [min-max] of %d runs each" % (nproc, o.pairs))
        print()
        names = [n for n, _, _, _ in ALL_REDUCE]
        head = ["bytes"] + names + [n + " / gloo" for n in names[1:]]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for size in sizes:
            g = statistics.median(bus[("gloo", size)])
            print("| " + " | ".join([size] + [cell(bus[(n, size)]) for n in names] +
                                    ["%.2f" % (statistics.median(bus[(n, size)]) / g) for n in names[1:]]) + " |")
        print()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="the build folder (distlab-run, distlab-bench)")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each variant")
    parser.add_argument("--p2p-min", default="64K")
    parser.add_argument("--p2p-max", default="256M")
    parser.add_argument("--allreduce-min", default="1M")
    parser.add_argument("--allreduce-max", default="256M")
    parser.add_argument("--nproc", type=int, nargs="+", default=[2, 4], help="processes for the all-reduce")
    parser.add_argument("-n", "--iters", type=int, default=5, help="timed all-reduce calls per size")
    parser.add_argument("--skip", choices=["p2p", "all_reduce"], help="leave one part out")
    o = parser.parse_args()
    if o.skip != "p2p":
        p2p(o)
    if o.skip != "all_reduce":
        all_reduce(o)


if __name__ == "__main__":
    main()
