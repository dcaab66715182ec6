#!/usr/bin/env python3
"""The order in which DistLab's programs name LibTorch's shared libraries.

Debian's LibTorch loads about 290 shared libraries (OpenCV, GDAL, FFmpeg,
...). The dynamic loader resolves each symbol by searching the loaded
libraries in their load order, breadth first from the program, so a library
deep in that order (GDAL, Xerces) searches some 200 others for each of its
own symbols: lesson 11's `--help` made 14.9 million hash-table probes
before main(). A program that names the libraries itself, those that look
up the most symbols early, makes 6.0 million (15% fewer instructions at
start; docs/build-times.md has the times).

Changing the order must not change which library any symbol binds to: where
two libraries define the same symbol, the first of them wins. So wherever
two libraries define a common symbol, the first definer in the loader's
order stays ahead of the other; within that, the C and C++ runtimes come
first, then each library by its urgency: the most symbol lookups
(relocations that name a symbol) that it or any library held behind it
makes. tests/build/load_order_check.py checks that every binding of a
program is the same with and without the order.

    scripts/load_order.py --program PROGRAM   # prints the libraries, one per line

PROGRAM: a program linked as DistLab's are (lib/load_order.cmake builds
one); the order printed holds every library it loads.
"""
import heapq
import os
import struct
import subprocess
import sys

SHT_RELA, SHT_DYNAMIC, SHT_DYNSYM = 4, 6, 11
DT_NEEDED = 1
SHN_UNDEF = 0
DEFINING_BINDS = (1, 2, 10)  # global, weak, GNU unique
RUNTIMES = ("libc.so.6", "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1")


def elf(path):
    """The file's bytes and section headers, or None if it is not a 64-bit little-endian ELF file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    return data, [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]


def string_at(data, at):
    return data[at:data.index(b"\0", at)]


def needed(path):
    """The names in the file's DT_NEEDED entries, in order."""
    parsed = elf(path)
    if parsed is None:
        return []
    data, sections = parsed
    names = []
    for _, kind, _, _, offset, size, link, _, _, _ in sections:
        if kind == SHT_DYNAMIC:
            strings = sections[link][4]
            for tag, value in struct.iter_unpack("<qQ", data[offset:offset + size]):
                if tag == DT_NEEDED:
                    names.append(string_at(data, strings + value).decode())
    return names


def loader_order(program):
    """The libraries `program` loads, in the loader's search order: breadth
    first through each one's DT_NEEDED (the program itself left out)."""
    where = {}
    out = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and parts[1].strip().startswith("/"):
            where[parts[0].strip()] = parts[1].split()[0]
    order, seen, queue = [], set(), [where[name] for name in needed(program) if name in where]
    while queue:
        path = queue.pop(0)
        if os.path.realpath(path) in seen:
            continue
        seen.add(os.path.realpath(path))
        order.append(path)
        queue += [where[name] for name in needed(path) if name in where]
    return order


def symbols_and_lookups(path):
    """(names of the dynamic symbols it defines, relocations naming a symbol) of an x86-64 ELF file."""
    parsed = elf(path)
    if parsed is None:
        return set(), 0  # not an x86-64 ELF file: taken as defining nothing
    data, sections = parsed
    defined, lookups = set(), 0
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind == SHT_DYNSYM:
            strings = sections[link][4]
            for name, info, _, shndx, _, _ in struct.iter_unpack("<IBBHQQ", data[offset:offset + size]):
                if shndx != SHN_UNDEF and (info >> 4) in DEFINING_BINDS and name:
                    defined.add(string_at(data, strings + name))
        elif kind == SHT_RELA and entsize == 24:
            for _, info, _ in struct.iter_unpack("<QQq", data[offset:offset + size]):
                lookups += (info >> 32) != 0
    return defined, lookups


def order(program):
    libraries = loader_order(program)
    facts = [symbols_and_lookups(p) for p in libraries]
    n = len(libraries)
    # i must stay before j (i < j in the loader's order) where both define a symbol.
    after = [[] for _ in range(n)]
    waits = [0] * n
    owner = {}
    for j, (defined, _) in enumerate(facts):
        firsts = {owner[s] for s in defined if s in owner}
        for i in firsts:
            after[i].append(j)
            waits[j] += 1
        for s in defined:
            owner.setdefault(s, j)

    # A library's urgency: the most lookups it or any library that must come
    # after it makes, so that what holds a busy library back goes early.
    urgency = [facts[i][1] for i in range(n)]
    for i in reversed(range(n)):  # every edge goes from an earlier library to a later one
        for j in after[i]:
            urgency[i] = max(urgency[i], urgency[j])

    def rank(i):
        base = os.path.basename(libraries[i])
        return (RUNTIMES.index(base) if base in RUNTIMES else len(RUNTIMES), -urgency[i], -facts[i][1], i)

    ready = [rank(i) for i in range(n) if waits[i] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)[3]
        out.append(libraries[i])
        for j in after[i]:
            waits[j] -= 1
            if waits[j] == 0:
                heapq.heappush(ready, rank(j))
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "--program":
        sys.exit(__doc__)
    for path in order(sys.argv[2]):
        print(path)


if __name__ == "__main__":
    main()
