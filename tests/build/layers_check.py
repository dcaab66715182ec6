#!/usr/bin/env python3
"""Each layer of lib/ includes only itself and the layers before it.

The order is the one lib/CMakeLists.txt builds them in (its `foreach(layer
...)` line), the order docs/design.md's table gives. Prints every include
that points up, with its file and line, and exits 1 when there is one.

  tests/build/layers_check.py [REPO]
"""
import pathlib
import re
import sys


def layer_order(lib):
    text = (lib / "CMakeLists.txt").read_text()
    found = re.search(r"foreach\(layer ([a-z_ ]+)\)", text)
    if not found:
        sys.exit(f"{lib / 'CMakeLists.txt'}: no 'foreach(layer ...)' line to read the layers' order from")
    return found.group(1).split()


def upward_includes(lib, order):
    rank = {name: i for i, name in enumerate(order)}
    for path in sorted(lib.rglob("*")):
        if path.suffix not in (".hpp", ".cpp") or path.parent.name not in rank:
            continue
        own = rank[path.parent.name]
        for number, line in enumerate(path.read_text().splitlines(), 1):
            included = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
            if included and included.group(1) in rank and rank[included.group(1)] > own:
                yield f"{path.relative_to(lib.parent)}:{number}: {path.parent.name} includes {included.group(1)}, a layer above it"


def main():
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    lib = repo / "lib"
    order = layer_order(lib)
    missing = [name for name in order if not (lib / name).is_dir()]
    if missing:
        sys.exit(f"lib/CMakeLists.txt names layers with no folder: {', '.join(missing)}")
    unlisted = sorted(p.name for p in lib.iterdir() if (p / "sources.cmake").exists() and p.name not in order)
    if unlisted:
        sys.exit(f"lib/ folders with sources that lib/CMakeLists.txt's layer list leaves out: {', '.join(unlisted)}")
    wrong = list(upward_includes(lib, order))
    for line in wrong:
        print(line)
    print(f"{len(order)} layers ({' < '.join(order)}): "
          + (f"{len(wrong)} include(s) point up" if wrong else "every include points down or sideways"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
