"""The bisect event log of a PyTorch trainer (docs/events.md, docs/bisect.md).

`resumecheck bisect RUN_DIR` replays the first divergent step S of an exec
trainer's through leg and resumed leg with RC_EVENTS=<file> and
RC_EVENTS_FROM_STEP=<S> in their environment. A trainer that calls

    events.install(model, optimizer, start_step=start)

then writes, for every step >= S, the events the built-in trainer's
`train --events` writes, in the same format: one line per event,
`step=S mb=M kind=K ...` with SHA-256 fingerprints of what each module call
computed, so that bisect can align the two processes' logs and name the
first module call whose values differ. Without RC_EVENTS, install registers
nothing and every function here returns at once: the trainer costs nothing.

Events, in the order they happen:
  step_state  first in each step: the state the step starts from (lr and
              fingerprints of the state_dict, the optimizer state, each RNG)
  batch       events.batch(data, samples=N): the microbatch's data
  forward     each module call as it returns (innermost first): fp_in, fp_out
  backward    each module's full backward hook: fp_grad_output, fp_grad_input
  optimizer   before optimizer.step(): lr
  update      after optimizer.step(), each parameter: fp_grad (as the step
              consumed it), fp_param (after the step), fp_state (its state)
Module and parameter names are model.named_modules() / named_parameters()
paths with "/" for "." (as the checkpoint's datasets and the built-in
trainer's logs name them); the model itself is "(root)".

One log per process (the switch is the process's environment): the module
functions batch(), microbatch() and step() act on the log install() made."""

from __future__ import annotations

import atexit
import hashlib
import math
import os
import re
import sys
import warnings
from typing import Any, Iterable, Optional

ENV = "RC_EVENTS"
ENV_FROM_STEP = "RC_EVENTS_FROM_STEP"
ROOT = "(root)"
FP_HEX = 16  # hex digits of a fingerprint, as the built-in trainer's logs

_active: Optional["EventLog"] = None


def _path_name(name: str) -> str:
    return name.replace(".", "/") if name else ROOT


def _hex(x: Any) -> str:
    x = float(x)
    return repr(x) if math.isnan(x) or math.isinf(x) else x.hex()


def _feed(h: "hashlib._Hash", v: Any) -> None:
    """Feeds a canonical encoding of v into h: tensors by dtype, shape and
    every byte (so -0.0 and +0.0 differ); lists and tuples alike; dicts by
    sorted key; other objects by type name only."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(v, torch.Tensor):
        t = v.detach().cpu().contiguous()
        h.update(f"T{t.dtype}:{tuple(t.shape)}:".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif v is None:
        h.update(b"N")
    elif isinstance(v, bool):
        h.update(b"B1" if v else b"B0")
    elif isinstance(v, int):
        h.update(f"I{v};".encode())
    elif isinstance(v, float):
        h.update(f"F{_hex(v)};".encode())
    elif isinstance(v, str):
        h.update(f"S{len(v)}:".encode() + v.encode("utf-8", "backslashreplace"))
    elif isinstance(v, bytes):
        h.update(f"Y{len(v)}:".encode() + v)
    elif isinstance(v, dict):
        h.update(f"D{len(v)}:".encode())
        for k in sorted(v, key=repr):
            _feed(h, k)
            _feed(h, v[k])
    elif isinstance(v, (list, tuple)):
        h.update(f"L{len(v)}:".encode())
        for x in v:
            _feed(h, x)
    elif type(v).__module__ == "numpy":
        import numpy as np

        a = np.ascontiguousarray(v)
        h.update(f"A{a.dtype.str}:{a.shape}:".encode() + a.tobytes())
    else:
        h.update(f"O{type(v).__qualname__};".encode())


def fingerprint(*values: Any) -> str:
    """16 hex digits of the SHA-256 of the values' canonical encoding."""
    h = hashlib.sha256()
    for v in values:
        _feed(h, v)
    return h.hexdigest()[:FP_HEX]


def _start_step_from_env() -> int:
    """The step a fresh process trains first: K+1 when RC_RESUME_FROM names
    an iter_%07d checkpoint (as `run` and `bisect` set it), else 1."""
    m = re.search(r"iter_(\d+)/*$", os.environ.get("RC_RESUME_FROM", ""))
    return int(m.group(1)) + 1 if m else 1


class EventLog:
    """The hooks and the file of one process's event log. Build it with
    install(); a disabled one (no RC_EVENTS) registers nothing."""

    def __init__(self, model: Any, optimizer: Any = None, path: Optional[str] = None,
                 from_step: int = 0, start_step: Optional[int] = None, backward: bool = True):
        self.enabled = path is not None
        self.path = path
        self.from_step = from_step
        self.step_no = int(start_step) if start_step is not None else _start_step_from_env()
        self._model, self._optimizer = model, optimizer
        self._handles: list = []
        self._lines: list[str] = []
        self._open = False  # the current step's step_state is out
        self._mb = -1  # microbatch of the events (auto: forwards of the model so far)
        self._mb_explicit = False
        self._fwd_calls: dict[str, int] = {}
        self._bwd_calls: dict[str, int] = {}
        self._grad_fp: dict[int, str] = {}
        self._f = None
        if not self.enabled:
            return
        # inputs that need no gradient (the batch) make torch warn at every
        # backward of the first module; the hook's grad_input is then None
        warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed")
        self._names = {m: _path_name(n) for n, m in model.named_modules()}
        self._pnames = {id(p): _path_name(n) for n, p in model.named_parameters()}
        self._backward = backward
        self._armed = False
        self._f = open(path, "w", encoding="ascii", newline="\n")
        # Counting steps and microbatches needs three hooks; the modules'
        # hooks come only once a step to log is next (_arm), so the steps
        # before RC_EVENTS_FROM_STEP cost three calls each.
        self._handles.append(model.register_forward_pre_hook(self._root_pre))
        if optimizer is not None:
            self._handles.append(optimizer.register_step_pre_hook(self._opt_pre))
            self._handles.append(optimizer.register_step_post_hook(self._opt_post))
        self._arm()
        atexit.register(self.close)

    # ---- what the trainer calls ----
    def step(self, n: int) -> None:
        """The step the next events belong to (optional: by default the
        first step is start_step, and each optimizer.step() ends one)."""
        if not self.enabled or int(n) == self.step_no:
            return
        self._flush()
        self.step_no, self._open = int(n), False
        self._arm()

    def microbatch(self, i: int) -> None:
        """The microbatch the next events belong to (optional: by default
        each forward of the model starts the next one)."""
        if not self.enabled:
            return
        self._open_step()
        self._mb, self._mb_explicit = int(i), True
        self._fwd_calls.clear()
        self._bwd_calls.clear()

    def batch(self, data: Any, samples: Optional[int] = None) -> None:
        """Logs the microbatch's data (a tensor or a tuple/dict of them)
        before its forward: the first event of the step after its state."""
        if not self.enabled:
            return
        self._open_step()
        if not self._logging():
            return
        mb = self._mb if self._mb_explicit else self._mb + 1
        extra = f" samples={int(samples)}" if samples is not None else ""
        self._emit(f"step={self.step_no} mb={mb} kind=batch{extra} fp_data={fingerprint(data)}")

    def close(self) -> None:
        """Writes what is pending, removes the hooks, closes the file."""
        if self._f is None:
            return
        self._flush()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        os.fsync(self._f.fileno())
        self._f.close()
        self._f = None

    # ---- internals ----
    def _logging(self) -> bool:
        return self.step_no >= self.from_step

    def _arm(self) -> None:
        """Registers every module's hooks before the first step to log
        starts (a module's full backward hook must exist before its forward
        is called)."""
        if self._armed or not self._logging():
            return
        self._armed = True
        for m in self._names:
            self._handles.append(m.register_forward_hook(self._fwd, with_kwargs=True))
            if self._backward:
                self._handles.append(m.register_full_backward_hook(self._bwd))

    def _emit(self, line: str) -> None:
        self._lines.append(line + "\n")

    def _flush(self) -> None:
        if self._f is not None and self._lines:
            self._f.write("".join(self._lines))
            self._f.flush()
        self._lines.clear()

    def _open_step(self) -> None:
        if self._open:
            return
        self._open = True
        self._mb, self._mb_explicit = -1, False
        self._fwd_calls.clear()
        self._bwd_calls.clear()
        if self._logging():
            self._emit(f"step={self.step_no} mb=-1 kind=step_state " + self._state_fields())

    def _state_fields(self) -> str:
        import random

        import numpy as np

        torch = sys.modules["torch"]
        f = []
        if self._optimizer is not None:
            f.append("lr=" + _hex(self._optimizer.param_groups[0]["lr"]))
        f.append("fp_params=" + fingerprint(list(self._model.state_dict().items())))
        if self._optimizer is not None:
            st = self._optimizer.state
            f.append("fp_optim=" + fingerprint([st.get(p, {}) for g in self._optimizer.param_groups for p in g["params"]]))
        f.append("fp_rng_torch=" + fingerprint(torch.get_rng_state()))
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            f.append("fp_rng_cuda=" + fingerprint(list(torch.cuda.get_rng_state_all())))
        f.append("fp_rng_numpy=" + fingerprint(list(np.random.get_state())))
        f.append("fp_rng_python=" + fingerprint(list(random.getstate())))
        return " ".join(f)

    def _root_pre(self, module: Any, args: Any) -> None:
        self._open_step()
        if not self._mb_explicit:
            self._mb += 1
            self._fwd_calls.clear()
            self._bwd_calls.clear()

    def _call(self, calls: dict, name: str) -> int:
        c = calls.get(name, 0)
        calls[name] = c + 1
        return c

    def _fwd(self, module: Any, args: Any, kwargs: Any, output: Any) -> None:
        self._open_step()
        if not self._logging():
            return
        name = self._names[module]
        c = self._call(self._fwd_calls, name)
        self._emit(f"step={self.step_no} mb={max(self._mb, 0)} kind=forward module={name} call={c} "
                   f"fp_in={fingerprint(args, kwargs)} fp_out={fingerprint(output)}")

    def _bwd(self, module: Any, grad_input: Any, grad_output: Any) -> None:
        if not self._logging():
            return
        name = self._names[module]
        c = self._call(self._bwd_calls, name)
        self._emit(f"step={self.step_no} mb={max(self._mb, 0)} kind=backward module={name} call={c} "
                   f"fp_grad_output={fingerprint(grad_output)} fp_grad_input={fingerprint(grad_input)}")

    def _params(self) -> Iterable[tuple[str, Any]]:
        i = 0
        for g in self._optimizer.param_groups:
            for p in g["params"]:
                yield self._pnames.get(id(p), f"param_{i}"), p
                i += 1

    def _opt_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._open_step()
        if not self._logging():
            return
        self._emit(f"step={self.step_no} mb=-1 kind=optimizer lr={_hex(optimizer.param_groups[0]['lr'])}")
        self._grad_fp = {id(p): fingerprint(p.grad) for _, p in self._params()}

    def _opt_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._logging():
            for name, p in self._params():
                self._emit(f"step={self.step_no} mb=-1 kind=update param={name} "
                           f"fp_grad={self._grad_fp.get(id(p), fingerprint(None))} "
                           f"fp_param={fingerprint(p)} fp_state={fingerprint(optimizer.state.get(p, {}))}")
        self._grad_fp = {}
        self._flush()  # a step's events reach the file when the step ends
        self.step_no += 1
        self._open = False
        self._arm()


def enabled() -> bool:
    """Whether this process logs events (RC_EVENTS is set)."""
    return bool(os.environ.get(ENV))


def install(model: Any, optimizer: Any = None, start_step: Optional[int] = None,
            backward: bool = True) -> EventLog:
    """Hooks model (every module) and optimizer when RC_EVENTS is set; a
    no-op otherwise. start_step: the first step this process trains (default:
    K+1 from RC_RESUME_FROM, else 1). backward=False leaves out the backward
    hooks (torch refuses a full backward hook on a module whose output is
    modified in place, e.g. by ReLU(inplace=True))."""
    global _active
    path = os.environ.get(ENV) or None
    from_step = 0
    if path:
        raw = os.environ.get(ENV_FROM_STEP, "0") or "0"
        try:
            from_step = int(raw)
        except ValueError:
            raise ValueError(f"{ENV_FROM_STEP}={raw!r} is not a step number") from None
    if _active is not None:
        _active.close()
    _active = EventLog(model, optimizer, path, from_step, start_step, backward)
    return _active


def step(n: int) -> None:
    if _active is not None:
        _active.step(n)


def microbatch(i: int) -> None:
    if _active is not None:
        _active.microbatch(i)


def batch(data: Any, samples: Optional[int] = None) -> None:
    if _active is not None:
        _active.batch(data, samples)


def close() -> None:
    if _active is not None:
        _active.close()


__all__ = ["install", "enabled", "step", "microbatch", "batch", "close", "fingerprint", "EventLog", "ENV", "ENV_FROM_STEP"]
