"""census_fixture.py — hand-made checkpoints for the fixture trainer
(tests/trainers/fixture_trainer.sh) of the run_census_* and run_report_*
tests, written by the Python package's own shard writer and manifest
(python/resumecheck/checkpoint.py), so `run` compares them as it compares a
PyTorch trainer's.

    census_fixture.py SPEC

SPEC has a line per checkpoint: `CKPT_ROOT STEP PATH=V[,V...] ...`. A
single integer is an int64 scalar, a list of numbers a float32 array;
datasets are written in the order given."""

import hashlib
import os
import sys

import numpy as np

from resumecheck import checkpoint as ck


def value(text):
    items = text.split(",")
    if len(items) == 1 and items[0].lstrip("-").isdigit():
        return np.asarray(int(items[0]), dtype="<i8")
    return np.asarray([float(x) for x in items], dtype="<f4")


def write(root, step, datasets):
    d = os.path.join(root, ck.iter_dirname(step))
    os.makedirs(d, exist_ok=False)
    name = ck.shard_filename(0, 1)
    path = os.path.join(d, name)
    ck.write_shard(path, datasets, {"format_version": ck.FORMAT_VERSION, "rank": 0, "world_size": 1, "iteration": step})
    with open(path, "rb") as f:
        shard = f.read()
    entry = {
        "bytes": len(shard),
        "datasets": [
            {"dtype": a.dtype.name, "path": p, "sha256": hashlib.sha256(a.tobytes()).hexdigest(), "shape": list(a.shape)}
            for p, a, _ in datasets
        ],
        "file": name,
        "rank": 0,
        "sha256": hashlib.sha256(shard).hexdigest(),
    }
    text = ck.manifest_text(step, 1, [entry]).encode()
    with open(os.path.join(d, ck.MANIFEST_NAME), "wb") as f:
        f.write(text)
    with open(os.path.join(d, ck.ARGS_NAME), "wb") as f:
        f.write(b"{}\n")
    with open(os.path.join(d, ck.COMPLETE_NAME), "wb") as f:
        f.write(f"{hashlib.sha256(text).hexdigest()}  {ck.MANIFEST_NAME}\n".encode())


def main():
    for line in open(sys.argv[1]):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        datasets = []
        for w in words[2:]:
            p, _, v = w.partition("=")
            datasets.append((p, value(v), "ndarray"))
        write(words[0], int(words[1]), datasets)


if __name__ == "__main__":
    main()
