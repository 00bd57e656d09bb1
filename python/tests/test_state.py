"""Tests of registered state (checkpoint.save/load(state=...), census.state_fields,
resumecheck.register): an EMA module, a dict of counters, a Stateful sampler,
a TorchTitan-style AppState holding a model and an optimizer, an LR
scheduler, a GradScaler, a tensor and torchdata's StatefulDataLoader saved,
restored and censused alike; the first-step census; the refusal to load a
checkpoint of another world size; `extra` keys and containers that
round-trip exactly; version 1 shards still loading. torch and torchdata are
required: without them these fail (.ci/install-python-deps installs them)."""

import argparse
import json
import os
import shutil
import tempfile
import unittest
from unittest import mock

import h5py
import numpy as np

import torch  # required, not optional here
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torchdata.stateful_dataloader import StatefulDataLoader  # required too

import resumecheck
from resumecheck import CheckpointError, census, checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
V1 = os.path.join(HERE, "data", "v1", "iter_0000002")  # written by the format version 1 writer (args.json says)


def same(a, b):
    """Equal values of equal types: dicts with their key order, tuples as tuples, tensors by dtype and bits."""
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


class Sampler:
    """A Stateful sampler: a position and its own generator's state."""

    def __init__(self, seed):
        self.gen = torch.Generator().manual_seed(seed)
        self.index = 0

    def draw(self):
        self.index += 1
        return int(torch.randint(0, 1000, (1,), generator=self.gen))

    def state_dict(self):
        return {"index": self.index, "generator": self.gen.get_state()}

    def load_state_dict(self, sd):
        self.index = sd["index"]
        self.gen.set_state(sd["generator"])


class AppState:
    """TorchTitan's pattern: one Stateful whose state_dict() holds a model's
    and an optimizer's (int-keyed per-parameter state, tuples of betas, None
    flags)."""

    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self):
        return {"model": self.model.state_dict(), "optim": self.optimizer.state_dict()}

    def load_state_dict(self, sd):
        self.model.load_state_dict(sd["model"])
        self.optimizer.load_state_dict(sd["optim"])


def build(seed):
    """Every kind of registered object, from seed."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(4, 8))
    model.add_module("fc2", torch.nn.Linear(8, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 / (1 + t))
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    other = torch.nn.Linear(3, 3)
    app = AppState(other, torch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9))
    return {
        "model": model,
        "optimizer": opt,
        "scheduler": sched,
        "scaler": scaler,
        "ema": ema,
        "counters": {"tokens": 0, "micro_batches": 0},
        "sampler": Sampler(seed),
        "app": app,
        "noise": torch.zeros(3),
    }


def train(st, steps):
    for _ in range(steps):
        m, app = st["model"], st["app"]
        loss = m(torch.randn(5, 4)).pow(2).mean() + app.model(torch.randn(2, 3)).pow(2).mean()
        st["optimizer"].zero_grad()
        app.optimizer.zero_grad()
        st["scaler"].scale(loss).backward()
        st["scaler"].step(st["optimizer"])
        st["scaler"].update()
        app.optimizer.step()
        st["scheduler"].step()
        st["ema"].update_parameters(m)
        st["counters"]["tokens"] += 5
        st["counters"]["micro_batches"] += 1
        st["sampler"].draw()
        st["noise"].add_(torch.rand(3))


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def manifest_paths(d):
    return [x["path"] for x in json.loads(read(os.path.join(d, "manifest.json")))["shards"][0]["datasets"]]


def fields(step, st):
    return {k: census.format_value(v) for k, v in census.state_fields(step, st).items()}


def differing(a, b):
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rc_py_state.")

    def tearDown(self):
        shutil.rmtree(self.tmp)


class TestRegisteredState(Base):
    def test_save_load_census(self):
        st = build(0)
        train(st, 3)
        d = checkpoint.save(os.path.join(self.tmp, "a"), 3, state=st)
        want = fields(3, st)
        paths = manifest_paths(d)
        for p in ("/model/fc1/weight", "/optimizer/exp_avg/fc1/weight", "/state/ema/module/fc1/weight", "/state/ema/n_averaged",
                  "/state/counters/tokens", "/state/sampler/generator", "/state/sampler/index", "/state/app/model/weight",
                  "/state/app/optim/state/0/momentum_buffer", "/state/app/optim/param_groups/0/lr",
                  "/state/scheduler/last_epoch", "/state/scaler/scale", "/state/noise", "/rng/torch_cpu"):
            self.assertIn(p, paths)
        for f in ("model.fc1.weight", "optimizer.exp_avg.fc1.weight", "state.ema.module.fc1.weight", "state.counters.tokens",
                  "state.sampler.index", "state.app.optim.state.0.momentum_buffer", "state.scheduler.last_epoch",
                  "state.scaler.scale", "state.noise", "rng.torch_cpu"):
            self.assertIn(f, want)
        self.assertEqual(want["state.counters.tokens"], "15")
        fresh = build(1)
        # control: every registered object of the fresh process differs from the saved one
        before = differing(want, fields(3, fresh))
        for name in ("model.", "optimizer.", "state.ema.", "state.counters.", "state.sampler.", "state.app.", "state.scheduler.",
                     "state.scaler.", "state.noise"):
            self.assertTrue(any(f.startswith(name) for f in before), name)
        counters = fresh["counters"]
        got = checkpoint.load(d, state=fresh)
        self.assertEqual(got["iteration"], 3)
        self.assertEqual(differing(want, fields(3, fresh)), [])
        self.assertIs(fresh["counters"], counters)  # a dict is updated in place
        self.assertEqual(counters, {"tokens": 15, "micro_batches": 3})
        # and both continue alike, step for step, from the same generators
        rng = checkpoint.rng_state()
        train(st, 2)
        checkpoint.set_rng_state(rng)
        train(fresh, 2)
        self.assertEqual(differing(fields(5, st), fields(5, fresh)), [])

    def test_same_state_same_bytes(self):
        st = build(0)
        train(st, 2)
        a = checkpoint.save(os.path.join(self.tmp, "a"), 2, state=st)
        b = checkpoint.save(os.path.join(self.tmp, "b"), 2, state=st)
        shard = "shard_00000_of_00001.h5"
        self.assertEqual(read(os.path.join(a, shard)), read(os.path.join(b, shard)))
        st["counters"]["tokens"] += 1  # control: one counter changes the shard
        c = checkpoint.save(os.path.join(self.tmp, "c"), 2, state=st)
        self.assertNotEqual(read(os.path.join(a, shard)), read(os.path.join(c, shard)))

    def test_unsaveable_named_by_path(self):
        class Bad:
            def __init__(self, v):
                self.v = v

            def state_dict(self):
                return {"ok": 1, "queue": [2, self.v]}

            def load_state_dict(self, sd):
                pass

        for v, what in ((object(), "builtins.object"), ({1, 2}, "builtins.set"), (print, "builtin_function_or_method")):
            with self.assertRaises(CheckpointError) as e:
                checkpoint.save(os.path.join(self.tmp, "bad"), 1, state={"loader": Bad(v)}, rng=False)
            self.assertEqual(e.exception.exit_code, 64)
            self.assertIn("/state/loader/queue/1: cannot save a", str(e.exception))
            self.assertIn(what, str(e.exception))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "bad", "iter_0000001", "COMPLETE")))
        with self.assertRaises(CheckpointError) as e:
            checkpoint.save(os.path.join(self.tmp, "bad"), 1, state={"c": {True: 1}}, rng=False)
        self.assertEqual(e.exception.exit_code, 64)
        self.assertIn("/state/c: cannot save a dict key of type bool", str(e.exception))
        # control: the same object holding a number saves and loads
        d = checkpoint.save(os.path.join(self.tmp, "good"), 1, state={"loader": Bad(3)}, rng=False)
        checkpoint.load(d, state={"loader": Bad(4)}, rng=False)

    def test_unregistrable(self):
        for state, msg in (({"n": 5}, "a number cannot be restored in place"), ({"a/b": {}}, "state name 'a/b'"),
                           ({"x": "text"}, "state['x'] is a str")):
            with self.assertRaises(CheckpointError) as e:
                checkpoint.save(os.path.join(self.tmp, "r"), 1, state=state, rng=False)
            self.assertEqual(e.exception.exit_code, 64)
            self.assertIn(msg, str(e.exception))
        m = torch.nn.Linear(2, 2)
        with self.assertRaises(CheckpointError) as e:
            checkpoint.save(os.path.join(self.tmp, "r"), 1, model=m, state={"model": m}, rng=False)
        self.assertIn("model given twice", str(e.exception))

    def test_not_saved_is_refused_on_load(self):
        st = build(0)
        ema = st.pop("ema")
        d = checkpoint.save(os.path.join(self.tmp, "a"), 1, state=st)
        with self.assertRaises(CheckpointError) as e:
            checkpoint.load(d, state={**st, "ema": ema})
        self.assertEqual(e.exception.exit_code, 65)
        self.assertIn("no /state/ema in the shard (state['ema'] was not saved)", str(e.exception))
        checkpoint.load(d, state={**st, "ema": ema}, strict=False)  # control: not strict, it is left alone
        checkpoint.load(d, state=st)  # control: what was saved loads

    def test_load_state_dict_failure_is_bad_data(self):
        class Strict(Sampler):
            def load_state_dict(self, sd):
                raise KeyError("step_count")

        d = checkpoint.save(os.path.join(self.tmp, "a"), 1, state={"sampler": Sampler(0)}, rng=False)
        with self.assertRaises(CheckpointError) as e:
            checkpoint.load(d, state={"sampler": Strict(0)}, rng=False)
        self.assertEqual(e.exception.exit_code, 65)
        self.assertIn("state['sampler'].load_state_dict(): KeyError", str(e.exception))

    def test_stateful_dataloader(self):
        torch.manual_seed(0)
        loader = StatefulDataLoader(list(range(40)), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(7))
        it = iter(loader)
        for _ in range(3):
            next(it)
        d = checkpoint.save(os.path.join(self.tmp, "a"), 3, state={"dataloader": loader})
        want = fields(3, {"dataloader": loader})
        self.assertIn("state.dataloader._num_yielded", want)
        rest = [next(it).tolist() for _ in range(4)]
        fresh = StatefulDataLoader(list(range(40)), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(8))
        control = [b.tolist() for _, b in zip(range(4), iter(fresh))]
        self.assertNotEqual(control, rest)  # control: a loader that was not loaded yields other batches
        fresh = StatefulDataLoader(list(range(40)), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(8))
        checkpoint.load(d, state={"dataloader": fresh})
        got = fields(3, {"dataloader": fresh})
        self.assertEqual(differing(want, got), [])
        it = iter(fresh)  # it resumes here; with a generator= the global torch RNG is not drawn from
        self.assertEqual(differing(want, fields(3, {"dataloader": fresh})), [])
        self.assertEqual([next(it).tolist() for _ in range(4)], rest)

    def test_stateful_dataloader_draws_after_load(self):
        # torchdata's StatefulDataLoader (shuffle, no generator) makes its
        # iterator on the first iter() or state_dict() after a load, and the
        # iterator draws its base seed from the global torch RNG: the census
        # right after the load reads the generators before that, the
        # first-step census after it.
        def loader():
            return StatefulDataLoader(list(range(40)), batch_size=4, shuffle=True)

        torch.manual_seed(0)
        a = loader()
        it = iter(a)
        next(it)
        d = checkpoint.save(os.path.join(self.tmp, "a"), 1, state={"dataloader": a})
        saved = fields(1, {"dataloader": a})
        iter_a = fields(1, {"dataloader": a})  # the saving process: its iterator exists, nothing draws
        self.assertEqual(differing(saved, iter_a), [])
        b = loader()
        checkpoint.load(d, state={"dataloader": b})
        self.assertEqual(differing(saved, fields(1, {"dataloader": b})), [])  # the census after the load
        self.assertEqual(differing(saved, fields(1, {"dataloader": b})), ["rng.torch_cpu"])  # the next one


class TestRegistry(Base):
    def args(self, leg, resume_from=None):
        return argparse.Namespace(steps=4, stop_at=4, save_at=[2], resume_from=resume_from, out=os.path.join(self.tmp, leg), leg=leg)

    def leg(self, leg, resume_from=None, draw_after_load=False, **kw):
        st = build(0)
        rc = resumecheck.register(self.args(leg, resume_from), st, **kw)
        start = rc.resume()
        if draw_after_load:  # a DataLoader iterator made after the load: one draw from the restored RNG
            torch.empty((), dtype=torch.int64).random_()
        for step in range(start, 5):
            rc.before_step(step)
            rc.before_step(step)  # the second forward of a step (a micro-batch) writes nothing
            train(st, 1)
            rc.after_step(step)
        return os.path.join(self.tmp, leg)

    def census(self, out, name):
        with open(os.path.join(out, "census", name)) as f:
            return dict(line.split("\t", 1) for line in f.read().splitlines() if not line.startswith("#"))

    def test_first_step_census(self):
        through = self.leg("through")
        self.assertEqual(sorted(os.listdir(os.path.join(through, "census"))),
                         ["iter_0000002.rank0.first-step.txt", "iter_0000002.rank0.txt"])
        self.assertTrue(os.path.isfile(os.path.join(through, "ckpt", "iter_0000002", "COMPLETE")))
        resumed = self.leg("resume", os.path.join(through, "ckpt", "iter_0000002"))
        self.assertEqual(sorted(os.listdir(os.path.join(resumed, "census"))),
                         ["iter_0000002.rank0.first-step.txt", "iter_0000002.rank0.txt"])
        for name in ("iter_0000002.rank0.txt", "iter_0000002.rank0.first-step.txt"):
            a, b = self.census(through, name), self.census(resumed, name)
            self.assertEqual(differing(a, b), [], name)
            self.assertIn("state.ema.module.fc1.weight", a)
        # a draw between the load and the first step: only the first-step census sees it
        late = self.leg("late", os.path.join(through, "ckpt", "iter_0000002"), draw_after_load=True)
        self.assertEqual(differing(self.census(through, "iter_0000002.rank0.txt"), self.census(late, "iter_0000002.rank0.txt")), [])
        self.assertEqual(differing(self.census(through, "iter_0000002.rank0.first-step.txt"),
                                   self.census(late, "iter_0000002.rank0.first-step.txt")), ["rng.torch_cpu"])

    def test_watched_is_censused_not_saved(self):
        st = build(0)
        ema = st.pop("ema")
        rc = resumecheck.register(self.args("w"), st, watch={"ema": ema})
        for step in (1, 2):
            train({**st, "ema": ema}, 1)
            rc.after_step(step)
        d = os.path.join(self.tmp, "w", "ckpt", "iter_0000002")
        paths = manifest_paths(d)
        self.assertFalse(any(p.startswith("/state/ema") for p in paths))
        self.assertIn("/state/counters/tokens", paths)  # control: the registered ones are saved
        self.assertIn("state.ema.module.fc1.weight", self.census(os.path.join(self.tmp, "w"), "iter_0000002.rank0.txt"))
        with self.assertRaises(CheckpointError):
            resumecheck.register(self.args("w2"), st, watch={"counters": {}})  # one name, one place

    def test_own_checkpoint_code(self):
        # a trainer that saves and loads with its own code (torch.save here)
        # and tells the registry where: the same census files
        def leg(name, resume_from=None, forget_ema=False):
            st = build(0)
            rc = resumecheck.register(self.args(name, resume_from), {}, watch=st)
            start = 1
            if resume_from:
                sd = torch.load(resume_from, weights_only=False)
                for k, obj in st.items():
                    if k == "counters":
                        obj.update(sd[k])
                    elif k == "noise":
                        obj.copy_(sd[k])
                    elif not (forget_ema and k == "ema"):
                        obj.load_state_dict(sd[k])
                checkpoint.set_rng_state(sd["rng"])
                start = rc.loaded(2)
            for step in range(start, 5):
                rc.before_step(step)
                train(st, 1)
                if step == 2:
                    sd = {k: (dict(v) if k == "counters" else v.clone() if k == "noise" else v.state_dict()) for k, v in st.items()}
                    torch.save({**sd, "rng": checkpoint.rng_state()}, os.path.join(self.tmp, name + ".pt"))
                    rc.saved(step)
            return os.path.join(self.tmp, name)

        through = leg("through")
        self.assertFalse(os.path.exists(os.path.join(through, "ckpt")))  # nothing saved by the registry
        resumed = leg("resumed", os.path.join(self.tmp, "through.pt"))
        for name in ("iter_0000002.rank0.txt", "iter_0000002.rank0.first-step.txt"):
            self.assertEqual(differing(self.census(through, name), self.census(resumed, name)), [], name)
        # control: a load that forgets the EMA shows in both census files
        forgot = leg("forgot", os.path.join(self.tmp, "through.pt"), forget_ema=True)
        for name in ("iter_0000002.rank0.txt", "iter_0000002.rank0.first-step.txt"):
            diff = differing(self.census(through, name), self.census(forgot, name))
            self.assertTrue(diff and all(f.startswith("state.ema.") for f in diff), diff)


class TestWorldSize(Base):
    def two_rank_checkpoint(self):
        root = os.path.join(self.tmp, "d")
        torch.manual_seed(1)
        self.m = [torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]
        for r in (0, 1):
            checkpoint.save(root, 2, state={"model": self.m[r]}, rank=r, world_size=2)
        return checkpoint.finalize(root, 2, 2)

    def test_refused_unless_asked(self):
        d = self.two_rank_checkpoint()
        m = torch.nn.Linear(2, 2)
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "", "RANK": ""}):
            with self.assertRaises(CheckpointError) as e:
                checkpoint.load(d, state={"model": m})
            self.assertEqual(e.exception.exit_code, 65)
            self.assertIn("checkpoint written by 2 ranks, this job has 1", str(e.exception))
            self.assertIn("pass allow_world_size_change=True to load rank 0's shard anyway", str(e.exception))
            got = checkpoint.load(d, state={"model": m}, allow_world_size_change=True)
            self.assertEqual(got["world_size"], 2)
            self.assertTrue(torch.equal(m.weight, self.m[0].weight))
        # the job's size from torchrun's variables: rank 1 of 2 loads its own shard
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "2", "RANK": "1"}):
            checkpoint.load(d, state={"model": m})
            self.assertTrue(torch.equal(m.weight, self.m[1].weight))
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "4", "RANK": "3"}):
            with self.assertRaises(CheckpointError) as e:
                checkpoint.load(d, state={"model": m})
            self.assertIn("written by 2 ranks, this job has 4", str(e.exception))
            with self.assertRaises(CheckpointError) as e:
                checkpoint.load(d, state={"model": m}, allow_world_size_change=True)
            self.assertIn("has no shard for rank 3", str(e.exception))
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "two"}):
            with self.assertRaises(CheckpointError) as e:
                checkpoint.load(d, state={"model": m})
            self.assertEqual(e.exception.exit_code, 64)

    def test_same_size_loads(self):  # control: a checkpoint of this job's size loads without asking
        root = os.path.join(self.tmp, "one")
        m = torch.nn.Linear(2, 2)
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "", "RANK": ""}):
            d = checkpoint.save(root, 1, state={"model": m})
            checkpoint.load(d, state={"model": torch.nn.Linear(2, 2)})


TRICKY = {
    "a.b": 1,
    "a": {"b": 2, "c.d": {"e": [3]}},
    "x/y": [1, (2, 3.5), [], ()],
    "7": "the str seven",
    7: "the int seven",
    -1: None,
    "-1": False,
    "": b"\x00raw bytes",
    ".": {},
    "..": "dots",
    "%2F": "a literal percent",
    "ü": np.arange(3, dtype=np.int16),
    "t": torch.arange(4),
    "bf": torch.ones(2, dtype=torch.bfloat16),
    "0": {0: "int key", "0": "str key", "00": "two zeros"},
    "f": 0.1,
    "big": 2**62,
    "empty": "",
}


class TestExtraRoundTrip(Base):
    def test_keys_and_containers_round_trip(self):
        d = checkpoint.save(os.path.join(self.tmp, "x"), 1, extra=TRICKY, data_position={"epoch": 1, "offsets": (4, 8)},
                            state={"counters": {"1.5": 2, 3: {"x": (1,)}}}, rng=False)
        counters = {}
        got = checkpoint.load(d, state={"counters": counters}, rng=False)
        self.assertTrue(same(TRICKY, got["extra"]), got["extra"])
        self.assertTrue(same({"epoch": 1, "offsets": (4, 8)}, got["data_position"]))
        self.assertTrue(same({"1.5": 2, 3: {"x": (1,)}}, counters))
        for k in list(TRICKY) + ["%", "%%", "a%2Fb", "-", "1e3", " 7", "+7", "\0"]:
            self.assertTrue(same(k, checkpoint.key_of_name(checkpoint.escape_key(k))), repr(k))
        # control: read without the kinds (as version 1 does), the same group does not round-trip
        with h5py.File(os.path.join(d, "shard_00000_of_00001.h5"), "r") as f:
            self.assertEqual(int(f["meta"].attrs["format_version"]), 2)
            self.assertFalse(same(TRICKY, checkpoint._decode_tree(f["extra"], 1)))

    def test_version_1_shard_loads(self):
        m = torch.nn.Sequential()
        m.add_module("fc", torch.nn.Linear(2, 2))
        opt = torch.optim.AdamW(m.parameters(), lr=0.01)
        m(torch.ones(1, 2)).sum().backward()
        opt.step()
        man = json.loads(read(os.path.join(V1, "manifest.json")))["shards"][0]
        sha = {x["path"]: x["sha256"] for x in man["datasets"]}

        def sha_of(t):
            import hashlib

            return hashlib.sha256(t.detach().numpy().tobytes()).hexdigest()

        with torch.no_grad():
            m.fc.weight.fill_(9.0)
        self.assertNotEqual(sha_of(m.fc.weight), sha["/model/fc/weight"])  # control: the live value is not the file's
        torch.manual_seed(99)
        got = checkpoint.load(V1, model=m, optimizer=opt)
        self.assertEqual(got["iteration"], 2)
        self.assertEqual(sha_of(m.fc.weight), sha["/model/fc/weight"])
        self.assertEqual(sha_of(opt.state_dict()["state"][0]["exp_avg"]), sha["/optimizer/exp_avg/fc/weight"])
        self.assertEqual(sha_of(torch.get_rng_state()), sha["/rng/torch_cpu"])
        self.assertEqual(got["data_position"], {"consumed_samples": 32})
        # version 1's meaning, as it was: '.' in a key was nesting, digit-named groups lists
        e = got["extra"]
        self.assertEqual(set(e), {"7", "a", "arr", "steps", "t"})
        self.assertEqual((e["7"], e["a"], e["steps"], e["t"]), ("seven", {"b": 1}, [5, 6], [1.5, "x"]))
        self.assertEqual(e["arr"].tolist(), [0, 1, 2])
        # control: the same groups read as version 2 mean something else
        with h5py.File(os.path.join(V1, "shard_00000_of_00001.h5"), "r") as f:
            self.assertEqual(checkpoint._decode_tree(f["extra/steps"], 2), {0: 5, 1: 6})

    def test_unknown_version_refused(self):
        with mock.patch.object(checkpoint, "FORMAT_VERSION", 3):
            d = checkpoint.save(os.path.join(self.tmp, "v3"), 1, extra={"a": 1}, rng=False)
        with self.assertRaises(CheckpointError) as e:
            checkpoint.load(d, rng=False)
        self.assertEqual(e.exception.exit_code, 65)
        self.assertIn("not a resumecheck-torch-shard shard of version 1 or 2", str(e.exception))


if __name__ == "__main__":
    unittest.main()
