#!/usr/bin/env python3
"""Checks that the load order (lib/load_order.cmake) changes no binding.

    load_order_check.py PLAIN ORDERED LESSON
    load_order_check.py --absent WHY     # the build has no order: WHY


PLAIN and ORDERED: the same empty program linked as LESSON is (LibTorch's
three libraries first), without and with the order. LESSON must name the
libraries ORDERED names, in the same order, after libdistlab's two; ORDERED
more than PLAIN (the order is there). Both probes run with every symbol bound
at start (LD_BIND_NOW) and the loader saying where it bound each one
(LD_DEBUG=bindings); each library's every symbol must bind to the same
library in both. And the comparison can fail: PLAIN with one library moved
ahead of an earlier one that defines a symbol it also defines (LD_PRELOAD)
must show bindings that differ.

Where the configure step found no order (lib/load_order.cmake says why), the
test is still there: it skips (status 77) naming the reason, and under
CI=true (scripts/test.sh sets it) fails, since the set-up there gives one.
"""
import importlib.util
import os
import re
import subprocess
import sys

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("load_order", os.path.join(SOURCE, "scripts", "load_order.py"))
load_order = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(load_order)
BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: \w+ symbol `([^']+)'(?: \[(\S+)\])?")


def bindings(program, preload=None):
    """(requesting file, symbol, version) -> the file it binds to; the program itself named PROGRAM."""
    env = dict(os.environ, LD_BIND_NOW="1", LD_DEBUG="bindings", **({"LD_PRELOAD": preload} if preload else {}))
    run = subprocess.run([program], capture_output=True, text=True, env=env, timeout=60)
    if run.returncode != 0:
        sys.exit(f"{program} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    names = {}

    def name(f):
        if f not in names:
            names[f] = "PROGRAM" if os.path.basename(f) == os.path.basename(program) else os.path.realpath(f)
        return names[f]

    out = {}
    for line in run.stderr.splitlines():
        m = BINDING.search(line)
        if m:
            out[(name(m.group(1)), m.group(3), m.group(4))] = name(m.group(2))
    return out


def compare(a, b, what=None):
    """How many bindings of b differ from a's (with `what`, the first 20 printed); b may not add any."""
    differ = [(k, v, b.get(k)) for k, v in a.items() if b.get(k) != v]
    extra = [k for k in b if k not in a]
    for (requester, symbol, version), was, now in differ[:20] if what else []:
        print(f"  {requester}: {symbol}{' ' + version if version else ''} bound to {was}, {what} to {now}")
    return len(differ) + len(extra)


def moved_ahead(plain):
    """A library of PLAIN's that defines a symbol an earlier one defines too."""
    seen = set()
    for library in load_order.loader_order(plain):
        defined, _ = load_order.symbols_and_lookups(library)
        if defined & seen and os.path.basename(library) not in load_order.RUNTIMES:
            return library
        seen |= defined
    sys.exit("load order: no two libraries define a common symbol: nothing to move")


def absent(why):
    """No order in this build: a skip, or a failure under CI=true."""
    print(f"load order: this build has none: {why}")
    if os.environ.get("CI") == "true":
        sys.exit("load order: CI=true: the set-up gives an order, so its absence fails")
    sys.exit(77)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--absent":
        absent(sys.argv[2])
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    plain, ordered, lesson = sys.argv[1:]
    needed = load_order.needed
    named = needed(plain), needed(ordered)
    print(f"load order: {plain} names {len(named[0])} libraries, {ordered} {len(named[1])}")
    if len(named[1]) <= len(named[0]):
        sys.exit("load order: the ordered program names no more libraries than the plain one: the order is not there")
    if needed(lesson)[2:] != named[1]:
        sys.exit(f"load order: {lesson} names {needed(lesson)[:12]}..., the probe {named[1][:10]}...")
    a, b = bindings(plain), bindings(ordered)
    if len(a) < 1000:
        sys.exit(f"load order: only {len(a)} bindings seen: LD_DEBUG gave no account of them")
    differ = compare(a, b, "with the order")
    if differ:
        sys.exit(f"load order: {differ} of {len(a)} bindings differ")
    print(f"load order: all {len(a)} bindings the same")
    library = moved_ahead(plain)
    moved = compare(a, {k: v for k, v in bindings(plain, library).items() if k[0] != os.path.realpath(library) or k in a})
    if not moved:
        sys.exit(f"load order: moving {library} first changed no binding: the comparison cannot tell")
    print(f"load order: moving {os.path.basename(library)} first changes {moved} bindings (the comparison can fail)")


if __name__ == "__main__":
    main()
