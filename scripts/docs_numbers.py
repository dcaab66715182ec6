#!/usr/bin/env python3
"""Checks the counts the docs state in prose against the build.

    scripts/docs_numbers.py --build build

The READMEs say how many tests there are, how many decks, slides and
artefacts the slides make, how many tests an executable holds. Each such
sentence is listed below with the pattern that finds it; the check reads
the real count from the build (ctest's own listing, the slides' manifest)
and fails on a number that differs, and on a sentence it cannot find
(reworded: update the pattern here). To fix a failure, write the real
number it prints into the file it names.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys


def ctest_listing(build):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True, stdout=subprocess.PIPE).stdout
    return json.loads(out)["tests"]


def facts_of(build):
    """Every count a sentence may state, read from the build."""
    tests = ctest_listing(build)
    per_program = collections.Counter(os.path.basename(t["command"][0]) for t in tests if "command" in t)
    gtest = [name for name in per_program if name.endswith("_tests")]
    facts = {"tests": len(tests), "gtest executables": len(gtest)}
    for name in gtest:
        facts["tests in " + name] = per_program[name]
    manifest = os.path.join(build, "slides", "manifest.json")
    if os.path.exists(manifest):
        m = json.load(open(manifest, encoding="utf-8"))
        facts["decks"] = len(m["decks"])
        facts["slides"] = sum(d["slides"] for d in m["decks"].values())
        facts["artefacts"] = len(m["artefacts"])
    return facts


# (file, pattern, {group: fact}): the pattern must match the file exactly once.
SENTENCES = [
    ("README.md", r"(?P<tests>\d+) tests \((?P<gtest>\d+) GoogleTest executables",
     {"tests": "tests", "gtest": "gtest executables"}),
    ("README.md", r"runs\s+the\s+(?P<tests>\d+)\s+tests", {"tests": "tests"}),
    ("README.md", r"the\s+(?P<decks>\d+)\s+decks\s+\((?P<slides>\d+)\s+slides,\s+(?P<artefacts>\d+)\s+artefacts\)",
     {"decks": "decks", "slides": "slides", "artefacts": "artefacts"}),
    ("launcher/README.md", r"`launcher_tests`,\s+(?P<n>\d+)\s+tests", {"n": "tests in launcher_tests"}),
]


def check(source, facts, sentences=SENTENCES):
    problems, checked = [], 0
    for path, pattern, groups in sentences:
        text = open(os.path.join(source, path), encoding="utf-8").read()
        hits = list(re.finditer(pattern, text))
        if len(hits) != 1:
            problems.append(f"{path}: the pattern {pattern!r} matches {len(hits)} times, not once: "
                            "the sentence was reworded or repeated; update scripts/docs_numbers.py")
            continue
        line = text.count("\n", 0, hits[0].start()) + 1
        for group, fact in groups.items():
            if fact not in facts:
                problems.append(f"{path}:{line}: the build has no count of {fact} (are the slides built?)")
                continue
            stated, real = int(hits[0].group(group)), facts[fact]
            checked += 1
            if stated != real:
                problems.append(f"{path}:{line}: says {stated} {fact}, the build has {real}")
            else:
                print(f"{path}:{line}: {stated} {fact}: ok")
    return problems, checked


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True, help="the build folder (configured, with the slides built)")
    args = parser.parse_args()
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems, checked = check(source, facts_of(os.path.abspath(args.build)))
    for p in problems:
        print("docs-numbers: " + p, file=sys.stderr)
    print(f"docs-numbers: {checked} count(s) checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
