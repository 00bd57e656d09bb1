#!/usr/bin/env python3
# compare_tensors_gen.py — writes the small .npy, .npz and safetensors files
# that compare_tensors.sh compares, by hand (struct + json + zipfile: no
# numpy needed). Usage: compare_tensors_gen.py KIND OUT [ARGS...]; see main.
import json
import struct
import sys
import zipfile


def npy_bytes(descr, shape, data, version=1, fortran=False):
    """A .npy file: magic, version, header length, dict literal, data."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    head = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, "True" if fortran else "False", dims)
    pre = 10 if version == 1 else 12
    pad = 64 - (pre + len(head) + 1) % 64
    head = head + " " * pad + "\n"
    fmt = "<H" if version == 1 else "<I"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack(fmt, len(head)) + head.encode() + data


def safetensors_bytes(tensors, metadata=None):
    """tensors: [(name, dtype, shape, data bytes)], laid out in order."""
    hdr, off, blob = {}, 0, b""
    if metadata is not None:
        hdr["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        blob += data
    text = json.dumps(hdr).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def f32(vals, order="<"):
    return struct.pack(order + "%df" % len(vals), *vals)


def base16():  # [4,4] float32 1.0, 2.0, ...
    return [i + 1.0 for i in range(16)]


def main():
    kind, out = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if kind == "npy":  # npy OUT [change INDEX VALUE] [v2] [fortran] [be8] [shape4x2] [i8]
        vals = base16()
        descr, shape, version, fortran, order = "<f4", (4, 4), 1, False, "<"
        if "change" in args:
            i = args.index("change")
            vals[int(args[i + 1])] = float(args[i + 2])
        if "v2" in args:
            version = 2
        if "fortran" in args:
            fortran = True
        if "shape4x2" in args:
            vals, shape = vals[:8], (4, 2)
        if "be8" in args:
            data, descr = struct.pack(">16d", *vals), ">f8"
            if "ulp" in args:  # element 3 one ULP up
                b = bytearray(data)
                b[3 * 8 + 7] += 1
                data = bytes(b)
        elif "i8" in args:
            data, descr = struct.pack("<16q", *[int(v) for v in vals]), "<i8"
        else:
            data = f32(vals)
        open(out, "wb").write(npy_bytes(descr, shape, data, version, fortran))
    elif kind == "npz":  # npz OUT stored|deflated [change] [drop] [order]
        comp = zipfile.ZIP_DEFLATED if args[0] == "deflated" else zipfile.ZIP_STORED
        w = base16()
        if "change" in args:
            w[5] = 99.0
        members = [("w.npy", npy_bytes("<f4", (4, 4), f32(w))),
                   ("step.npy", npy_bytes("<i8", (), struct.pack("<q", 7)))]
        if "drop" in args:
            members = members[:1]
        if "order" in args:
            members.reverse()
        with zipfile.ZipFile(out, "w", compression=comp) as z:
            for name, data in members:
                info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                info.compress_type = comp
                with z.open(info, "w", force_zip64=True) as f:  # as numpy writes them
                    f.write(data)
    elif kind == "st":  # st OUT [nan] [bf16ulp] [extra] [dtype] [meta X]
        w = base16()
        if "nan" in args:
            w[0] = float("nan")  # against 1.0
        bf = bytearray(struct.pack("<8H", *[0x3f80 + i for i in range(8)]))  # bfloat16 1.0, ...
        if "bf16ulp" in args:
            bf[2 * 6] += 1  # element 6 one ULP up
        tensors = [("model.w", "F32", [4, 4], f32(w)), ("model.b", "BF16", [8], bytes(bf))]
        if "dtype" in args:
            tensors[1] = ("model.b", "F16", [8], bytes(bf))
        if "extra" in args:
            tensors.append(("opt.step", "I64", [1], struct.pack("<q", 3)))
        meta = None
        if "meta" in args:
            meta = {"step": args[args.index("meta") + 1]}
        open(out, "wb").write(safetensors_bytes(tensors, meta))
    elif kind == "st_raw":  # st_raw OUT HEADER_JSON DATA_LEN: a header written as given
        text = args[0].encode()
        open(out, "wb").write(struct.pack("<Q", len(text)) + text + b"\0" * int(args[1]))
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
