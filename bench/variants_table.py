#!/usr/bin/env python3
"""variants_table.py — the "variants" part's table (bench/gpu_session.sh).

Reads the rows that part writes ("VARIANT rN OP CALLS TOTAL_MS MS_A_CALL SHARE%",
one per op and round, and "VARIANT rN digest HEX") and prints, per op, each
variant's median ms a call over the rounds with its ratio to base's, the
ops ordered by base's time over the leg, then each variant's step total and whether
every round's digest equals base's. Usage: variants_table.py FILE
"""
import collections
import statistics
import sys


def main(path):
    calls = collections.defaultdict(list)  # (variant, op) -> [ms a call, one a round]
    op_ms = collections.defaultdict(list)  # (variant, op) -> [ms over the leg, one a round]
    totals = collections.defaultdict(lambda: collections.defaultdict(float))  # v -> round -> ms
    digests = collections.defaultdict(set)
    order = []
    for line in open(path):
        f = line.split()
        if len(f) == 4 and f[2] == "digest":
            digests[f[0]].add(f[3])
        elif len(f) == 7 and f[6].endswith("%"):
            v, rnd, op = f[0], f[1], f[2]
            calls[(v, op)].append(float(f[5]))
            op_ms[(v, op)].append(float(f[4]))
            totals[v][rnd] += float(f[4])
        else:
            continue
        if f[0] not in order:
            order.append(f[0])
    if not totals["base"]:
        sys.exit(f"{path}: no op rows of base (its legs failed?)")
    ops = sorted({op for (_, op) in calls}, key=lambda o: -statistics.median(op_ms.get(("base", o), [0.0])))
    print("ms a call (median of rounds; ratio to base)")
    print("op".ljust(24) + "".join(v.rjust(16) for v in order))
    for op in ops:
        base = calls.get(("base", op))
        row = op.ljust(24)
        for v in order:
            x = calls.get((v, op))
            if not x:
                cell = "-"
            elif v == "base" or not base:
                cell = f"{statistics.median(x):.4f}"
            else:
                cell = f"{statistics.median(x):.4f} {statistics.median(x) / statistics.median(base):.3f}"
            row += cell.rjust(16)
        print(row)
    base_total = statistics.median(totals["base"].values())
    for v in order:
        if not totals[v]:
            print(f"{v}: no op rows (its legs failed?)")
            continue
        t = statistics.median(totals[v].values())
        same = digests[v] == digests["base"] and len(digests[v]) == 1
        print(f"{v}: all ops {t:.2f} ms over the leg (median of {len(totals[v])} rounds), "
              f"{t / base_total:.3f} of base; digest {'base' if same else 'OTHER: ' + ' '.join(sorted(digests[v]))}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
