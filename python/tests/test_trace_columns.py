"""resumecheck.trace's column declaration for `run --noise calibrated`
(docs/exec-trainer.md): exact= and noisy= write OUT/trace_columns.json,
which run reads to tell exact checks from calibrated ones; no declaration,
no file (run's defaults apply); names that are not columns, or a name both
exact and noisy, are refused before anything is written."""

import json
import os
import shutil
import tempfile
import unittest

from resumecheck import trace


class TestTraceColumns(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rc_py_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_declared(self):
        with trace.TraceWriter(self.tmp, floats=("loss", "lr"), ints=("batch",), exact=("lr", "batch"), noisy=("loss",)) as t:
            t.row(1, loss=1.0, lr=0.1, batch=7)
        doc = json.load(open(os.path.join(self.tmp, trace.COLUMNS_NAME)))
        self.assertEqual(doc["schema"], "resumecheck.trace-columns")
        self.assertEqual(doc["schema_version"], 1)
        self.assertEqual(doc["exact"], ["lr", "batch"])
        self.assertEqual(doc["noisy"], ["loss"])

    def test_undeclared(self):  # control: nothing declared, nothing written
        with trace.TraceWriter(self.tmp, floats=("loss",)) as t:
            t.row(1, loss=1.0)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, trace.COLUMNS_NAME)))

    def test_refusals(self):
        with self.assertRaises(ValueError):
            trace.TraceWriter(self.tmp, floats=("loss",), exact=("lr",))  # not a column
        with self.assertRaises(ValueError):
            trace.TraceWriter(self.tmp, floats=("loss",), exact=("loss",), noisy=("loss",))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, trace.COLUMNS_NAME)))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "trace.csv")))


if __name__ == "__main__":
    unittest.main()
