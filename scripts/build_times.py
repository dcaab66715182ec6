#!/usr/bin/env python3
"""Where a DistLab build spends its time, from ninja's own log.

    scripts/build_times.sh                      the last build in build/: wall time,
                                                time per part, the slowest steps
    scripts/build_times.sh --top 40             more of the slowest steps
    scripts/build_times.sh --why lib/train/trainer.cpp
                                                compile one file again with GCC's
                                                -ftime-report: parsing vs templates
                                                vs optimisation vs debug info
    BUILD_DIR=out scripts/build_times.sh        another build folder

Ninja appends a line to build/.ninja_log for every step it runs (start and
end in milliseconds since that ninja run began). The report reads the steps
of the most recent run, groups them by the part of the tree they belong to,
and prints the seconds each part took on one core: the sum over its steps.
With -j N the wall time is roughly that sum over N.
"""
import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys


def read_last_run(log_path):
    """The steps of the most recent ninja run: (start ms, end ms, output) triples.

    Within one run ninja writes a step when it finishes, so end times never
    decrease; a line that ends earlier than the one before starts a new run.
    """
    runs = [[]]
    last_end = -1
    with open(log_path) as f:
        header = f.readline()
        if not header.startswith("# ninja log"):
            raise SystemExit(f"build_times: {log_path} is not a ninja log")
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                continue
            start, end, output = int(fields[0]), int(fields[1]), fields[3]
            if end < last_end:
                runs.append([])
            last_end = end
            runs[-1].append((start, end, output))
    steps = runs[-1]
    if not steps:
        raise SystemExit(f"build_times: no step in {log_path}")
    return steps


def part_of(output):
    """The part of the tree a build step belongs to, e.g. 'lib/train' or 'tests/zero'."""
    m = re.match(r"(lib|tests|viz|bench|launcher|lessons)/(?:([^/]+)/)?CMakeFiles/([^/]+)\.dir/(.*)", output)
    if m:
        top, sub, target, rest = m.groups()
        if rest.startswith("cmake_pch"):
            return "precompiled headers"
        if top == "lib":
            return "lib/" + rest.split("/")[0]
        if top == "tests":
            return "tests/" + (sub or target)
        return top
    if output.endswith(".o"):
        return "other"
    return "linking"


def report(build_dir, top):
    steps = read_last_run(os.path.join(build_dir, ".ninja_log"))
    wall = (max(e for _, e, _ in steps) - min(s for s, _, _ in steps)) / 1000.0
    total = sum(e - s for s, e, _ in steps) / 1000.0
    print(f"last build in {build_dir}/: {len(steps)} steps, {wall:.0f} s wall, "
          f"{total:.0f} s summed over the steps (one core each)")
    parts = {}
    for s, e, out in steps:
        part = part_of(out)
        secs, count = parts.get(part, (0.0, 0))
        parts[part] = (secs + (e - s) / 1000.0, count + 1)
    print("\n  seconds  steps  part")
    for name, (secs, count) in sorted(parts.items(), key=lambda kv: -kv[1][0]):
        print(f"  {secs:7.0f}  {count:5d}  {name}")
    print(f"\nthe {top} slowest steps:\n  seconds  output")
    for s, e, out in sorted(steps, key=lambda t: t[0] - t[1])[:top]:
        print(f"  {(e - s) / 1000.0:7.1f}  {out}")


def why(build_dir, source):
    """Compile one translation unit again with -ftime-report and print its phases."""
    db_path = os.path.join(build_dir, "compile_commands.json")
    if not os.path.exists(db_path):
        raise SystemExit(f"build_times: {db_path} is missing: configure the folder again "
                         "(the top CMakeLists.txt turns CMAKE_EXPORT_COMPILE_COMMANDS on)")
    with open(db_path) as f:
        db = json.load(f)
    wanted = os.path.realpath(source)
    entry = next((e for e in db if os.path.realpath(os.path.join(e["directory"], e["file"])) == wanted), None)
    if entry is None:
        raise SystemExit(f"build_times: {source} is not compiled in {build_dir}/ "
                         "(give a .cpp path, e.g. lib/train/trainer.cpp)")
    # CMake writes the command without the compiler launcher (ccache) and the
    # dependency flags. Keep the flags (the precompiled header included), drop
    # the output: the object in the build stays as it was.
    args = shlex.split(entry["command"]) if "command" in entry else entry["arguments"]
    args[args.index("-o") + 1] = "/dev/null"
    args.append("-ftime-report")
    print(f"compiling {source} with -ftime-report ...", flush=True)
    proc = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"build_times: the compile failed (exit {proc.returncode})")
    # GCC prints a line per timer: "name : usr (%) sys (%) wall (%) memory".
    timer = re.compile(r"^\s*(.+?)\s*:\s*[\d.]+\s*\(\s*\d+%\)\s*[\d.]+\s*\(\s*\d+%\)"
                       r"\s*([\d.]+)\s*\(\s*\d+%\)")
    phases, details = [], []
    for line in proc.stderr.splitlines():
        m = timer.match(line)
        if m:
            name, secs = m.group(1), float(m.group(2))
            (phases if name.startswith("phase ") else details).append((secs, name))
        total = re.match(r"\s*TOTAL\s*:\s*[\d.]+\s+[\d.]+\s+([\d.]+)", line)
        if total:
            print(f"  total: {float(total.group(1)):.1f} s wall")
    print("  the phases:")
    for secs, name in sorted(phases, reverse=True):
        print(f"  {secs:6.2f} s  {name}")
    print("  the costliest items inside them:")
    for secs, name in sorted(details, reverse=True)[:10]:
        print(f"  {secs:6.2f} s  {name}")


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the report quietly
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build"))
    parser.add_argument("--top", type=int, default=20, help="how many of the slowest steps to list")
    parser.add_argument("--why", metavar="FILE.cpp", help="compile FILE.cpp again with -ftime-report")
    args = parser.parse_args()
    if not os.path.isdir(args.build_dir):
        raise SystemExit(f"build_times: {args.build_dir}/ does not exist: build first (scripts/setup.sh)")
    if args.why:
        why(args.build_dir, args.why)
    else:
        report(args.build_dir, args.top)


if __name__ == "__main__":
    main()
