"""Tests of resumecheck.trace, resumecheck.census and exec_args (no torch needed)."""

import os
import shutil
import tempfile
import unittest

import numpy as np

import resumecheck
from resumecheck import census, trace


class TestTrace(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rc_py_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_exact_floats(self):
        xs = [0.1, 1 / 3, 5e-324, -0.0, 1e300]
        with trace.TraceWriter(self.tmp, floats=("loss",), ints=("tokens",)) as t:
            for i, x in enumerate(xs, 1):
                t.row(i, loss=x, tokens=i * 10)
        lines = open(os.path.join(self.tmp, "trace.csv")).read().splitlines()
        self.assertEqual(lines[0], "step,loss,loss_hex,tokens")
        for x, line in zip(xs, lines[1:]):
            cells = line.split(",")
            got = float.fromhex(cells[2])
            self.assertEqual(got.hex(), x.hex())  # exact, sign of zero included
            self.assertEqual(cells[1], "%.9g" % x)
        # negative control: the decimal copy alone is not exact
        self.assertNotEqual(float("%.9g" % (1 / 3)), 1 / 3)

    def test_refusals(self):
        t = trace.TraceWriter(self.tmp, floats=("loss",))
        t.row(2, loss=1.0)
        with self.assertRaises(ValueError):
            t.row(2, loss=1.0)  # steps ascend
        with self.assertRaises(ValueError):
            t.row(3, lr=1.0)  # the declared columns
        t.close()
        with self.assertRaises(ValueError):
            trace.TraceWriter(self.tmp, floats=("step",))


class TestCensus(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rc_py_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_format(self):
        p = census.write(self.tmp, 3, {"iteration": 3, "loss_scale": 0.1, "w": np.arange(4, dtype=np.float32),
                                       "pid": ("local", 123, "the process id")}, rank=1)
        self.assertEqual(p, os.path.join(self.tmp, "census", "iter_0000003.rank1.txt"))
        lines = open(p).read().splitlines()
        self.assertTrue(lines[0].startswith("#"))
        self.assertEqual(lines[1], "iteration\tsaved\t3")
        self.assertEqual(lines[2], "loss_scale\tsaved\t0.10000000000000001")
        self.assertRegex(lines[3], r"^w\tsaved\tfp=[0-9a-f]{16}$")
        self.assertEqual(lines[4], "pid\tlocal\t123\tthe process id")
        # fingerprints follow the bytes, and the dtype
        a = census.fingerprint(np.arange(4, dtype=np.float32))
        self.assertEqual(a, census.fingerprint(np.arange(4, dtype=np.float32)))
        self.assertNotEqual(a, census.fingerprint(np.arange(4, dtype=np.float64)))
        b = np.arange(4, dtype=np.float32)
        b[3] = np.nextafter(b[3], np.float32(9))
        self.assertNotEqual(a, census.fingerprint(b))

    def test_refusals(self):
        for bad in ({"a\tb": 1}, {"a": "x\ny"}, {"a": ("maybe", 1)}):
            with self.assertRaises(ValueError):
                census.write(self.tmp, 1, bad)
        with self.assertRaises(ValueError):
            census.write(self.tmp, 1, {"a": 1}, phase="before-step")  # the phases `run` reads, only

    def test_first_step_file(self):
        # the name `run` reads: iter_%07d.rank%d.first-step.txt, K the last completed step
        p = census.write(self.tmp, 3, {"iteration": 3}, rank=2, phase="first-step")
        self.assertEqual(p, os.path.join(self.tmp, "census", "iter_0000003.rank2.first-step.txt"))
        q = census.write(self.tmp, 3, {"iteration": 3}, rank=2)  # control: the after-save/after-load file is another
        self.assertEqual(os.path.basename(q), "iter_0000003.rank2.txt")
        with open(p) as f:
            self.assertEqual(f.read().splitlines()[1:], ["iteration\tsaved\t3"])

    def test_state_fields_of_a_dict(self):
        counters = {"consumed_samples": 48, "phase": {"name": "warm\tup", "seen": [1, 2.5]}, "empty": {}, 7: None}
        f = census.state_fields(3, {"counters": counters}, rng=False)
        self.assertEqual(list(f), ["iteration", "state.counters.consumed_samples", "state.counters.phase.name",
                                   "state.counters.phase.seen.0", "state.counters.phase.seen.1", "state.counters.empty",
                                   "state.counters.7"])
        self.assertEqual(census.format_value(f["state.counters.phase.seen.1"]), "2.5")
        self.assertEqual(census.format_value(f["state.counters.7"]), "none")
        # a str a line cannot hold goes by fingerprint, and still follows the value
        name = census.format_value(f["state.counters.phase.name"])
        self.assertRegex(name, r"^fp=[0-9a-f]{16}$")
        counters["phase"]["name"] = "warm\tdown"
        self.assertNotEqual(census.format_value(census.state_fields(3, {"counters": counters}, rng=False)["state.counters.phase.name"]), name)
        census.write_state(self.tmp, 3, {"counters": counters}, rng=False)  # every value writes
        # two keys that read alike are refused, not written twice
        with self.assertRaises(resumecheck.CheckpointError):
            census.state_fields(3, {"c": {"a.b": 1, "a": {"b": 2}}}, rng=False)


class TestExecArgs(unittest.TestCase):
    def test_parse(self):
        a = resumecheck.exec_args(["--steps", "6", "--stop-at", "3", "--save-at", "3", "--out", "o", "--leg", "save"])
        self.assertEqual((a.steps, a.stop_at, a.save_at, a.resume_from, a.out, a.leg), (6, 3, [3], None, "o", "save"))
        a = resumecheck.exec_args(["--steps", "6", "--save-at", "3,6", "--resume-from=d/iter_0000003", "--out", "o"])
        self.assertEqual((a.stop_at, a.save_at, a.resume_from), (6, [3, 6], "d/iter_0000003"))
        for bad in (["--steps", "6", "--save-at", "6,3", "--out", "o"], ["--steps", "6", "--stop-at", "7", "--out", "o"],
                    ["--out", "o"]):
            with self.assertRaises(SystemExit):
                resumecheck.exec_args(bad)

    def test_template_flags(self):
        for ph in ("{steps}", "{stop_at}", "{save_at}", "--resume-from={resume_from}", "{out}", "{leg}"):
            self.assertIn(ph, resumecheck.TRAIN_CMD_FLAGS.split())


if __name__ == "__main__":
    unittest.main()
