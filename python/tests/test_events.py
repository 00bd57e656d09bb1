"""Tests of resumecheck.events, the bisect event log of a PyTorch trainer
(docs/events.md): off without RC_EVENTS (no hook, no file), the module hooks
only from RC_EVENTS_FROM_STEP on, the line format bisect parses, microbatches
and call indices, and fingerprints that see every bit. torch is required."""

import os
import shutil
import tempfile
import unittest

import torch  # required: a missing torch fails the suite

from resumecheck import events


def tiny():
    torch.manual_seed(0)
    m = torch.nn.Sequential()
    m.add_module("fc1", torch.nn.Linear(4, 4))
    m.add_module("act", torch.nn.GELU())
    m.add_module("fc2", torch.nn.Linear(4, 2))
    return m, torch.optim.SGD(m.parameters(), lr=0.5)


def train(m, opt, steps, microbatches=1):
    x = torch.ones(3, 4)
    for _ in range(steps):
        opt.zero_grad()
        for _ in range(microbatches):
            events.batch(x)
            m(x).sum().backward()
        opt.step()


def n_hooks(m):
    return sum(len(x._forward_hooks) + len(x._backward_hooks) + len(x._forward_pre_hooks) for x in m.modules())


class TestEvents(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rc_py_events.")
        self.path = os.path.join(self.tmp, "ev.log")
        self.env = {k: os.environ.get(k) for k in (events.ENV, events.ENV_FROM_STEP, "RC_RESUME_FROM")}
        for k in self.env:
            os.environ.pop(k, None)

    def tearDown(self):
        events.close()
        for k, v in self.env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.tmp)

    def lines(self):
        events.close()
        with open(self.path) as f:
            return f.read().splitlines()

    def test_off_registers_nothing(self):
        m, opt = tiny()
        log = events.install(m, opt)
        self.assertFalse(log.enabled)
        self.assertEqual(n_hooks(m), 0)
        train(m, opt, 2)
        self.assertFalse(os.path.exists(self.path))
        # negative control: with the switch, the same model carries hooks
        os.environ[events.ENV] = self.path
        events.install(m, opt)
        self.assertGreater(n_hooks(m), 0)

    def test_format_steps_and_from_step(self):
        os.environ[events.ENV] = self.path
        os.environ[events.ENV_FROM_STEP] = "3"
        m, opt = tiny()
        events.install(m, opt)
        self.assertEqual(n_hooks(m), 1)  # armed: only the model's microbatch counter
        train(m, opt, 2)
        self.assertGreater(n_hooks(m), 1)  # step 3 is next: every module hooked
        train(m, opt, 2)
        lines = self.lines()
        steps = sorted({int(l.split()[0].split("=")[1]) for l in lines})
        self.assertEqual(steps, [3, 4])
        for l in lines:  # every field key=value, no spaces inside, step/mb/kind first
            kv = [f.split("=", 1) for f in l.split(" ")]
            self.assertTrue(all(len(x) == 2 and x[0] for x in kv), l)
            self.assertEqual([k for k, _ in kv[:3]], ["step", "mb", "kind"])
        kinds = [l.split()[2] for l in lines if l.startswith("step=3 ")]
        self.assertEqual(kinds[:3], ["kind=step_state", "kind=batch", "kind=forward"])
        self.assertIn("kind=optimizer", kinds)
        upd = [l for l in lines if l.startswith("step=3 ") and "kind=update" in l]
        self.assertEqual([l.split()[3] for l in upd], ["param=fc1/weight", "param=fc1/bias", "param=fc2/weight", "param=fc2/bias"])
        fwd = [l.split()[3] for l in lines if l.startswith("step=3 ") and "kind=forward" in l]
        self.assertEqual(fwd, ["module=fc1", "module=act", "module=fc2", "module=(root)"])  # innermost first

    def test_microbatches_and_start_step(self):
        os.environ[events.ENV] = self.path
        os.environ["RC_RESUME_FROM"] = "/x/ckpt/iter_0000007"
        m, opt = tiny()
        events.install(m, opt)  # no start_step: K+1 from RC_RESUME_FROM
        train(m, opt, 1, microbatches=2)
        lines = self.lines()
        self.assertTrue(lines[0].startswith("step=8 mb=-1 kind=step_state "))
        mbs = [l.split()[1] for l in lines if "kind=batch" in l]
        self.assertEqual(mbs, ["mb=0", "mb=1"])
        fc1 = [l for l in lines if "module=fc1 " in l and "kind=forward" in l]
        self.assertEqual([l.split()[1] + " " + l.split()[4] for l in fc1], ["mb=0 call=0", "mb=1 call=0"])

    def test_fingerprint_sees_every_bit(self):
        a = events.fingerprint(torch.tensor([0.0, 1.0]))
        self.assertEqual(len(a), 16)
        self.assertEqual(a, events.fingerprint(torch.tensor([0.0, 1.0])))
        self.assertNotEqual(a, events.fingerprint(torch.tensor([-0.0, 1.0])))  # sign of zero
        self.assertNotEqual(a, events.fingerprint(torch.tensor([0.0, 1.0], dtype=torch.float64)))
        self.assertEqual(events.fingerprint((1, 2.5)), events.fingerprint([1, 2.5]))  # tuple/list alike


if __name__ == "__main__":
    unittest.main()
