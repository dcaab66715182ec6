#!/usr/bin/env python3
"""scripts/docs_check.py on small Markdown files made here: a right output
passes; a wrong line, a printed line not shown, a wrong exit status, a
command that fails (in a pipe too) and a run past the timeout each fail,
naming the file's line; lines the check would not compare (output in a
block of commands, a block of neither) are refused; times are masked and
what `varies` notes name, nothing else; notes skip and shorten runs, and a
short run is compared with a long run's record by shape only when the block
says it is a record."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "docs_check.py")


def check(markdown, *extra):
    folder = tempfile.mkdtemp(prefix="docs_check_test_")
    path = os.path.join(folder, "README.md")
    with open(path, "w") as f:
        f.write(markdown)
    p = subprocess.run([sys.executable, SCRIPT, "--build", folder, *extra, path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


FENCE = "```"


class DocsCheck(unittest.TestCase):
    def test_shown_output_that_the_command_prints_passes(self):
        status, out = check(f"{FENCE}\n$ printf 'a 1\\nb 2\\n'\nb 2\na 1\n{FENCE}\n")
        self.assertEqual(status, 0, out)
        self.assertIn("1 command(s) run, 0 problem(s)", out)

    def test_a_line_the_command_does_not_print_fails_naming_it(self):
        status, out = check(f"text\n\n{FENCE}\n$ echo 'loss 0.25'\nloss 0.26\n{FENCE}\n")
        self.assertEqual(status, 1, out)
        self.assertIn("README.md:4:", out)
        self.assertIn("shown, not printed: loss 0.26", out)

    def test_times_are_masked_and_the_other_numbers_kept(self):
        ok = f"{FENCE}\n$ echo 'ring 4 steps 12.5 ms'\nring 4 steps 99.1 ms\n{FENCE}\n"
        self.assertEqual(check(ok)[0], 0)
        bad = f"{FENCE}\n$ echo 'ring 4 steps 12.5 ms'\nring 5 steps 12.5 ms\n{FENCE}\n"
        self.assertEqual(check(bad)[0], 1)

    def test_varies_note_masks_what_it_names(self):
        md = f"<!-- docs-check: varies: ratio (\\S+) -->\n{FENCE}\n$ echo 'ratio 1.18 of 4 ranks'\nratio 0.85 of 4 ranks\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md.replace("<!-- docs-check: varies: ratio (\\S+) -->\n", ""))[0], 1)

    def test_varies_note_masks_nothing_it_does_not_name(self):
        # The line's other numbers (a byte count beside a time) are compared.
        md = f"<!-- docs-check: varies: ratio (\\S+) -->\n{FENCE}\n$ echo 'ratio 1.18 of 4 ranks'\nratio 0.85 of 5 ranks\n{FENCE}\n"
        status, out = check(md)
        self.assertEqual(status, 1, out)
        self.assertIn("shown, not printed: ratio 0.85 of 5 ranks", out)
        # Without groups, the whole match is masked, and only it.
        md = f"<!-- docs-check: varies: [\\d.]+x -->\n{FENCE}\n$ echo 'ring 4096 1.18x'\nring 4096 0.91x\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md.replace("ring 4096 0.91x", "ring 4097 0.91x"))[0], 1)

    def test_a_timeline_drawn_in_text_is_masked_where_the_note_says(self):
        md = (f"<!-- docs-check: varies: (\\|[^|]*\\|) ([\\d.]+) \\.\\. ([\\d.]+) -->\n{FENCE}\n"
              f"$ echo 'bucket 0 |  ##  | 1.5 .. 2.0'\nbucket 0 |#     | 0.5 .. 9.0\n{FENCE}\n")
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md.replace("bucket 0 |#", "backward 0 |#"))[0], 1)

    def test_the_intra_op_threads_line_masks_the_machines_counts_only(self):
        line = "distlab: {} intra-op thread(s) per rank for {} rank(s) here ({} core(s) / 4 rank(s) on this machine)"
        md = f"{FENCE}\n$ echo '{line.format(4, 4, 16)}'\n{line.format(1, 4, 2)}\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)
        other_words = line.format(1, 4, 2).replace("per rank", "per process")
        self.assertEqual(check(f"{FENCE}\n$ echo '{line.format(4, 4, 16)}'\n{other_words}\n{FENCE}\n")[0], 1)
        other_ranks = line.format(1, 3, 2)
        self.assertEqual(check(f"{FENCE}\n$ echo '{line.format(4, 4, 16)}'\n{other_ranks}\n{FENCE}\n")[0], 1)

    def test_a_builds_program_named_bare_runs_in_a_block_of_commands_only(self):
        status, out = check("    distlab-nothing-here --flag\n")
        self.assertEqual(status, 1, out)
        self.assertIn("exit status 127", out)
        # In a block of output that quotes a program, it is not a command.
        status, out = check(f"{FENCE}\n$ echo 'Lesson 99: output'\nLesson 99: output\n"
                            f"distlab-nothing-here: a line it printed\n{FENCE}\n")
        self.assertEqual(status, 1, out)
        self.assertIn("1 command(s) run", out)
        self.assertNotIn("exit status 127", out)

    def test_exit_status_must_be_zero_or_the_shown_one(self):
        self.assertEqual(check("    python3 -c 'exit(3)'\n")[0], 1)
        self.assertEqual(check(f"{FENCE}\n$ sh -c 'echo no; exit 3'\nno\nexit status 3\n{FENCE}\n")[0], 0)
        self.assertEqual(check(f"{FENCE}\n$ sh -c 'echo no; exit 2'\nno\nexit status 3\n{FENCE}\n")[0], 1)

    def test_a_comment_names_the_status_a_command_exits_with(self):
        self.assertEqual(check("    python3 -c 'exit(1)'   # exits 1: on purpose\n")[0], 0)
        self.assertEqual(check("    python3 -c 'exit(0)'   # exits 1: on purpose\n")[0], 1)

    def test_a_dollar_line_may_name_its_status_in_a_comment(self):
        md = f"{FENCE}\n$ sh -c 'echo no; exit 3'   # exits 3: on purpose\nno\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md.replace("exits 3", "exits 2"))[0], 1)

    def test_torchruns_timestamps_are_masked(self):
        md = f"{FENCE}\n$ echo 'error at 2026-11-26_20:47:48'\nerror at 2025-01-02_03:04:05\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)

    def test_a_rounding_residue_is_masked_and_zero_or_a_larger_number_kept(self):
        md = f"{FENCE}\n$ echo 'largest difference 2.98e-08, 8.2e-10'\nlargest difference 1.49e-08, 9.1e-12\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)
        zero = f"{FENCE}\n$ echo 'largest difference 0.00e+00'\nlargest difference 1.49e-08\n{FENCE}\n"
        self.assertEqual(check(zero)[0], 1)
        large = f"{FENCE}\n$ echo 'loss 2.5e-03'\nloss 2.6e-03\n{FENCE}\n"
        self.assertEqual(check(large)[0], 1)

    def test_a_signed_time_is_masked_whole(self):
        md = f"{FENCE}\n$ echo 'rank 1 clock -57 us'\nrank 1 clock +12 us\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)

    def test_the_scratch_folder_is_removed_unless_kept(self):
        status, out = check("    python3 -c 'import os; print(os.getcwd()); exit(1)'\n")
        scratch = next(l.split("| ")[-1] for l in out.splitlines() if "docs_check_" in l and "| " in l)
        self.assertFalse(os.path.exists(scratch), out)
        status, out = check("    python3 -c 'print(1)'\n", "--keep")
        kept = out.split("the scratch folder is kept: ")[1].split()[0]
        self.assertTrue(os.path.isdir(kept), out)
        import shutil
        shutil.rmtree(kept)

    def test_an_output_block_may_hold_several_commands(self):
        md = f"{FENCE}\n$ echo one\none\n$ sh -c 'echo two; exit 1'\ntwo\nexit status 1\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md.replace("\ntwo\n", "\none\n"))[0], 1)

    def test_racy_lines_are_not_compared(self):
        md = f"<!-- docs-check: racy: saw: -->\n{FENCE}\n$ echo 'rank 1 saw: a'\nrank 2 saw: b\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md.replace("<!-- docs-check: racy: saw: -->\n", ""))[0], 1)

    def test_elisions_stand_for_output_not_shown(self):
        md = f"{FENCE}\n$ printf 'a\\nb\\nc\\n'\na\n...\n[... b, left out ...]\nc\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md.replace("...\n[... b, left out ...]\n", "[... b, left out ...]\n"))[0], 0)

    def test_a_printed_line_not_shown_fails(self):
        status, out = check(f"{FENCE}\n$ printf 'a\\nb\\nc\\n'\na\nc\n{FENCE}\n")
        self.assertEqual(status, 1, out)
        self.assertIn("printed, not shown: b", out)

    def test_an_elision_excuses_only_the_lines_where_it_stands(self):
        md = f"{FENCE}\n$ printf 'a\\nb\\nc\\nd\\n'\n...\nb\nc\n{FENCE}\n"
        status, out = check(md)
        self.assertEqual(status, 1, out)
        self.assertIn("printed, not shown: d", out)
        self.assertNotIn("printed, not shown: a", out)
        self.assertEqual(check(md.replace("b\nc\n", "b\nc\n...\n"))[0], 0)

    def test_an_elision_stands_for_a_ranks_lines_in_any_interleaving(self):
        # Rank 1's lines left out after its first, printed before or after rank 0's.
        md = (f"{FENCE}\n$ printf '[rank 1] a\\n[rank 0] x\\n[rank 1] b\\n[rank 0] y\\n'\n"
              f"[rank 1] a\n...\n[rank 0] x\n[rank 0] y\n{FENCE}\n")
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md.replace("[rank 1] b\\n[rank 0] y", "[rank 0] y\\n[rank 1] b"))[0], 0)
        # Rank 0's line left out where no mark stands among rank 0's lines fails.
        bad = (f"{FENCE}\n$ printf '[rank 1] a\\n[rank 0] x\\n[rank 0] z\\n[rank 0] y\\n'\n"
               f"...\n[rank 1] a\n[rank 0] x\n[rank 0] y\n{FENCE}\n")
        self.assertEqual(check(bad)[0], 1)

    def test_lines_printed_in_another_order_pass(self):
        self.assertEqual(check(f"{FENCE}\n$ printf 'a\\nb\\nc\\n'\nc\na\nb\n{FENCE}\n")[0], 0)

    def test_a_number_after_a_colon_is_compared(self):
        md = f"{FENCE}\n$ echo 'master localhost:29500'\nmaster localhost:29501\n{FENCE}\n"
        self.assertEqual(check(md)[0], 1)
        self.assertEqual(check(md.replace(":29501", ":29500"))[0], 0)

    def test_port_sets_the_launchers_default_port_and_none_unsets_it(self):
        md = f"{FENCE}\n$ echo \"at $MASTER_PORT/$PET_MASTER_PORT\"\nat 29877/29877\n{FENCE}\n"
        self.assertEqual(check(md, "--port", "29877")[0], 0)
        # Without --port the launchers' own default (29500), whatever the caller exported.
        os.environ["MASTER_PORT"] = "1234"
        try:
            self.assertEqual(check(md.replace("at 29877/29877", "at /"))[0], 0)
        finally:
            del os.environ["MASTER_PORT"]

    def test_a_failing_program_in_a_pipe_fails(self):
        status, out = check("    python3 -c 'exit(3)' | cat\n")
        self.assertEqual(status, 1, out)
        self.assertIn("exit status 3", out)

    def test_output_in_a_block_of_commands_is_refused(self):
        status, out = check("    python3 -c 'print(1)'\n    1\n    # a comment is fine\n")
        self.assertEqual(status, 1, out)
        self.assertIn("README.md:2: 1 line(s) in a block of commands", out)

    def test_a_line_starting_no_known_program_is_refused(self):
        status, out = check("    python3 -c 'print(1)'\n    sleep 0\n")
        self.assertEqual(status, 1, out)
        self.assertIn("2: sleep 0", out)

    def test_a_block_of_neither_commands_nor_output_needs_a_reason(self):
        status, out = check(f"{FENCE}\nrank 0: a line some run printed\n{FENCE}\n")
        self.assertEqual(status, 1, out)
        self.assertIn("README.md:2: a block with neither a command nor `$ COMMAND`", out)
        status, out = check(f"<!-- docs-check: not run: a drawing -->\n{FENCE}\nrank 0 -> rank 1\n{FENCE}\n")
        self.assertEqual(status, 0, out)
        self.assertIn("not run (a drawing): 1 line(s)", out)

    def test_a_short_run_is_compared_whole_with_a_long_runs_output_unless_a_record(self):
        md = (f"<!-- docs-check: run as: echo 'epoch 1 of 1, loss 7.5' -->\n{FENCE}\n$ long_run --epochs 3\n"
              f"epoch 1 of 3, loss 6.1\nepoch 2 of 3, loss 5.2\nepoch 3 of 3, loss 4.9\n{FENCE}\n")
        status, out = check(md)
        self.assertEqual(status, 1, out)
        self.assertIn("printed, not shown: epoch 1 of 1, loss 7.5", out)
        self.assertIn("mark the block a record", out)
        record = "<!-- docs-check: record: the 2-core VM, 2026-11-28 -->\n"
        status, out = check(record + md)
        self.assertEqual(status, 0, out)
        self.assertIn("a record, by shape", out)
        # By shape: the words count, and every kind of line the short run prints is shown.
        self.assertEqual(check(record + md.replace(", loss 4.9", ", ppl 4.9"))[0], 1)
        self.assertEqual(check(record + md.replace("echo 'epoch 1 of 1, loss 7.5'",
                                                    "printf 'epoch 1 of 1, loss 7.5\\ndone\\n'"))[0], 1)

    def test_a_record_compares_numbers_with_a_suffix_as_numbers(self):
        md = (f"<!-- docs-check: record: a long run -->\n<!-- docs-check: run as: echo 'layer 4 135K' -->\n"
              f"{FENCE}\n$ long_run\nlayer 4 2142720\n{FENCE}\n")
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md.replace("layer 4 2142720", "model 4 2142720"))[0], 1)

    def test_racy_lines_not_compared_are_said(self):
        md = f"<!-- docs-check: racy: saw: -->\n{FENCE}\n$ echo 'rank 1 saw: a'\nrank 2 saw: b\n{FENCE}\n"
        status, out = check(md)
        self.assertEqual(status, 0, out)
        self.assertIn("1 racy line(s) not compared", out)

    def test_a_run_past_the_timeout_fails(self):
        status, out = check("    python3 -c 'import time; time.sleep(5)'\n", "--timeout", "1")
        self.assertEqual(status, 1, out)
        self.assertIn("ran past 1.0 s", out)

    def test_notes_skip_and_shorten(self):
        md = ("<!-- docs-check: not run: it needs a GPU -->\n\n    python3 -c 'exit(1)'\n\n"
              "<!-- docs-check: run as: echo short -->\n\n    python3 -c 'import time; time.sleep(60)'\n")
        status, out = check(md, "--timeout", "5")
        self.assertEqual(status, 0, out)
        self.assertIn("not run (it needs a GPU)", out)
        self.assertIn("ok in", out)

    def test_run_as_above_several_commands_shortens_the_one_it_extends(self):
        md = ("<!-- docs-check: run as: python3 -c 'import sys; print(sys.argv)' --quick -->\n\n"
              "    python3 -c 'print(1)'\n    python3 -c 'import sys; print(sys.argv)'\n")
        status, out = check(md)
        self.assertEqual(status, 0, out)
        self.assertIn("--quick", out)
        bad = "<!-- docs-check: run as: python3 -c 'exit(0)' --quick -->\n\n    python3 -c 'print(1)'\n    python3 -c 'print(2)'\n"
        self.assertEqual(check(bad)[0], 1)

    def test_tmp_paths_are_the_scratch_folders_own(self):
        md = f"{FENCE}\n$ sh -c 'mkdir /tmp/docs_x && echo made /tmp/docs_x'\nmade /tmp/docs_x\n{FENCE}\n"
        self.assertEqual(check(md)[0], 0)
        self.assertEqual(check(md)[0], 0)  # a second run starts from an empty tmp/ again
        self.assertFalse(os.path.exists("/tmp/docs_x"))

    def test_listings_with_a_language_are_not_run(self):
        self.assertEqual(check(f"{FENCE}json\n$ false\n{FENCE}\n{FENCE}sh\nbuild/x\n{FENCE}\n")[0], 0)


if __name__ == "__main__":
    unittest.main()
