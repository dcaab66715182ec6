#!/usr/bin/env python3
"""Measures the ratios recorded in docs/benchmarks-ratios.md again and compares them with the record.

    scripts/bench_ratios.py --build build                     # every ratio, 3 runs each
    scripts/bench_ratios.py --build build --only collective   # one benchmark's ratios
    scripts/bench_ratios.py --build build --repeats 5         # more runs, steadier medians

The record is the table of docs/benchmarks-ratios.md: one row per ratio,
with its key, which way is better, the recorded value and the margin it may
lose. Each benchmark runs --repeats times (the DDP driver and the trace
reader run as that many pairs); a ratio's measured value is the median of
its runs, printed beside the record with the runs' range. A ratio worse than
its record by more than its margin fails the comparison, exit status 1:
  better = higher: measured < recorded x (1 - margin)
  better = lower:  measured > recorded x (1 + margin)
It is a benchmark, not a test: minutes long, and as noisy as the machine.
"""
import argparse
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile

SOURCE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
RECORD = os.path.join(SOURCE, "docs", "benchmarks-ratios.md")


# ---------------------------------------------------------------- the record

class Row:
    def __init__(self, key, better, recorded, margin):
        self.key, self.better, self.recorded, self.margin = key, better, recorded, margin


def parse_record(text):
    """The rows of the record's table: a header with key, better, recorded and
    margin among its cells, then one row per ratio whose key is in backticks."""
    rows, columns = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|"):
            columns = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if columns is None:
            if {"key", "better", "recorded", "margin"} <= set(cells):
                columns = {name: i for i, name in enumerate(cells)}
            continue
        key = re.fullmatch(r"`([\w.]+)`", cells[columns["key"]])
        if key is None:
            continue  # the header's rule
        try:
            better = cells[columns["better"]]
            if better not in ("higher", "lower"):
                raise ValueError("better is '%s', not higher or lower" % better)
            rows.append(Row(key.group(1), better, float(cells[columns["recorded"]]), float(cells[columns["margin"]])))
        except (ValueError, IndexError) as e:
            raise ValueError("line %d of the record: %s: %s" % (number, line.strip(), e))
    keys = [r.key for r in rows]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError("the record lists %s twice" % ", ".join(twice))
    return rows


def worse_than_record(row, measured):
    """Whether `measured` lost more than the row's margin against its record."""
    if row.better == "higher":
        return measured < row.recorded * (1 - row.margin)
    return measured > row.recorded * (1 + row.margin)


def compare(rows, measured):
    """The report's lines and how many ratios lost more than their margin.
    `measured`: key -> list of values, one per run (a key not measured is
    said, not failed)."""
    lines = ["%-42s %6s %8s %8s %7s %13s  %s" %
             ("ratio", "better", "recorded", "measured", "margin", "runs' range", "verdict")]
    failed = 0
    for row in rows:
        runs = measured.get(row.key)
        if not runs:
            lines.append("%-42s %6s %8.2f %8s %6.0f%% %13s  %s" %
                         (row.key, row.better, row.recorded, "-", 100 * row.margin, "-", "not measured"))
            continue
        value = statistics.median(runs)
        bad = worse_than_record(row, value)
        failed += bad
        lines.append("%-42s %6s %8.2f %8.2f %6.0f%% %13s  %s" %
                     (row.key, row.better, row.recorded, value, 100 * row.margin,
                      "%.2f-%.2f" % (min(runs), max(runs)), "WORSE" if bad else "ok"))
    return lines, failed


# ------------------------------------------------- what the benchmarks print

def parse_collective(output):
    """ratio key -> value from distlab-bench collective's summary:
        # busbw against native (gloo), per size:
        #       size  reduce_broadcast              ring  halving_doubling
                 16M              1.01              1.03              0.97
    (a launcher's "[rank 0] " before each line is allowed)."""
    found, algorithms, collective = {}, None, None
    for line in output.splitlines():
        line = re.sub(r"^\[rank \d+\] ", "", line)
        heading = re.match(r"# distlab-bench collective: (\w+),", line)
        if heading:
            collective = heading.group(1)
        if re.match(r"#\s+size\s+[a-z_]", line) and "count" not in line:
            algorithms = line.lstrip("#").split()[1:]
            continue
        if algorithms is None:
            continue
        cells = line.split()
        if len(cells) != len(algorithms) + 1 or not re.fullmatch(r"\d+[KMG]?", cells[0]):
            algorithms = None if line.startswith("# #wrong") else algorithms
            continue
        for algorithm, value in zip(algorithms, cells[1:]):
            found["collective.%s.%s.%s" % (collective, algorithm, cells[0])] = float(value)
    return found


def parse_ddp(output):
    """ratio key -> each pair's DistLab / PyTorch step time, per process count,
    from bench/ddp_vs_pytorch.py's rows, whose last column lists the pairs:
        nproc  distlab_ms ... pair_range  runs (distlab/pytorch ms)
        2          2534.3 ... 0.873-1.102  2442/2797 2534/2492 2516/2283"""
    found = {}
    for m in re.finditer(r"^(\d+)\s+[\d.]+\s+\S+\s+[\d.]+\s+\S+\s+[\d.]+\s+[\d.]+\s+\S+\s+((?:[\d.]+/[\d.]+\s*)+)$",
                         output, re.M):
        pairs = [p.split("/") for p in m.group(2).split()]
        found["ddp.distlab_over_pytorch.%sp" % m.group(1)] = [float(a) / float(b) for a, b in pairs]
    return found


def parse_trace_load(output):
    """(ms, peak RSS MB) from one trace_load_bench run:
        viewer 200000 events in 512 ms, peak RSS 40 MB (...)"""
    m = re.search(r"^\w+\s+\d+ events in (\d+) ms, peak RSS (\d+) MB", output, re.M)
    if m is None:
        raise ValueError("no timing line in trace_load_bench's output:\n" + output)
    return float(m.group(1)), float(m.group(2))


# ------------------------------------------------------------ running them

def run(command, timeout_s, env=None):
    """The command's output; a failure or a timeout ends the comparison with it."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, env=env)
    try:
        output, _ = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        sys.exit("timed out after %d s: %s\n%s" % (timeout_s, " ".join(command), output))
    if child.returncode != 0:
        sys.exit("failed (exit %d): %s\n%s" % (child.returncode, " ".join(command), output))
    return output


def program(args, *path):
    """A built program's path; one not built ends the comparison, saying how
    to build it (--list only names it)."""
    found = os.path.join(args.build, *path)
    if not args.list and not os.path.exists(found):
        sys.exit("%s is not built (cmake --build %s --target %s)" % (found, args.build, path[-1]))
    return found


# Each benchmark: the commands it runs (for --list and the report) and how
# its runs become ratios, key -> one value per run.

def collective_command(args):
    return [program(args, "launcher", "distlab-run"), "--nproc-per-node", "4", "--master-port", "0", "--no-prefix",
            "--", program(args, "bench", "distlab-bench"), "collective", "--backend", "gloo", "--algorithm", "all",
            "-b", "16M", "-e", "64M", "-n", "8", "-w", "2", "--rounds", "4"]


def measure_collective(args):
    runs = {}
    for _ in range(args.repeats):
        for key, value in parse_collective(run(collective_command(args), args.run_timeout)).items():
            runs.setdefault(key, []).append(value)
    return runs


def ddp_command(args):
    return ["/usr/bin/python3", os.path.join(SOURCE, "bench", "ddp_vs_pytorch.py"), "--build", args.build,
            "--nproc", "2", "--pairs", str(args.repeats), "-n", "2", "-w", "1", "--rounds", "3"]


def measure_ddp(args):
    return parse_ddp(run(ddp_command(args), args.run_timeout * args.repeats))


TRACE_EVENTS = 200000


def trace_commands(args, trace):
    load = program(args, "bench", "trace_load_bench")
    return ([program(args, "viz", "distlab-viz-make-trace"), "--out", trace, "--events", str(TRACE_EVENTS)],
            [load, trace, "--mode", "viewer"], [load, trace, "--mode", "dom"])


def measure_trace(args):
    folder = tempfile.mkdtemp(prefix="bench_ratios_")
    trace = os.path.join(folder, "trace.json")
    make, viewer, dom = trace_commands(args, trace)
    run(make, args.run_timeout)
    runs = {"trace.dom_over_viewer.ms": [], "trace.dom_over_viewer.peak_rss": []}
    for pair in range(args.repeats):
        got = {}
        for mode, command in ((("viewer", viewer), ("dom", dom)) if pair % 2 == 0 else (("dom", dom), ("viewer", viewer))):
            got[mode] = parse_trace_load(run(command, args.run_timeout))
        runs["trace.dom_over_viewer.ms"].append(got["dom"][0] / got["viewer"][0])
        runs["trace.dom_over_viewer.peak_rss"].append(got["dom"][1] / got["viewer"][1])
    os.remove(trace)
    os.rmdir(folder)
    return runs


def host_command(args):
    return [program(args, "lessons", "lesson_05_all_reduce"), "--no-steps"]


def cpu_seconds(command, timeout_s, env):
    """User and system CPU seconds of one run of the command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run(command, timeout_s, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure_host(args):
    """Lesson 05 (4 thread ranks, 16 MB all-reduces) with glibc's defaults
    and with freed memory kept (lib/memory/host_allocator.hpp), in turns."""
    command = host_command(args)
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "DISTLAB_HOST_ALLOCATOR")}
    runs = {"host.glibc_over_kept.cpu": []}
    for pair in range(args.repeats):
        got = {}
        for mode in (("glibc", "kept") if pair % 2 == 0 else ("kept", "glibc")):
            got[mode] = cpu_seconds(command, args.run_timeout, dict(env, DISTLAB_HOST_ALLOCATOR=mode))
        runs["host.glibc_over_kept.cpu"].append(got["glibc"] / got["kept"])
    return runs


def describe(args, name):
    """The commands of one benchmark as the report prints them (the source
    folder's paths relative to it)."""
    def text(command):
        return " ".join(command).replace(SOURCE + os.sep, "")
    if name == "collective":
        return ["%d runs of %s" % (args.repeats, text(collective_command(args)))]
    if name == "ddp":
        return [text(ddp_command(args))]
    if name == "host":
        return ["%d pairs, in turns, DISTLAB_HOST_ALLOCATOR=glibc and =kept: %s" % (args.repeats, text(host_command(args)))]
    make, viewer, dom = trace_commands(args, "TRACE")
    return [text(make), "%d pairs, in turns: %s, %s" % (args.repeats, text(viewer), text(dom))]


BENCHMARKS = {"collective": measure_collective, "ddp": measure_ddp, "host": measure_host, "trace": measure_trace}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build", help="DistLab's build folder")
    parser.add_argument("--record", default=RECORD, help="the recorded table (default docs/benchmarks-ratios.md)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="measure these benchmarks only")
    parser.add_argument("--repeats", type=int, default=3, help="runs (or pairs) of each benchmark")
    parser.add_argument("--run-timeout", type=float, default=900, help="seconds one run may take")
    parser.add_argument("--list", action="store_true", help="print the recorded ratios and the commands, run nothing")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    with open(args.record) as f:
        rows = parse_record(f.read())
    chosen = args.only or sorted(BENCHMARKS)
    rows = [r for r in rows if r.key.split(".")[0] in chosen]
    shown = "docs/benchmarks-ratios.md" if args.record == RECORD else args.record
    print("# %d ratios of %s recorded in %s; %d run%s each" %
          (len(rows), ", ".join(chosen), shown, args.repeats, "" if args.repeats == 1 else "s"))
    for name in chosen:
        for line in describe(args, name):
            print("# %s: %s" % (name, line), flush=True)
    if args.list:
        for row in rows:
            print("%-42s better %-6s recorded %5.2f, margin %.0f%%" % (row.key, row.better, row.recorded,
                                                                       100 * row.margin))
        return 0
    measured = {}
    for name in chosen:
        measured.update(BENCHMARKS[name](args))
    lines, failed = compare(rows, measured)
    print("\n".join(lines))
    for key in sorted(set(measured) - {r.key for r in rows}):
        print("%-42s not recorded: measured %.2f (%.2f-%.2f)" %
              (key, statistics.median(measured[key]), min(measured[key]), max(measured[key])))
    print("# %d of %d ratios worse than their record by more than their margin%s" %
          (failed, len(rows), ": FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
