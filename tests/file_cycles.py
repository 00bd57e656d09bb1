#!/usr/bin/env python3
"""file_cycles.py — no two source files of the library call each other,
directly or around a circle (issue "Structure": a circle means neither file
can be read, tested or replaced alone).

Reads the defined and undefined symbols of every object file given (nm),
draws an edge from a file to each file that defines a symbol it uses, and
reports every strongly connected component of more than one file, with the
symbols on its edges. Exit 0 when there is none, 1 when there is one.

  file_cycles.py OBJECT...        check these objects
  file_cycles.py --self-test      the negative control: two scratch files
                                  that call each other must be reported,
                                  and two that call one way must not
"""
import os
import subprocess
import sys
import tempfile


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBR":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            used.add(f[1])
    return defined, used


def name_of(obj):
    # CMake's object path: .../CMakeFiles/rc_core.dir/src/core/model.c.o
    return obj.split(".dir/", 1)[1][:-2] if ".dir/" in obj else os.path.basename(obj)


def circles(objs):
    defs, uses, owner = {}, {}, {}
    for o in objs:
        n = name_of(o)
        defs[n], uses[n] = symbols(o)
        for s in defs[n]:
            owner[s] = n
    edges = {n: {} for n in defs}
    for n, used in uses.items():
        for s in used:
            m = owner.get(s)
            if m and m != n:
                edges[n].setdefault(m, []).append(s)
    # Tarjan's strongly connected components, iterative
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found, edges


def report(objs):
    found, edges = circles(objs)
    for comp in found:
        print("circle: " + " <-> ".join(comp))
        for a in comp:
            for b in comp:
                if b in edges[a]:
                    print(f"  {a} -> {b}: {' '.join(sorted(edges[a][b]))}")
    return found


def self_test():
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as t:
        def obj(name, code):
            src, o = os.path.join(t, name + ".c"), os.path.join(t, name + ".o")
            with open(src, "w") as f:
                f.write(code)
            subprocess.run([cc, "-c", "-o", o, src], check=True)
            return o
        a = obj("a", "int b(int); int a(int x) { return x ? b(x - 1) : 0; }\n")
        b = obj("b", "int a(int); int b(int x) { return x ? a(x - 1) : 1; }\n")
        c = obj("c", "int a(int); int c(int x) { return a(x); }\n")
        ok = True
        if len(report([a, b, c])) != 1:
            print("FAIL: a <-> b was not reported as a circle")
            ok = False
        if report([a, c]) or report([c]):
            print("FAIL: a one-way call was reported as a circle")
            ok = False
        print("self-test: " + ("ok" if ok else "FAILED"))
        return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    objs = [o for a in sys.argv[1:] for o in a.split(":") if o]
    if not objs:
        print("usage: file_cycles.py OBJECT... | --self-test", file=sys.stderr)
        return 64
    found = report(objs)
    print(f"{len(objs)} object files, {len(found)} circle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
