#!/usr/bin/env python3
"""scripts/docs_numbers.py on small files made here: a count equal to the
build's passes; a different one fails naming the file, the line and both
numbers; a sentence reworded away (or stated twice) fails too."""
import importlib.util
import os
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "docs_numbers.py")
spec = importlib.util.spec_from_file_location("docs_numbers", SCRIPT)
docs_numbers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(docs_numbers)

SENTENCES = [("README.md", r"(?P<n>\d+) tests \((?P<g>\d+) GoogleTest executables",
              {"n": "tests", "g": "gtest executables"})]
FACTS = {"tests": 730, "gtest executables": 21}


def check(text):
    folder = tempfile.mkdtemp(prefix="docs_numbers_test_")
    with open(os.path.join(folder, "README.md"), "w") as f:
        f.write(text)
    return docs_numbers.check(folder, FACTS, SENTENCES)


class DocsNumbers(unittest.TestCase):
    def test_the_builds_counts_pass(self):
        problems, checked = check("# T\n\n730 tests (21 GoogleTest executables, ...)\n")
        self.assertEqual(problems, [])
        self.assertEqual(checked, 2)

    def test_a_stale_count_fails_naming_line_and_both_numbers(self):
        problems, _ = check("# T\n\n729 tests (21 GoogleTest executables, ...)\n")
        self.assertEqual(len(problems), 1)
        self.assertIn("README.md:3: says 729 tests, the build has 730", problems[0])

    def test_a_reworded_sentence_fails(self):
        problems, checked = check("# T\n\nseven hundred tests\n")
        self.assertEqual(checked, 0)
        self.assertIn("matches 0 times", problems[0])

    def test_a_sentence_stated_twice_fails(self):
        problems, _ = check("730 tests (21 GoogleTest executables)\n730 tests (21 GoogleTest executables)\n")
        self.assertIn("matches 2 times", problems[0])

    def test_a_count_the_build_lacks_fails(self):
        folder = tempfile.mkdtemp(prefix="docs_numbers_test_")
        with open(os.path.join(folder, "x.md"), "w") as f:
            f.write("15 decks\n")
        problems, _ = docs_numbers.check(folder, {"tests": 1}, [("x.md", r"(?P<n>\d+) decks", {"n": "decks"})])
        self.assertIn("no count of decks", problems[0])


if __name__ == "__main__":
    unittest.main()
