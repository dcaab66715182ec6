#!/usr/bin/env python3
"""Runs the commands a Markdown file shows and compares the output it shows.

    scripts/docs_check.py --build build lessons/04_reduce/README.md ...
    scripts/docs_check.py --build build --list README.md     # what would run

What it reads, in every plain code block of the file (``` or indented;
blocks with a language, ```json or ```cpp, are listings and not read):
- a block of commands, whose first line starts a program (./build/...,
  build/..., scripts/..., cmake, ctest, python3, /usr/bin/torchrun, mpirun,
  node, and a build's program named bare: distlab-run, lesson_11_capstone,
  ...): each command is run, joined with the lines its trailing backslashes
  continue onto. Its other lines may only be comments (`# ...`); any other
  line (output, a program the check does not know) is refused, not skipped:
  output is shown after `$ COMMAND`;
- a block of output, whose first line is `$ COMMAND`: the lines down to the
  next `$ COMMAND` (or the block's end) are all that the command printed;
- any other plain block is refused unless a note says why it is not run.
These notes (HTML comments, invisible on the rendered page), each about the
code block that follows it:
  <!-- docs-check: not run: REASON -->     the block is not run (REASON is said)
  <!-- docs-check: run as: COMMAND -->     a command runs as COMMAND, a short
                                           form of a long run: the block's one
                                           command, or the one COMMAND begins
                                           with (followed by limiting flags)
  <!-- docs-check: record: HOW -->         the output shown is a record of the
                                           long run (HOW: where, when, how to
                                           make it again); the short run's
                                           output is compared with it by shape
                                           (without it, a short run's output is
                                           compared as any other)
  <!-- docs-check: varies: REGEX -->       what REGEX matches (its groups, if it
                                           has any) is masked, in the shown and
                                           the real lines: the fields a run
                                           changes (a ratio, a bar drawn in text)
  <!-- docs-check: racy: REGEX -->         lines matching REGEX are not
                                           compared: their words change from
                                           run to run (which rank failed first)

How it runs them: each file in a fresh scratch folder, where `build`,
`scripts`, `datasets`, `lessons`, `bench`, `lib`, `tests`, `launcher`,
`viz` and `planner` lead to the real ones and `/tmp/` in a
command (and in the output shown) becomes the scratch folder's tmp/, so that
an earlier run's checkpoints or traces cannot change what a command prints.
Commands run under bash with pipefail: a program in a pipe that fails fails
the command. With `--port P`, a launcher whose command names no port meets
at P (MASTER_PORT and PET_MASTER_PORT), so that files are checked side by
side; without it, at the launchers' default 29500.
A command fails the check when it exits non-zero (unless its shown output
ends with `exit status N`, or its line, `$ COMMAND` too, ends with a comment
`# exits N: why`, naming that status) or runs past --timeout.

How output is compared: the shown lines and the real output's lines must be
the same (as a multiset: ranks print in any order; blank lines do not
count), after masking what no two runs share: times and rates (12.3 ms,
0.6 GB/s), dates, clock times, `pid N`, `port N`, rounding residues (a
number in scientific notation below 1e-4, not zero), the intra-op threads
line's thread and core counts (the machine's), and what `varies` notes name.
A line `...` or `[... what was left out ...]` says lines are left out there:
a printed line that is not shown must lie between the shown lines next to
such a mark. A record (`record:` note) is compared by shape: the kinds of
line (their words, every number masked, a bar between two `|` as one mark)
the short run prints against the kinds shown.
Every line the check does not compare is said: `not run` blocks, and the
racy lines of each command.
"""
import argparse
import collections
import os
import platform
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
NOTE = re.compile(r"^<!--\s*docs-check:\s*(not run|run as|record|varies|racy):\s*(.*?)\s*-->\s*$")
TIME_UNITS = r"(?:ns|us|µs|ms|s|sec|min|h|[KMGT]i?B/s|[KMG]bit/s|GB/s|MB/s)"
TIMED = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?\s?" + TIME_UNITS + r"(?![\w/])")
VOLATILE = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[ T_]\d{2}:\d{2}(?::\d{2})?)?\b"), "<date>"),  # torchrun: 2026-11-26_20:47:48
    (re.compile(r"\b\d{2}:\d{2}:\d{2}\.\d{3}\b"), "<clock>"),
    (re.compile(r"\bpid \d+"), "pid <n>"),
    (re.compile(r"\bport \d+"), "port <n>"),
    # A rounding residue: a number in scientific notation below 1e-4 (a
    # largest difference against a reference, 2.98e-08 on one CPU and
    # 1.49e-08 on another: the BLAS's kernels add in their own order).
    # Zero (0.00e+00) stays compared: an exact match is a claim.
    (re.compile(r"(?<![\w.])\d(?:\.\d+)?e-(?:0?[5-9]|[1-9]\d)(?![\w.])"), "<residue>"),
]
# The machine's numbers (its cores, the threads they give a rank), masked
# everywhere: the READMEs show the 2-core VM's.
MACHINE = [r"^(?:\[rank \d+\] )?distlab: (\d+) intra-op thread\(s\) per rank for \d+ rank\(s\) here \((\d+) core"]
EXIT = re.compile(r"^(?:\[exit (\d+)\]|exit status (\d+))$")
ELISION = re.compile(r"^(?:\.\.\.|\[\.\.\..*\])$")
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?:[KMG](?![A-Za-z]))?")  # 16065K is a number too
EXITS = re.compile(r"\s{2,}#\s*exits (\d+)\b.*$")


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


def strip_comment(command):
    """`cmd --x   # what it does` -> `cmd --x`."""
    return command.split("  #")[0].rstrip()


def exit_comment(command):
    """`cmd   # exits 1: why` -> ("cmd", 1); without that comment (command, 0)."""
    m = EXITS.search(command)
    return (command[:m.start()].rstrip(), int(m.group(1))) if m else (command, 0)


def is_commands_block(block):
    """A block of commands: its first line starts a program."""
    first = next((l.strip() for l in block.lines if l.strip()), "")
    return bool(PROGRAM.match(first) or BARE.match(first))


def commands_of(block):
    """(line, command, status) for each command in a block of commands,
    continuations joined, and (line, text) for each other line that is not
    blank or a comment: output or a program the check does not know, which
    the check refuses rather than skips."""
    out, others, k = [], [], 0
    while k < len(block.lines):
        text = block.lines[k].strip()
        if not (PROGRAM.match(text) or BARE.match(text)):
            if text and not text.startswith("#"):
                others.append((block.line + k, text))
            k += 1
            continue
        first = k
        while text.endswith("\\") and k + 1 < len(block.lines):
            k += 1
            text = text[:-1].rstrip() + " " + block.lines[k].strip()
        out.append((block.line + first, strip_comment(text), exit_comment(text)[1]))
        k += 1
    return out, others


def mask_named(line, patterns):
    """What each pattern matches masked as <v>: its groups where it has any
    (`ratio (\\S+)` masks the ratio, not the word), else the whole match."""
    for pattern in patterns:
        rx = re.compile(pattern)

        def sub(m):
            text, base = m.group(0), m.start()
            spans = [m.span(g) for g in range(1, rx.groups + 1) if m.span(g)[0] >= 0] if rx.groups else [m.span()]
            for a, b in sorted(spans, reverse=True):
                text = text[:a - base] + "<v>" + text[b - base:]
            return text
        line = rx.sub(sub, line)
    return line


def mask(line, scratch_tmp, varies=()):
    """The line with what no two runs share masked: the scratch folder, what
    `varies` notes name and the machine's counts, times, dates, pids, ports."""
    line = line.replace(scratch_tmp, "/tmp/")
    line = mask_named(line, list(varies) + MACHINE)
    line = TIMED.sub("<time>", line)
    for pattern, replacement in VOLATILE:
        line = pattern.sub(replacement, line)
    return " ".join(line.split())


BAR = re.compile(r"\|[^|]*\|")


def shape(line):
    """Words only: numbers masked, and a bar drawn between two | as one mark."""
    return NUMBER.sub("<n>", BAR.sub("|<bar>|", line))


def compared_lines(lines, racy):
    """The lines compared: blank and racy ones out; elision marks as None."""
    kept = []
    for line in lines:
        if not line.strip() or any(re.search(r, line) for r in racy):
            continue
        kept.append(None if ELISION.match(line.strip()) else line)
    return kept


def compare(shown, real, varies, scratch_tmp, racy=()):
    """Shown against printed, the whole output: (shown lines not printed,
    printed lines not shown where no `...` stands for them)."""
    shown = compared_lines(shown, racy)
    real = compared_lines(real, racy)
    real = [l for l in real if l is not None]
    waiting = collections.defaultdict(collections.deque)   # key -> shown positions not yet matched
    for pos, line in enumerate(shown):
        if line is not None:
            waiting[mask(line, scratch_tmp, varies)].append(pos)
    matched = []   # per printed line: the shown position it matched, or None
    for line in real:
        queue = waiting[mask(line, scratch_tmp, varies)]
        matched.append(queue.popleft() if queue else None)
    missing = sorted(p for queue in waiting.values() for p in queue)
    elisions = [p for p, line in enumerate(shown) if line is None]
    ranks = [rank_of(line) for line in real]
    extra = [real[i] for i, p in enumerate(matched)
             if p is None and not elided(i, matched, ranks, elisions, len(shown))]
    return [shown[p] for p in missing], extra


RANK = re.compile(r"^(?:\[(?:RANK|rank) \d+\]:? ?)+")


def rank_of(line):
    """The rank prefixes a line starts with (`[rank 0] [RANK 0]: `), or ""."""
    m = RANK.match(line)
    return m.group(0).strip() if m else ""


def elided(i, matched, ranks, elisions, n_shown):
    """Whether printed line i, shown nowhere, lies where a `...` stands: between
    the shown lines its nearest matched neighbours matched (in either order).
    Ranks print in any order, each in its own: a line with a rank prefix
    takes its neighbours among that rank's lines."""
    same = [k for k in range(len(matched)) if ranks[k] == ranks[i]] if ranks[i] else range(len(matched))
    before = next((matched[k] for k in reversed(same) if k < i and matched[k] is not None), -1)
    after = next((matched[k] for k in same if k > i and matched[k] is not None), n_shown)
    low, high = min(before, after), max(before, after)
    return any(low < e < high for e in elisions)


def compare_shapes(shown, real, varies, scratch_tmp, racy=()):
    """A record against a short run: the kinds of line (shapes) each has
    that the other lacks; the short run's extra kinds pass where a `...` is shown."""
    shown = compared_lines(shown, racy)
    real = [l for l in compared_lines(real, racy) if l is not None]
    kinds_shown = {shape(mask(l, scratch_tmp, varies)): l for l in shown if l is not None}
    kinds_real = {shape(mask(l, scratch_tmp, varies)): l for l in real}
    missing = [l for k, l in kinds_shown.items() if k not in kinds_real]
    extra = [] if None in shown else [l for k, l in kinds_real.items() if k not in kinds_shown]
    return missing, extra


class Runner:
    def __init__(self, source, build, timeout, times=False, port=None):
        self.source, self.build, self.timeout, self.times = source, build, timeout, times
        # The rendezvous port a launcher takes when its command names none:
        # distlab-run and mpirun's ranks read MASTER_PORT, torchrun reads
        # PET_MASTER_PORT. Without --port, neither is set: the default 29500.
        self.port_env = {"MASTER_PORT": str(port), "PET_MASTER_PORT": str(port)} if port else {}
        self.scratch = tempfile.mkdtemp(prefix="docs_check_")
        self.tmp = os.path.join(self.scratch, "tmp") + "/"
        os.makedirs(self.tmp)
        os.makedirs(os.path.join(self.scratch, "docs", "images"))
        os.symlink(build, os.path.join(self.scratch, "build"))
        for name in ("scripts", "datasets", "lessons", "bench", "lib", "tests", "launcher", "viz", "planner"):
            os.symlink(os.path.join(source, name), os.path.join(self.scratch, name))
        self.cache = {}

    def run(self, command):
        """(exit status or None past the timeout, output, seconds); bash with
        pipefail, so that a pipe's failing program fails the command."""
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
        if platform.machine() == "x86_64":  # the READMEs' BLAS kernels on any x86-64 (scripts/test.sh says why)
            env.setdefault("OPENBLAS_CORETYPE", "Haswell")
        for name in ("MASTER_PORT", "PET_MASTER_PORT"):
            env.pop(name, None)
        env.update(self.port_env)
        try:
            p = subprocess.run(["bash", "-o", "pipefail", "-c", real], cwd=self.scratch, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=self.timeout)
            result = (p.returncode, p.stdout.decode("utf-8", "replace"), time.time() - start)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode("utf-8", "replace")
            result = (None, out, time.time() - start)
        self.cache[command] = result
        if self.times:
            print(f"{result[2]:6.1f} s  {command}")
        return result


class Target:
    """One command to run: where it is, and the output shown for it (None in a block of commands)."""
    def __init__(self, line, command, shown, status):
        self.line, self.command, self.shown, self.status = line, command, shown, status


def output_targets(block):
    """An output block's `$ COMMAND`s and what each printed. A `run as` above
    it runs the first one in a short form, whose output is compared with the
    shown one as any other (it may only change what is masked: the times of
    fewer rounds), or by shape where the block is marked a record."""
    starts = [k for k, l in enumerate(block.lines) if l.startswith("$ ")] + [len(block.lines)]
    targets = []
    for a, b in zip(starts, starts[1:]):
        # A `$` line's other text after a # is the command's own (an echo of "|  ##  |").
        command, status = exit_comment(block.lines[a][2:].strip())
        targets.append(Target(block.line + a, command, block.lines[a + 1:b], status))
    run_as = block.note("run as")
    if run_as:
        targets[0].command = run_as[0]
    return targets


def command_targets(block, problems, path):
    """A block of commands' commands, a `run as` note shortening one; its
    lines that are neither commands nor comments are refused."""
    found, others = commands_of(block)
    if others:
        problems.append(f"{path}:{others[0][0]}: {len(others)} line(s) in a block of commands are no command "
                        f"the check runs (show output after `$ COMMAND`; start a command with a program the "
                        f"check knows):\n" + "\n".join(f"  {line}: {text}" for line, text in others[:5]))
    targets = [Target(line, command, None, status) for line, command, status in found]
    for short in block.note("run as"):
        # Above one command: that command; above several: the one
        # the short form begins with (it adds limiting flags).
        hits = [t for t in targets if len(targets) == 1 or short.startswith(t.command + " ")]
        if len(hits) != 1:
            problems.append(f"{path}:{block.line}: 'run as: {short}' fits {len(hits)} of the block's "
                            f"{len(targets)} commands, not one")
            continue
        hits[0].command = short
    return targets


def targets_of(block, problems, path):
    """What a plain block runs; a block of neither commands nor output is refused."""
    if block.lines and block.lines[0].startswith("$ "):
        return output_targets(block)
    if is_commands_block(block):
        return command_targets(block, problems, path)
    problems.append(f"{path}:{block.line}: a block with neither a command nor `$ COMMAND` is not checked: "
                    f"show the command, give a listing its language, or say why it is not run "
                    f"(<!-- docs-check: not run: REASON -->)")
    return []


def check_target(target, block, runner, problems, where):
    """Runs one command; its exit status and output against the shown ones."""
    status, output, seconds = runner.run(target.command)
    shown, expected = target.shown, target.status
    m = EXIT.match(shown[-1].strip()) if shown else None
    if m:
        expected = int(m.group(1) or m.group(2))
        shown = shown[:-1]
    if status is None:
        problems.append(f"{where}: ran past {runner.timeout} s: {target.command}\n{tail(output)}")
        return
    if status != expected:
        problems.append(f"{where}: exit status {status} (expected {expected}): {target.command}\n{tail(output)}")
        return
    racy = block.note("racy")
    record = block.note("record")
    how = compare_shapes if record else compare
    missing, extra = how(shown or [], output.splitlines(), block.note("varies"), runner.tmp, racy)
    if shown is not None and (missing or extra):
        problems.append(f"{where}: the output shown is not what {'(by shape) ' if record else ''}"
                        f"{target.command} printed: {len(missing)} line(s) shown not printed, "
                        f"{len(extra)} printed not shown (mark lines left out with `...`)\n"
                        + "".join(f"  shown, not printed: {l}\n" for l in missing[:8])
                        + "".join(f"  printed, not shown: {l}\n" for l in extra[:8])
                        + ("  (a short run against a long run's output: mark the block a record, "
                           "<!-- docs-check: record: HOW -->, to compare it by shape)\n"
                           if block.note("run as") and not record else "")
                        + "  real output:\n" + tail(output, 40))
        return
    uncompared = sum(1 for l in shown or [] if l.strip() and any(re.search(r, l) for r in racy))
    said = f" ({uncompared} racy line(s) not compared)" if uncompared else ""
    said += f" (a record, by shape: {record[0]})" if record and shown is not None else ""
    print(f"{where}: ok in {seconds:.1f} s{said}: {target.command}")


def check_file(path, runner, listing):
    started = time.time()
    text = open(path, encoding="utf-8").read()
    problems, ran = [], 0
    for block in blocks_of(text):
        if block.lang:
            continue
        skip = block.note("not run")
        if skip:
            print(f"{path}:{block.line}: not run ({skip[0]}): {len(block.lines)} line(s)")
            continue
        for target in targets_of(block, problems, path):
            where = f"{path}:{target.line}"
            if listing:
                print(f"{where}: would run: {target.command}")
                continue
            check_target(target, block, runner, problems, where)
            ran += 1
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
    parser.add_argument("--port", type=int, help="the port a launcher takes when a command names none "
                        "(so that checks of several files run side by side); default: the launchers' 29500")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runner = Runner(source, os.path.abspath(args.build), args.timeout, args.times, args.port)
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
