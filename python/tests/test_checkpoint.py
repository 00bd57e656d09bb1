"""Tests of resumecheck.checkpoint: byte-identical saves, the save/load round
trip (model, optimizer, scheduler, grad scaler, every RNG, data position),
COMPLETE last, and the refusals. torch is required: without it these fail
(CI installs it; docs/pytorch.md says how)."""

import copy
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np

import torch  # required, not optional here: a missing torch fails the suite

from resumecheck import CheckpointError, checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)


def make(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(4, 8))
    model.add_module("act", torch.nn.ReLU())
    model.add_module("fc2", torch.nn.Linear(8, 3))
    model.register_buffer("count", torch.tensor([7], dtype=torch.int64))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.8, 0.9))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 / (1 + t))
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0, growth_interval=2)
    return model, opt, sched, scaler


def train(model, opt, sched, scaler, steps):
    for _ in range(steps):
        loss = model(torch.randn(5, 4)).pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()


def files(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


def same(a, b):
    """Equal state: dicts by key (whatever their order), tensors by dtype, shape and bits."""
    if isinstance(a, dict):
        return isinstance(b, dict) and sorted(a, key=str) == sorted(b, key=str) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return type(a) is type(b) and a == b


def draws():
    return (torch.rand(4).tolist(), np.random.random(3).tolist(), [random.random() for _ in range(3)])


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rc_py_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def save(self, root, step=3, objs=None, **kw):
        m, o, s, g = objs
        return checkpoint.save(os.path.join(self.tmp, root), step, model=m, optimizer=o, scheduler=s, scaler=g,
                               data_position={"consumed_samples": 48, "epoch": 0}, **kw)


class TestBytes(Base):
    def two_saves(self):
        objs = make()
        train(*objs, 2)
        a = self.save("a", objs=objs)
        time.sleep(1.1)  # object times, if tracked, tick in seconds
        b = self.save("b", objs=objs)
        return files(a), files(b)

    def test_two_saves_byte_identical(self):
        fa, fb = self.two_saves()
        self.assertEqual(sorted(fa), ["COMPLETE", "args.json", "manifest.json", "shard_00000_of_00001.h5"])
        for n in ("shard_00000_of_00001.h5", "manifest.json", "COMPLETE"):
            self.assertEqual(fa[n], fb[n], n)

    def test_negative_control_track_times(self):
        # with object time tracking switched back on the same check fails
        os.environ["RC_PY_TEST_TRACK_TIMES"] = "1"
        try:
            fa, fb = self.two_saves()
        finally:
            del os.environ["RC_PY_TEST_TRACK_TIMES"]
        self.assertNotEqual(fa["shard_00000_of_00001.h5"], fb["shard_00000_of_00001.h5"])

    def test_one_element_changes_the_shard(self):
        objs = make()
        a = files(self.save("a", objs=objs))
        with torch.no_grad():
            objs[0].fc2.bias[1] += 1.0
        b = files(self.save("b", objs=objs))
        self.assertNotEqual(a["shard_00000_of_00001.h5"], b["shard_00000_of_00001.h5"])

    def test_manifest_and_complete(self):
        objs = make()
        train(*objs, 1)
        d = self.save("a", objs=objs)
        text = open(os.path.join(d, "manifest.json"), "rb").read()
        man = json.loads(text)
        shard = man["shards"][0]
        raw = open(os.path.join(d, shard["file"]), "rb").read()
        self.assertEqual(shard["sha256"], hashlib.sha256(raw).hexdigest())
        self.assertEqual(shard["bytes"], len(raw))
        self.assertEqual(open(os.path.join(d, "COMPLETE"), "rb").read(),
                         (hashlib.sha256(text).hexdigest() + "  manifest.json\n").encode())
        paths = [x["path"] for x in shard["datasets"]]
        for p in ("/model/fc1/weight", "/model/count", "/optimizer/exp_avg/fc1/weight", "/optimizer/exp_avg_sq/fc2/bias",
                  "/optimizer/step/fc2/bias", "/optimizer/param_groups/0/lr", "/scheduler/last_epoch",
                  "/grad_scaler/scale", "/rng/torch_cpu", "/rng/numpy/keys", "/rng/python/state", "/data/consumed_samples"):
            self.assertIn(p, paths)
        with h5py.File(os.path.join(d, shard["file"]), "r") as f:
            for x in shard["datasets"]:
                a = np.asarray(f[x["path"]][()])
                self.assertEqual(hashlib.sha256(a.tobytes()).hexdigest(), x["sha256"], x["path"])
                self.assertEqual(list(a.shape), x["shape"])
            self.assertEqual(f["rng/torch_cpu"].dtype, np.uint8)
            self.assertEqual(int(f["meta"].attrs["iteration"]), 3)


class TestRoundTrip(Base):
    def test_round_trip(self):
        objs = make()
        train(*objs, 3)
        d = self.save("a", objs=objs, extra={"tokens": np.arange(3, dtype=np.int64)})
        want_sd = [copy.deepcopy(o.state_dict()) for o in objs]  # state_dict() holds the live tensors
        want_draws = draws()
        # move everything on, then load
        train(*objs, 2)
        random.seed(99)
        np.random.seed(99)
        torch.manual_seed(99)
        got = checkpoint.load(d, model=objs[0], optimizer=objs[1], scheduler=objs[2], scaler=objs[3])
        self.assertEqual(got["iteration"], 3)
        self.assertEqual(got["data_position"], {"consumed_samples": 48, "epoch": 0})
        self.assertEqual(got["extra"]["tokens"].tolist(), [0, 1, 2])
        self.assertEqual(draws(), want_draws)
        self.assertFalse(same(objs[1].state_dict(), make()[1].state_dict()))  # control: a fresh optimizer differs
        for obj, want in zip(objs, want_sd):
            self.assertTrue(same(obj.state_dict(), want), f"{type(obj).__name__}: {obj.state_dict()} vs {want}")
        # a second save of the loaded state is the first, byte for byte
        random.seed(5)
        np.random.seed(5)
        torch.manual_seed(5)
        st = checkpoint.rng_state()
        again = files(self.save("b", objs=objs, extra={"tokens": np.arange(3, dtype=np.int64)}))
        checkpoint.set_rng_state(st)
        checkpoint.load(d, model=objs[0], optimizer=objs[1], scheduler=objs[2], scaler=objs[3])
        c = files(self.save("c", objs=objs, extra={"tokens": np.arange(3, dtype=np.int64)}))
        self.assertEqual(c["shard_00000_of_00001.h5"], files(d)["shard_00000_of_00001.h5"])
        self.assertNotEqual(again["shard_00000_of_00001.h5"], c["shard_00000_of_00001.h5"])  # other RNG states

    def test_negative_control_rng_not_loaded(self):
        objs = make()
        d = self.save("a", objs=objs)
        want = draws()
        torch.manual_seed(99)
        np.random.seed(99)
        random.seed(99)
        checkpoint.load(d, model=objs[0], rng=False)
        self.assertNotEqual(draws(), want)

    def test_bfloat16_and_python_state(self):
        m = torch.nn.Linear(3, 2).to(torch.bfloat16)
        d = checkpoint.save(os.path.join(self.tmp, "bf"), 1, model=m, rng=False, extra={"flag": True, "name": "x", "f": 0.1})
        w = m.weight.detach().clone()
        with torch.no_grad():
            m.weight.zero_()
        got = checkpoint.load(d, model=m, rng=False)
        self.assertTrue(torch.equal(m.weight, w))
        self.assertEqual(m.weight.dtype, torch.bfloat16)
        self.assertEqual(got["extra"], {"flag": True, "name": "x", "f": 0.1})


class TestRefusals(Base):
    def test_crash_before_complete(self):
        # a save that dies after its manifest, before COMPLETE: the
        # directory is left without the marker and load refuses it (65)
        code = ("import sys, torch; sys.path.insert(0, sys.argv[2]); from resumecheck import checkpoint; "
                "checkpoint.save(sys.argv[1], 4, model=torch.nn.Linear(2, 2))")
        env = dict(os.environ, RC_PY_TEST_CRASH_BEFORE_COMPLETE="1")
        root = os.path.join(self.tmp, "crash")
        r = subprocess.run([sys.executable, "-c", code, root, PKG], env=env)
        self.assertEqual(r.returncode, 3)
        d = os.path.join(root, "iter_0000004")
        self.assertEqual(sorted(os.listdir(d)), ["args.json", "manifest.json", "shard_00000_of_00001.h5"])
        with self.assertRaises(CheckpointError) as e:
            checkpoint.load(d, model=torch.nn.Linear(2, 2))
        self.assertEqual(e.exception.exit_code, 65)
        self.assertIn("has no COMPLETE", str(e.exception))
        self.assertIsNone(checkpoint.latest(root))
        # control: the same save without the crash loads
        root2 = os.path.join(self.tmp, "fine")
        r = subprocess.run([sys.executable, "-c", code, root2, PKG])
        self.assertEqual(r.returncode, 0)
        checkpoint.load(os.path.join(root2, "iter_0000004"), model=torch.nn.Linear(2, 2))
        self.assertEqual(checkpoint.latest(root2), os.path.join(root2, "iter_0000004"))

    def test_refuses_overwrite_and_corruption(self):
        m = torch.nn.Linear(2, 2)
        root = os.path.join(self.tmp, "r")
        d = checkpoint.save(root, 1, model=m)
        with self.assertRaises(CheckpointError) as e:
            checkpoint.save(root, 1, model=m)
        self.assertEqual(e.exception.exit_code, 74)
        checkpoint.load(d, model=m)  # control: intact loads
        p = os.path.join(d, "shard_00000_of_00001.h5")
        raw = bytearray(open(p, "rb").read())
        raw[-1] ^= 1
        open(p, "wb").write(bytes(raw))
        with self.assertRaises(CheckpointError) as e:
            checkpoint.load(d, model=m)
        self.assertEqual(e.exception.exit_code, 65)
        self.assertIn("do not match its manifest", str(e.exception))
        with self.assertRaises(CheckpointError) as e:
            checkpoint.load(os.path.join(root, "iter_0000009"), model=m)
        self.assertEqual(e.exception.exit_code, 66)

    def test_not_over_a_fifo(self):
        root = os.path.join(self.tmp, "f")
        d = os.path.join(root, "iter_0000001")
        os.makedirs(d)
        os.mkfifo(os.path.join(d, "manifest.json"))
        with self.assertRaises(CheckpointError) as e:
            checkpoint.save(root, 1, model=torch.nn.Linear(2, 2))
        self.assertEqual(e.exception.exit_code, 74)
        self.assertFalse(os.path.exists(os.path.join(d, "COMPLETE")))

    def test_two_ranks(self):
        root = os.path.join(self.tmp, "d")
        torch.manual_seed(1)
        m0, m1 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
        checkpoint.save(root, 2, model=m0, rank=0, world_size=2)
        with self.assertRaises(CheckpointError):  # rank 1 has not saved yet
            checkpoint.finalize(root, 2, 2)
        checkpoint.save(root, 2, model=m1, rank=1, world_size=2, rng=False)
        d = checkpoint.finalize(root, 2, 2)
        self.assertEqual(sorted(os.listdir(d)), ["COMPLETE", "args.json", "manifest.json",
                                                 "shard_00000_of_00002.h5", "shard_00001_of_00002.h5"])
        man = json.load(open(os.path.join(d, "manifest.json")))
        self.assertEqual([s["file"] for s in man["shards"]], ["shard_00000_of_00002.h5", "shard_00001_of_00002.h5"])
        w = m1.weight.detach().clone()
        with torch.no_grad():
            m1.weight.zero_()
        checkpoint.load(d, model=m1, rank=1, world_size=2)
        self.assertTrue(torch.equal(m1.weight, w))


if __name__ == "__main__":
    unittest.main()
