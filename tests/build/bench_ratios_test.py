#!/usr/bin/env python3
"""scripts/bench_ratios.py's own logic, on text written here: the record's
table read (a bad row or a key listed twice refused naming it), a ratio
against its record and margin both ways, and the numbers read out of the
benchmarks' own output (lines copied from real runs)."""
import importlib.util
import os
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "bench_ratios.py")
spec = importlib.util.spec_from_file_location("bench_ratios", SCRIPT)
bench_ratios = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_ratios)

RECORD = """# Ratios

Some prose | with a bar.

| key | what | better | recorded | margin | spread |
|---|---|---|---|---|---|
| `collective.all_reduce.ring.16M` | ring over gloo | higher | 1.05 | 0.20 | 0.98-1.10 |
| `ddp.distlab_over_pytorch.2p` | DDP step | lower | 1.02 | 0.15 | 0.87-1.10 |

| other | table |
|---|---|
| `not.a.ratio` | x |
"""

# distlab-bench collective under distlab-run, its summary (prefixes kept).
COLLECTIVE = """[rank 0] # distlab-bench collective: all_reduce, backend gloo, 4 ranks, device cpu
[rank 0] #       size         count      type   redop   root         algorithm        time     algbw     busbw   #wrong
[rank 0]     16777216       4194304     float     sum     -1            native     60225.2     0.279     0.418        0
[rank 0] #
[rank 0] # busbw against native (gloo), per size:
[rank 0] #       size  reduce_broadcast              ring  halving_doubling
[rank 0]          16M              1.01              1.03              0.97
[rank 0]          32M              0.82              0.99              0.98
[rank 0] # #wrong in total: 0  OK
"""

# bench/ddp_vs_pytorch.py, two process counts.
DDP = """# DDP; 6 x Linear(2048)+ReLU = 25178112 parameters (100.7 MB of gradients), 16 rows per rank
nproc  distlab_ms   distlab_range pytorch_ms   pytorch_range   ratio pair_med    pair_range  runs (distlab/pytorch ms)
2          2534.3       2442-2710     2495.8       2283-2797   1.015    1.017   0.873-1.102  2442/2797 2534/2492 2516/2283
4          2997.4       2328-4551     2864.3       2100-3655   1.046    1.051   0.957-1.245  4551/3655 2997/3132
# 2 processes: DistLab / PyTorch = 1.015 (median of the pairs' ratios 1.017), target <= 0.9 NOT met
"""


class Record(unittest.TestCase):
    def test_rows_of_the_table_with_the_columns_named(self):
        rows = bench_ratios.parse_record(RECORD)
        self.assertEqual([(r.key, r.better, r.recorded, r.margin) for r in rows],
                         [("collective.all_reduce.ring.16M", "higher", 1.05, 0.20),
                          ("ddp.distlab_over_pytorch.2p", "lower", 1.02, 0.15)])

    def test_a_row_that_says_neither_higher_nor_lower_is_refused_naming_its_line(self):
        with self.assertRaisesRegex(ValueError, r"line 7 of the record: .*better is 'up'"):
            bench_ratios.parse_record(RECORD.replace("| higher |", "| up |"))

    def test_a_recorded_value_that_is_not_a_number_is_refused(self):
        with self.assertRaisesRegex(ValueError, "line 8 of the record"):
            bench_ratios.parse_record(RECORD.replace("| 1.02 |", "| about 1 |"))

    def test_a_key_listed_twice_is_refused(self):
        twice = RECORD.replace("`ddp.distlab_over_pytorch.2p`", "`collective.all_reduce.ring.16M`")
        with self.assertRaisesRegex(ValueError, r"lists collective\.all_reduce\.ring\.16M twice"):
            bench_ratios.parse_record(twice)


class Margin(unittest.TestCase):
    def test_higher_is_better_fails_only_below_the_margin(self):
        row = bench_ratios.Row("k", "higher", 1.0, 0.2)
        self.assertFalse(bench_ratios.worse_than_record(row, 0.81))
        self.assertFalse(bench_ratios.worse_than_record(row, 1.5))
        self.assertTrue(bench_ratios.worse_than_record(row, 0.79))

    def test_lower_is_better_fails_only_above_the_margin(self):
        row = bench_ratios.Row("k", "lower", 1.0, 0.2)
        self.assertFalse(bench_ratios.worse_than_record(row, 1.19))
        self.assertFalse(bench_ratios.worse_than_record(row, 0.5))
        self.assertTrue(bench_ratios.worse_than_record(row, 1.21))

    def test_the_median_of_the_runs_is_compared_and_a_missing_ratio_is_said(self):
        rows = bench_ratios.parse_record(RECORD)
        # ring: median 0.80 < 1.05 x 0.8 = 0.84 (one good run does not save it); DDP not measured.
        lines, failed = bench_ratios.compare(rows, {"collective.all_reduce.ring.16M": [0.80, 1.20, 0.70]})
        self.assertEqual(failed, 1)
        self.assertRegex(lines[1], r"^collective\.all_reduce\.ring\.16M\s+higher\s+1\.05\s+0\.80\s+20%\s+"
                                   r"0\.70-1\.20\s+WORSE$")
        self.assertRegex(lines[2], r"^ddp\.distlab_over_pytorch\.2p .* not measured$")
        lines, failed = bench_ratios.compare(rows, {"collective.all_reduce.ring.16M": [0.90, 1.20, 0.70],
                                                    "ddp.distlab_over_pytorch.2p": [1.10]})
        self.assertEqual(failed, 0)
        self.assertTrue(lines[1].endswith(" ok") and lines[2].endswith(" ok"), lines)


class BenchmarkOutput(unittest.TestCase):
    def test_the_collective_summary_by_algorithm_and_size(self):
        self.assertEqual(bench_ratios.parse_collective(COLLECTIVE), {
            "collective.all_reduce.reduce_broadcast.16M": 1.01, "collective.all_reduce.ring.16M": 1.03,
            "collective.all_reduce.halving_doubling.16M": 0.97, "collective.all_reduce.reduce_broadcast.32M": 0.82,
            "collective.all_reduce.ring.32M": 0.99, "collective.all_reduce.halving_doubling.32M": 0.98})

    def test_the_ddp_pairs_each_as_a_ratio(self):
        found = bench_ratios.parse_ddp(DDP)
        self.assertEqual(sorted(found), ["ddp.distlab_over_pytorch.2p", "ddp.distlab_over_pytorch.4p"])
        self.assertEqual([round(x, 3) for x in found["ddp.distlab_over_pytorch.2p"]], [0.873, 1.017, 1.102])
        self.assertEqual(len(found["ddp.distlab_over_pytorch.4p"]), 2)

    def test_a_trace_load_line_and_a_run_without_one(self):
        line = "viewer 200000 events in 312 ms, peak RSS 41 MB (read 250 ms, finalize 62 ms; 12 rows, 79999 arrows)"
        self.assertEqual(bench_ratios.parse_trace_load(line), (312.0, 41.0))
        with self.assertRaisesRegex(ValueError, "no timing line"):
            bench_ratios.parse_trace_load("viewer refused after peak RSS 5 MB")


if __name__ == "__main__":
    unittest.main()
