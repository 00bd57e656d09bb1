"""Tests of resumecheck.torchfmt's flattening and its safetensors writer
(the comparison itself: tests/py_compare_torch.sh)."""

import json
import os
import shutil
import struct
import tempfile
import unittest

import torch

from resumecheck import torchfmt
from resumecheck.errors import CheckpointError


class TestFlatten(unittest.TestCase):
    def test_names(self):
        sd = {
            "model": {"decoder.layers.0.weight": torch.zeros(2)},
            "optimizer": {"state": {0: {"exp_avg": torch.ones(2)}}, "param_groups": [{"lr": 0.1, "params": [0]}]},
            "iteration": 7,
            "a/b": 1,
            "empty": {},
        }
        f = torchfmt.flatten(sd)
        self.assertEqual(sorted(f.tensors), ["model/decoder.layers.0.weight", "optimizer/state/0/exp_avg"])
        self.assertEqual(f.values["optimizer/param_groups/0/lr"]["hex"], (0.1).hex())
        self.assertEqual(f.values["optimizer/param_groups/0/params/0"], {"type": "int", "value": 0})
        self.assertEqual(f.values["iteration"], {"type": "int", "value": 7})
        self.assertIn("a%2Fb", f.values)  # a '/' in a key is escaped, not nesting
        self.assertEqual(f.values["empty"], {"type": "dict", "len": 0})
        # negative control: nesting does make a '/'
        self.assertIn("a/b", torchfmt.flatten({"a": {"b": 1}}).values)

    def test_int_and_str_keys_read_alike(self):
        # DCP gives an optimizer's int state keys back as str
        a = torchfmt.flatten({"state": {0: torch.zeros(1)}})
        b = torchfmt.flatten({"state": {"0": torch.zeros(1)}})
        self.assertEqual(list(a.tensors), list(b.tensors))
        with self.assertRaises(CheckpointError) as e:
            torchfmt.flatten({"state": {0: 1, "0": 2}})
        self.assertEqual(e.exception.exit_code, 65)

    def test_floats_by_bits(self):
        pos, neg = torchfmt.flatten({"x": 0.0}).values["x"], torchfmt.flatten({"x": -0.0}).values["x"]
        self.assertNotEqual(pos, neg)
        self.assertEqual(0.0, -0.0)  # negative control: as values they are equal
        nan1 = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
        a, b = torchfmt.flatten({"x": float("nan")}).values["x"], torchfmt.flatten({"x": nan1}).values["x"]
        self.assertNotEqual(a, b)
        self.assertEqual(float("nan").hex(), nan1.hex())  # float.hex alone would not tell them apart

    def test_views_noted(self):
        t = torch.arange(6.0).reshape(2, 3)
        f = torchfmt.flatten({"w": t.t(), "c": t.clone()})
        self.assertEqual(f.views, ["w"])


class TestSafetensors(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rc_py_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def read(self, p):
        with open(p, "rb") as f:
            data = f.read()
        (n,) = struct.unpack("<Q", data[:8])
        return json.loads(data[8 : 8 + n]), data[8 + n :]

    def test_bytes_and_dtypes(self):
        t = torch.arange(6.0).reshape(2, 3)
        p = os.path.join(self.tmp, "a.safetensors")
        torchfmt.write_safetensors(p, {"w": t.t(), "b": torch.tensor([1.5], dtype=torch.bfloat16), "c": torch.ones(2, dtype=torch.complex64)})
        h, data = self.read(p)
        self.assertEqual(list(h), ["b", "c", "w"])  # name order
        self.assertEqual(h["b"]["dtype"], "BF16")
        self.assertEqual((h["c"]["dtype"], h["c"]["shape"]), ("F32", [2, 2]))
        self.assertEqual((h["w"]["dtype"], h["w"]["shape"]), ("F32", [3, 2]))
        s, e = h["w"]["data_offsets"]
        # the logical (transposed) values, not the storage's order
        self.assertEqual(data[s:e], t.t().contiguous().numpy().tobytes())
        self.assertNotEqual(data[s:e], t.numpy().tobytes())


if __name__ == "__main__":
    unittest.main()
