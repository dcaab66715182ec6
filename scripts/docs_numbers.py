#!/usr/bin/env python3
"""Checks the counts the docs state in prose against the build.

    scripts/docs_numbers.py --build build

The READMEs say how many tests there are, how many decks, slides and
artefacts the slides make, how many cases an executable holds. Each such
sentence is listed below with the pattern that finds it; the check reads
the real count from the build (ctest's own listing, each test executable's
listing, the slides' manifest)
and fails on a number that differs, and on a sentence it cannot find
(reworded: update the pattern here). To fix a failure, write the real
number it prints into the file it names.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def ctest_listing(build):
    """ctest's own listing of the build's tests. ctest writes its log into
    the folder it lists (Testing/Temporary/LastTest.log), and this check
    runs inside the suite, so it lists a copy of the build's test files:
    the suite's own log stays whole."""
    with tempfile.TemporaryDirectory(prefix="docs_numbers_") as copy:
        for folder, _, files in os.walk(build):
            if "CTestTestfile.cmake" in files:
                target = os.path.join(copy, os.path.relpath(folder, build))
                os.makedirs(target, exist_ok=True)
                shutil.copy(os.path.join(folder, "CTestTestfile.cmake"), target)
        out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=copy, check=True, stdout=subprocess.PIPE).stdout
    return json.loads(out)["tests"]


def gtest_cases(executable):
    """The cases an executable holds, by its own listing (indented lines)."""
    out = subprocess.run([executable, "--gtest_list_tests"], check=True, stdout=subprocess.PIPE, text=True).stdout
    return sum(1 for line in out.splitlines() if line.startswith("  "))


def facts_of(build):
    """Every count a sentence may state, read from the build."""
    tests = ctest_listing(build)
    executables = sorted({t["command"][0] for t in tests
                          if "command" in t and os.path.basename(t["command"][0]).endswith("_tests")})
    facts = {"tests": len(tests), "gtest executables": len(executables), "cases": 0}
    for executable in executables:
        cases = gtest_cases(executable)
        facts["cases"] += cases
        facts["cases in " + os.path.basename(executable)] = cases
    manifest = os.path.join(build, "slides", "manifest.json")
    if os.path.exists(manifest):
        m = json.load(open(manifest, encoding="utf-8"))
        facts["decks"] = len(m["decks"])
        facts["slides"] = sum(d["slides"] for d in m["decks"].values())
        facts["artefacts"] = len(m["artefacts"])
    return facts


# (file, pattern, {group: fact}): the pattern must match the file exactly once.
SENTENCES = [
    ("README.md", r"(?P<tests>\d+) tests: (?P<cases>\d+) GoogleTest cases in (?P<gtest>\d+) executables",
     {"tests": "tests", "cases": "cases", "gtest": "gtest executables"}),
    ("README.md", r"runs\s+the\s+(?P<tests>\d+)\s+tests", {"tests": "tests"}),
    ("README.md", r"the\s+(?P<decks>\d+)\s+decks\s+\((?P<slides>\d+)\s+slides,\s+(?P<artefacts>\d+)\s+artefacts\)",
     {"decks": "decks", "slides": "slides", "artefacts": "artefacts"}),
    ("launcher/README.md", r"`launcher_tests`,\s+(?P<n>\d+)\s+cases", {"n": "cases in launcher_tests"}),
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
