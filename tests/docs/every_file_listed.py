#!/usr/bin/env python3
"""Every Markdown file git tracks is in the docs check's list (the arguments),
and every listed file exists: a new README cannot slip past the check.
The slides' decks (slides/decks/, checked by the slide tests) and npm's
packages are not pages of commands and are left out."""
import subprocess
import sys


def main():
    listed = set(sys.argv[1:])
    tracked = subprocess.run(["git", "ls-files", "*.md"], stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    tracked = {p for p in tracked if "node_modules/" not in p and not p.startswith("slides/decks/")}
    if not tracked:
        print("every_file_listed: git lists no Markdown file here (not a clone?)")
        return 1
    unlisted = sorted(tracked - listed)
    missing = sorted(listed - tracked)
    for p in unlisted:
        print(f"every_file_listed: {p} is not in tests/docs/CMakeLists.txt's docs_checked: add it")
    for p in missing:
        print(f"every_file_listed: {p} is listed in docs_checked but git tracks no such file")
    if not unlisted and not missing:
        print(f"every_file_listed: the {len(tracked)} Markdown files git tracks are all checked")
    return 1 if unlisted or missing else 0


if __name__ == "__main__":
    sys.exit(main())
