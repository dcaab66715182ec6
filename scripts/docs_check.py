#!/usr/bin/env python3
"""Runs the commands a Markdown file shows and compares the output it shows.

    scripts/docs_check.py --build build lessons/04_reduce/README.md ...
    scripts/docs_check.py --build build --list README.md     # what would run

What it reads, in every code block of the file:
- a command: a line that starts a program (./build/..., build/..., scripts/...,
  cmake, ctest, python3, /usr/bin/torchrun, mpirun, node, and in a block
  that starts with a command a build's program named bare: distlab-run,
  lesson_11_capstone, ...), joined with
  the lines its trailing backslashes continue onto;
- an output: a plain ``` block whose first line is `$ COMMAND`: the lines
  down to the next `$ COMMAND` (or the block's end) are what it printed. Blocks with a language (```json, ```python) are
  listings, not output.
and these notes (HTML comments, invisible on the rendered page), each about
the code block that follows it:
  <!-- docs-check: not run: REASON -->     the block is not run (REASON is said)
  <!-- docs-check: run as: COMMAND -->     a command runs as COMMAND, a short
                                           form of a long run: the block's one
                                           command, or the one COMMAND begins
                                           with (followed by limiting flags)
  <!-- docs-check: varies: REGEX -->       output lines matching REGEX are
                                           compared by shape (numbers masked)
  <!-- docs-check: racy: REGEX -->         shown lines matching REGEX are not
                                           compared: their words change from
                                           run to run (which rank failed first)

How it runs them: each file in a fresh scratch folder, where `build`,
`scripts`, `datasets`, `lessons`, `bench`, `lib`, `tests`, `launcher` and
`viz` lead to the real ones and `/tmp/` in a
command (and in the output shown) becomes the scratch folder's tmp/, so that
an earlier run's checkpoints or traces cannot change what a command prints.
A command fails the check when it exits non-zero (unless its shown output
ends with `exit status N`, or its line, `$ COMMAND` too, ends with a comment
`# exits N: why`, naming that status) or runs past --timeout.
Lines `...` and `[... what was left out ...]` stand for output not shown.

How output is compared: every shown line must be among the real output's
lines (as a multiset: ranks print in any order), after masking what no two
runs share: times and rates (12.3 ms, 0.6 GB/s), dates, pids and ports.
Lines a `varies` note names (measured ratios, bandwidths without a unit,
timelines drawn in text), and the intra-op threads line (the machine's
cores), are compared by shape: their words, every number
masked, a bar between two `|` as one mark. Blank lines do
not count.
"""
import argparse
import collections
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

PROGRAM = re.compile(
    r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"  # VAR=value prefixes
    r"(?:\./build/|build/|\./scripts/|scripts/|cmake\b|ctest\b|python3\b|/usr/bin/\S+|mpirun\b|torchrun\b|node\b|"
    r"npm\b|cd\b|ninja\b|xvfb-run\b)")
# A build's program named bare starts a command in a block of commands (one
# whose first line is a command), not in a block of output that quotes one.
BARE = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:distlab-[a-z][a-z-]*|lesson_\d\d_\w+)(?=\s|$)")
NOTE = re.compile(r"^<!--\s*docs-check:\s*(not run|run as|varies|racy):\s*(.*?)\s*-->\s*$")
TIME_UNITS = r"(?:ns|us|µs|ms|s|sec|min|h|[KMGT]i?B/s|[KMG]bit/s|GB/s|MB/s)"
TIMED = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?\s?" + TIME_UNITS + r"(?![\w/])")
VOLATILE = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[ T_]\d{2}:\d{2}(?::\d{2})?)?\b"), "<date>"),  # torchrun: 2026-11-26_20:47:48
    (re.compile(r"\b\d{2}:\d{2}:\d{2}\.\d{3}\b"), "<clock>"),
    (re.compile(r"\bpid \d+"), "pid <n>"),
    (re.compile(r"\bport \d+"), "port <n>"),
    (re.compile(r"(?<=:)\d{4,5}\b"), "<port>"),
]
# Lines whose numbers come from the machine (its cores), compared by shape
# everywhere: the READMEs show the 2-core VM's.
MACHINE = [r"^(?:\[rank \d+\] )?distlab: \d+ intra-op thread\(s\) per rank for"]
EXIT = re.compile(r"^(?:\[exit (\d+)\]|exit status (\d+))$")
ELISION = re.compile(r"^(?:\.\.\.|\[\.\.\..*\])$")
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?:[KMG](?![A-Za-z]))?")  # 16065K is a number too


class Block:
    def __init__(self, line, lang, lines, notes):
        self.line = line        # 1-based line of the block's first line in the file
        self.lang = lang        # "" for ``` or an indented block
        self.lines = lines
        self.notes = notes      # [(kind, text)]

    def note(self, kind):
        return [text for k, text in self.notes if k == kind]


def blocks_of(text):
    """Code blocks (fenced and indented) with the notes written just above them."""
    lines = text.split("\n")
    blocks, notes, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        m = NOTE.match(line.strip())
        if m:
            notes.append((m.group(1), m.group(2)))
            i += 1
            continue
        if line.startswith("```"):
            lang = line[3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            blocks.append(Block(i + 2, lang, lines[i + 1:j], notes))
            notes, i = [], j + 1
            continue
        if line.startswith("    ") and (i == 0 or not lines[i - 1].strip() or NOTE.match(lines[i - 1].strip())):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            body = [l[4:] for l in lines[i:j]]
            while body and not body[-1].strip():
                body.pop()
            blocks.append(Block(i + 1, "", body, notes))
            notes, i = [], j
            continue
        if line.strip():
            notes = []
        i += 1
    return blocks


EXITS = re.compile(r"\s{2,}#\s*exits (\d+)\b.*$")


def strip_comment(command):
    """`cmd --x   # what it does` -> `cmd --x`."""
    return command.split("  #")[0].rstrip()


def exit_comment(command):
    """`cmd   # exits 1: why` -> ("cmd", 1); without that comment (command, 0)."""
    m = EXITS.search(command)
    return (command[:m.start()].rstrip(), int(m.group(1))) if m else (command, 0)


def commands_of(block):
    """(line, command) for each command in the block, continuations joined."""
    out, k = [], 0
    first_line = next((l.strip() for l in block.lines if l.strip()), "")
    commands_block = bool(PROGRAM.match(first_line) or BARE.match(first_line))
    while k < len(block.lines):
        text = block.lines[k].strip()
        if not (PROGRAM.match(text) or (commands_block and BARE.match(text))):
            k += 1
            continue
        first = k
        while text.endswith("\\") and k + 1 < len(block.lines):
            k += 1
            text = text[:-1].rstrip() + " " + block.lines[k].strip()
        out.append((block.line + first, strip_comment(text), exit_comment(text)[1]))
        k += 1
    return out


def mask(line, scratch_tmp):
    line = line.replace(scratch_tmp, "/tmp/")
    line = TIMED.sub("<time>", line)
    for pattern, replacement in VOLATILE:
        line = pattern.sub(replacement, line)
    return " ".join(line.split())


BAR = re.compile(r"\|[^|]*\|")


def shape(line):
    """Words only: numbers masked, and a bar drawn between two | as one mark."""
    return NUMBER.sub("<n>", BAR.sub("|<bar>|", line))


def compare(shown, real, varies, scratch_tmp, racy=()):
    """The shown lines missing from the real output, as (shown line, why)."""
    def key(line):
        m = mask(line, scratch_tmp)
        if any(re.search(v, line) for v in list(varies) + MACHINE):
            return ("shape", shape(m))
        return ("exact", m)

    have = collections.Counter(key(l) for l in real if l.strip())
    missing = []
    for line in shown:
        if not line.strip() or ELISION.match(line.strip()) or any(re.search(r, line) for r in racy):
            continue
        k = key(line)
        if have[k] > 0:
            have[k] -= 1
        else:
            missing.append(line)
    return missing


class Runner:
    def __init__(self, source, build, timeout, times=False):
        self.source, self.build, self.timeout, self.times = source, build, timeout, times
        self.scratch = tempfile.mkdtemp(prefix="docs_check_")
        self.tmp = os.path.join(self.scratch, "tmp") + "/"
        os.makedirs(self.tmp)
        os.makedirs(os.path.join(self.scratch, "docs", "images"))
        os.symlink(build, os.path.join(self.scratch, "build"))
        for name in ("scripts", "datasets", "lessons", "bench", "lib", "tests", "launcher", "viz"):
            os.symlink(os.path.join(source, name), os.path.join(self.scratch, name))
        self.cache = {}

    def run(self, command):
        if command in self.cache:
            return self.cache[command]
        real = command.replace("/tmp/", self.tmp)
        if real.startswith("cmake --build"):
            # Docs checks run side by side; one build at a time in the folder.
            real = "flock " + shlex.quote(os.path.join(self.build, ".docs_check.lock")) + " " + real
        start = time.time()
        # Programs named bare (`lesson_11_capstone ...`, `distlab-run ...`) are the build's.
        path = ":".join(os.path.join(self.build, d) for d in ("launcher", "lessons", "bench", "viz"))
        # The temporary folder is the scratch one too: a program's default
        # under $TMPDIR (lesson 14's flight_14) is where the README's /tmp/ is.
        env = dict(os.environ, PATH=path + ":" + os.environ.get("PATH", ""), TMPDIR=self.tmp)
        try:
            p = subprocess.run(["bash", "-c", real], cwd=self.scratch, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=self.timeout)
            result = (p.returncode, p.stdout.decode("utf-8", "replace"), time.time() - start)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode("utf-8", "replace")
            result = (None, out, time.time() - start)
        self.cache[command] = result
        if self.times:
            print(f"{result[2]:6.1f} s  {command}")
        return result


def check_file(path, runner, listing):
    started = time.time()
    text = open(path, encoding="utf-8").read()
    problems, ran = [], 0
    for block in blocks_of(text):
        skip = block.note("not run")
        run_as = block.note("run as")
        varies = block.note("varies")
        if block.lang:
            continue
        if block.lines and block.lines[0].startswith("$ "):
            # One output block may hold several `$ COMMAND` and what each printed.
            starts = [k for k, l in enumerate(block.lines) if l.startswith("$ ")] + [len(block.lines)]
            # A `$` line's other text after a # is the command's own (an echo of "|  ##  |").
            targets = []
            for a, b in zip(starts, starts[1:]):
                command, status = exit_comment(block.lines[a][2:].strip())
                targets.append((block.line + a, command, block.lines[a + 1:b], status))
            if run_as:
                targets[0] = (targets[0][0], run_as[0], targets[0][2], targets[0][3])
        else:
            found = commands_of(block)
            for short in run_as:
                # Above one command: that command; above several: the one
                # the short form begins with (it adds limiting flags).
                hits = [k for k, (_, c, _) in enumerate(found) if len(found) == 1 or short.startswith(c + " ")]
                if len(hits) != 1:
                    problems.append(f"{path}:{block.line}: 'run as: {short}' fits {len(hits)} of the block's "
                                    f"{len(found)} commands, not one")
                    continue
                found[hits[0]] = (found[hits[0]][0], short, found[hits[0]][2])
            targets = [(line, command, None, status) for line, command, status in found]
        for line, command, shown, expected in targets:
            where = f"{path}:{line}"
            if skip:
                print(f"{where}: not run ({skip[0]}): {command}")
                continue
            if listing:
                print(f"{where}: would run: {command}")
                continue
            status, output, seconds = runner.run(command)
            ran += 1
            m = EXIT.match(shown[-1].strip()) if shown else None
            if m:
                expected = int(m.group(1) or m.group(2))
                shown = shown[:-1]
            if status is None:
                problems.append(f"{where}: ran past {runner.timeout} s: {command}\n{tail(output)}")
                continue
            if status != expected:
                problems.append(f"{where}: exit status {status} (expected {expected}): {command}\n{tail(output)}")
                continue
            missing = compare(shown or [], output.splitlines(), varies, runner.tmp, block.note("racy"))
            if missing:
                problems.append(f"{where}: {len(missing)} of the lines shown are not in the output of: {command}\n"
                                + "\n".join("  shown: " + m for m in missing[:8]) + "\n  real output:\n" +
                                tail(output, 40))
                continue
            print(f"{where}: ok in {seconds:.1f} s: {command}")
    if not listing:
        print(f"docs-check: {path}: {ran} command(s) in {time.time() - started:.1f} s")
    return problems, ran


def tail(text, n=15):
    lines = text.rstrip("\n").split("\n")
    return "\n".join("    | " + l for l in lines[-n:])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True, help="the build folder the commands' build/ stands for")
    parser.add_argument("--timeout", type=float, default=180, help="seconds one command may take")
    parser.add_argument("--list", action="store_true", help="only list what would run")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (its path is printed)")
    parser.add_argument("--times", action="store_true", help="print each command's seconds (which ones are slow)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runner = Runner(source, os.path.abspath(args.build), args.timeout, args.times)
    problems, ran = [], 0
    for path in args.files:
        p, r = check_file(os.path.join(source, path) if not os.path.isabs(path) else path, runner, args.list)
        problems += p
        ran += r
    if args.keep:
        print(f"docs-check: the scratch folder is kept: {runner.scratch}")
    else:
        shutil.rmtree(runner.scratch, ignore_errors=True)
    for p in problems:
        print("docs-check: " + p, file=sys.stderr)
    if not args.list:
        print(f"docs-check: {ran} command(s) run, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
