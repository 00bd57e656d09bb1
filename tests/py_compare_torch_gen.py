"""py_compare_torch_gen.py DIR — the PyTorch checkpoints tests/py_compare_torch.sh
compares: one training state (a model with Megatron-style module names,
AdamW after two steps, a whole checkpoint dict with iteration, lr, a
string, None, a bfloat16 tensor), saved with torch.save and as a
torch.distributed.checkpoint directory, and copies that each change one thing.
"""

import argparse
import copy
import math
import os
import struct
import sys
import warnings

import torch
import torch.distributed.checkpoint as dcp

W = "model/decoder.layers.0.mlp.linear_fc1.weight"  # the flattened name of the tensor changed


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear_fc1 = torch.nn.Linear(4, 6)
        self.linear_fc2 = torch.nn.Linear(6, 4)


def state():
    torch.manual_seed(1234)
    model = torch.nn.Module()
    model.decoder = torch.nn.Module()
    model.decoder.layers = torch.nn.ModuleList([torch.nn.ModuleDict({"mlp": Block()})])
    model.decoder.final_layernorm = torch.nn.LayerNorm(4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, 4)
    for _ in range(2):
        mlp = model.decoder.layers[0]["mlp"]
        loss = model.decoder.final_layernorm(mlp.linear_fc2(torch.relu(mlp.linear_fc1(x)))).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {
        "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "optimizer": opt.state_dict(),
        "iteration": 100,
        "lr": 3e-4,
        "run_name": "gpt-small",
        "note": None,
        "rng": {"seed": 1234, "shuffle": True},
        "embedding_bf16": torch.linspace(-1, 1, 16).to(torch.bfloat16),
        "mask": torch.tensor([1.0, 0.0, 2.0, float("nan")]),
    }


def nan_with_payload(payload):
    return torch.tensor([0x7FC00000 | payload], dtype=torch.int32).view(torch.float32)[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    d = p.parse_args().dir
    warnings.simplefilter("ignore")  # DCP: "torch.distributed is disabled ... single process"
    base = state()

    def save(name, sd):
        torch.save(sd, os.path.join(d, name))

    def variant(name, change):
        sd = copy.deepcopy(base)
        change(sd)
        save(name, sd)

    save("base.pt", base)
    save("base_copy.pt", copy.deepcopy(base))  # saved again: same state, same names
    dcp.save(copy.deepcopy(base), checkpoint_id=os.path.join(d, "base_dcp"))

    def one_elem(sd):
        sd["model"]["decoder.layers.0.mlp.linear_fc1.weight"][2, 3] += 0.5

    variant("one_elem.pt", one_elem)
    sd = copy.deepcopy(base)
    one_elem(sd)
    dcp.save(sd, checkpoint_id=os.path.join(d, "one_elem_dcp"))
    # NaN payloads and signed zeros: `mask` holds 0.0 at [1] and NaN at [3]
    variant("nan_payload.pt", lambda sd: sd["mask"].__setitem__(3, nan_with_payload(1)))
    variant("nan_number.pt", lambda sd: sd["mask"].__setitem__(3, 7.0))
    variant("neg_zero.pt", lambda sd: sd["mask"].__setitem__(1, -0.0))

    def bf16_ulp(sd):  # one representable bfloat16 apart
        bits = sd["embedding_bf16"].view(torch.int16)
        bits[5] += 1

    variant("bf16_ulp.pt", bf16_ulp)
    variant("iteration.pt", lambda sd: sd.__setitem__("iteration", 101))
    variant("iteration_float.pt", lambda sd: sd.__setitem__("iteration", 100.0))
    variant("lr_ulp.pt", lambda sd: sd.__setitem__("lr", math.nextafter(3e-4, 1.0)))
    variant("lr_neg_zero.pt", lambda sd: sd.__setitem__("lr", -0.0))
    variant("lr_zero.pt", lambda sd: sd.__setitem__("lr", 0.0))
    variant("dtype.pt", lambda sd: sd.__setitem__("mask", sd["mask"].to(torch.float64)))
    variant("shape.pt", lambda sd: sd.__setitem__("mask", torch.cat([sd["mask"], torch.zeros(1)])))
    variant("run_name.pt", lambda sd: sd.__setitem__("run_name", "gpt-smalL"))
    variant("extra_key.pt", lambda sd: sd["optimizer"]["state"][0].__setitem__("max_exp_avg_sq", torch.zeros(1)))

    # the same logical values held as a transposed view of another storage:
    # logically equal to base, and a change at logical [2,3] is reported there
    def as_view(sd, change=False):
        w = sd["model"]["decoder.layers.0.mlp.linear_fc1.weight"]
        store = w.t().contiguous()  # [4,6] storage; w == store.t()
        if change:
            store[3, 2] += 0.5
        sd["model"]["decoder.layers.0.mlp.linear_fc1.weight"] = store.t()
        sd["model_t"] = store  # a second name for the same storage

    variant("view.pt", as_view)
    variant("view_changed.pt", lambda sd: as_view(sd, True))
    b2 = copy.deepcopy(base)
    b2["model_t"] = b2["model"]["decoder.layers.0.mlp.linear_fc1.weight"].t().contiguous()
    save("base_with_t.pt", b2)

    # corrupt files: cut short, and one byte of a tensor's record flipped
    # (torch.load does not check the zip's CRC-32s; compare-torch does)
    with open(os.path.join(d, "base.pt"), "rb") as f:
        data = bytearray(f.read())
    with open(os.path.join(d, "truncated.pt"), "wb") as f:
        f.write(data[: len(data) // 2])
    import zipfile  # noqa: PLC0415

    with zipfile.ZipFile(os.path.join(d, "base.pt")) as z:
        rec = next(i for i in z.infolist() if "/data/" in i.filename and i.file_size >= 16)
    h = rec.header_offset
    n, e = struct.unpack("<HH", data[h + 26 : h + 30])
    data[h + 30 + n + e + 4] ^= 0x01
    with open(os.path.join(d, "flipped.pt"), "wb") as f:
        f.write(data)
    with open(os.path.join(d, "not_torch.pt"), "wb") as f:
        f.write(b"this is not a checkpoint\n" * 8)

    # a pickle weights_only refuses (Megatron saves its args as a Namespace)
    ns = copy.deepcopy(base)
    ns["args"] = argparse.Namespace(lr=3e-4, micro_batch_size=2)
    save("namespace.pt", ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
