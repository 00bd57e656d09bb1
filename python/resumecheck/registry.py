"""Registered state: a trainer names its objects once and the registry saves,
loads and censuses them all at the exec contract's points (docs/pytorch.md).

    rc = resumecheck.register(args, {"model": model, "optimizer": opt, "scheduler": sched,
                                     "ema": ema, "sampler": sampler})
    start = rc.resume()                  # load --resume-from (census after the load); the first step
    for step in range(start, args.stop_at + 1):
        batch = ...
        rc.before_step(step)             # just before the first forward: census at K+1
        ...forward, backward, optimizer step...
        rc.after_step(step)              # save at --save-at (census after the save)

The state dict is what torch.distributed.checkpoint.save(state_dict=...)
takes: named Stateful objects (state_dict()/load_state_dict()), modules,
optimizers, dicts of counters (updated in place on load), tensors (copied
into). The same objects are saved, restored and censused, so an object
registered once cannot be saved and forgotten by the census, or the other
way round. A trainer that saves and loads with its own code registers its
objects as watch= (censused only) and calls rc.saved(K) / rc.loaded(K)
where it saved or loaded.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Mapping, Optional

from . import census, checkpoint
from .errors import EX_USAGE, CheckpointError


class Registry:
    """The registered objects of one leg and the exec contract's points.

    args: what resumecheck.exec_args() returned (steps, save_at,
    resume_from, out, leg). state: {name: object}, saved and loaded.
    watch: {name: object} censused (class saved) but not saved or loaded
    here: state the trainer's own checkpoint code is trusted with, which the
    census then checks. rng: save, restore and census the global RNGs.
    census: write the census files. rank, world_size: the job's
    (checkpoint.job_rank_world). allow_world_size_change: load a
    checkpoint written by another number of ranks (this rank's shard as it
    is). barrier: called on every rank between the shards and rank 0's
    manifest when world_size > 1 (torch.distributed.barrier when
    initialised). save_args: more facts for args.json.
    """

    def __init__(
        self,
        args: Any,
        state: Mapping[str, Any],
        *,
        watch: Optional[Mapping[str, Any]] = None,
        rng: bool = True,
        census: bool = True,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        allow_world_size_change: bool = False,
        barrier: Optional[Callable[[], Any]] = None,
        save_args: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.args = args
        self.state = dict(state)
        self.watch = dict(watch or {})
        both = [n for n in self.watch if n in self.state]
        if both:
            raise CheckpointError(EX_USAGE, f"{both[0]!r} is both in state and in watch")
        checkpoint.plan_state(self.state)  # refuse what cannot be registered now, not at the first save
        checkpoint.plan_state(self.watch)
        self.rng = rng
        self.census = census
        self.rank, self.world_size = checkpoint.job_rank_world(rank, world_size)
        self.allow_world_size_change = allow_world_size_change
        self.barrier = barrier or self._dist_barrier()
        if self.world_size > 1 and self.barrier is None:
            raise CheckpointError(
                EX_USAGE, f"world size {self.world_size}: initialise torch.distributed or pass barrier= (called on every rank)"
            )
        self.save_args = dict(save_args or {})
        self.root = os.path.join(args.out, "ckpt")
        self.resumed_from: Optional[int] = None
        self._first_step = set()

    @staticmethod
    def _dist_barrier():
        if "torch" in sys.modules:
            dist = sys.modules["torch"].distributed
            if dist.is_available() and dist.is_initialized():
                return dist.barrier
        return None

    def census_state(self) -> dict:
        """The objects the census reads: state, then watch."""
        return {**self.state, **self.watch}

    def write_census(self, step: int, phase: Optional[str] = None) -> Optional[str]:
        if not self.census:
            return None
        return census.write_state(self.args.out, step, self.census_state(), rank=self.rank, phase=phase, rng=self.rng)

    def resume(self, state: Optional[Mapping[str, Any]] = None, rng: Optional[bool] = None) -> int:
        """Load --resume-from into the registered objects (and the RNGs) when
        it is given and write the census after the load. Returns the first
        step to train: K+1 after loading K, else 1. state, rng: load only
        these objects, or not the RNGs (a fine-tune that keeps a fresh
        optimizer; the census still reads every registered object)."""
        if not self.args.resume_from:
            return 1
        st = checkpoint.load(
            self.args.resume_from,
            state=self.state if state is None else state,
            rng=self.rng if rng is None else rng,
            rank=self.rank,
            world_size=self.world_size,
            allow_world_size_change=self.allow_world_size_change,
        )
        return self.loaded(st["iteration"])

    def loaded(self, step: int) -> int:
        """The census after a load of step K, and the first-step census
        armed for step K+1: what resume() does after its load, for a trainer
        that loads with its own code (torch.distributed.checkpoint.load of
        the same state). Returns K+1."""
        self.resumed_from = step
        self.write_census(step)
        return step + 1

    def before_step(self, step: int) -> Optional[str]:
        """Call just before step's first forward (after its batch is
        fetched). When step follows a save point K < N, or is this resumed
        leg's first step, writes the first-step census of K
        (iter_%07d.rank%d.first-step.txt), once; returns its path."""
        k = step - 1
        due = k == self.resumed_from or (k in self.args.save_at and k < self.args.steps)
        if not due or k in self._first_step:
            return None
        self._first_step.add(k)
        return self.write_census(k, phase="first-step")

    def after_step(self, step: int) -> Optional[str]:
        """Call after step's optimizer step. At a --save-at step: save every
        registered object (every rank; rank 0 finalises after the barrier)
        and, for K < N, write the census after the save. Returns the
        checkpoint directory, or None."""
        if step not in self.args.save_at:
            return None
        facts = {"leg": getattr(self.args, "leg", "")}
        facts.update(self.save_args)
        d = checkpoint.save(
            self.root, step, state=self.state, rng=self.rng, args=facts, rank=self.rank, world_size=self.world_size
        )
        if self.world_size > 1:
            self.barrier()
            if self.rank == 0:
                checkpoint.finalize(self.root, step, self.world_size)
            self.barrier()
        self.saved(step)
        return d

    def saved(self, step: int) -> Optional[str]:
        """The census after the save at step K < N: what after_step() does
        after its save, for a trainer that saves with its own code."""
        return self.write_census(step) if step < self.args.steps else None


def register(args: Any, state: Mapping[str, Any], **kw: Any) -> Registry:
    """Registry(args, state, **kw): see Registry."""
    return Registry(args, state, **kw)
