"""The walk of the step from the edges scripts/step-walk.sh recorded.

usage: walk.py BUILD BIN EDGES...

Each edge is a call between two of bagpipe's functions made during the step (on
any thread). A function's file is where addr2line puts it (a function of a header
counts for the .c of the same name when there is one). The files are ordered by
use: file A uses file B when A's object file refers to a global symbol that B's
defines, and "above" is the transitive closure of that. A call from A into B is a
climb when B is above A and A is not above B: control went back up to a module
that called down into A, through a pointer it was handed (a hook or callback). A
call down is one from A into a B below it, and returns up once; sideways calls join
files that use each other (the dp engine and its algorithms) or neither. Counts are
of distinct call pairs (caller function, callee function), not of calls made.
"""
import collections
import glob
import os
import subprocess
import sys

build, binary, edge_files = sys.argv[1], sys.argv[2], sys.argv[3:]
src = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))

edges = set()
for path in edge_files:
    with open(path) as f:
        for line in f:
            a, b = line.split()
            edges.add((int(a, 16), int(b, 16)))

addrs = sorted({x for e in edges for x in e if x})
out = subprocess.run(["addr2line", "-f", "-e", binary] + [hex(a) for a in addrs],
                     capture_output=True, text=True, check=True).stdout.splitlines()
name, where = {}, {}
for i, a in enumerate(addrs):
    fn, loc = out[2 * i], out[2 * i + 1].split(":")[0]
    name[a] = fn
    rel = os.path.relpath(os.path.realpath(loc), src) if loc.startswith("/") else loc
    if rel.endswith(".h") and os.path.exists(os.path.join(src, rel[:-2] + ".c")):
        rel = rel[:-2] + ".c"
    where[a] = rel

# The uses relation between object files, by their global symbols.
defined, undefined = {}, {}
for obj in glob.glob(os.path.join(build, "CMakeFiles", "bp_*.dir", "src", "**", "*.c.o"),
                     recursive=True):
    if "bp_nn_f64" in obj:
        continue
    rel = obj.split(os.sep + "src" + os.sep, 1)[1][:-2]
    syms = subprocess.run(["nm", "-P", obj], capture_output=True, text=True).stdout.split("\n")
    for s in syms:
        p = s.split()
        if len(p) < 2:
            continue
        if p[1] == "U":
            undefined.setdefault(rel, set()).add(p[0])
        elif p[1] in "TDBRC":
            defined.setdefault(rel, set()).add(p[0])
owner = {s: f for f, ss in defined.items() for s in ss}
uses = collections.defaultdict(set)
for f, ss in undefined.items():
    for s in ss:
        if s in owner and owner[s] != f:
            uses[f].add(owner[s])


def below(f):
    seen, todo = set(), [f]
    while todo:
        for g in uses[todo.pop()]:
            if g not in seen:
                seen.add(g)
                todo.append(g)
    return seen


reach = {f: below(f) for f in set(where.values())}
files = sorted({where[b] for a, b in edges})
climbs, downs, side = [], [], []
for a, b in sorted(edges):
    if not a or where[a] == where[b]:
        continue
    fa, fb = where[a], where[b]
    line = f"{fa}:{name[a]} -> {fb}:{name[b]}"
    if fa in reach[fb] and fb not in reach[fa]:
        climbs.append(line)
    elif fb in reach[fa] and fa not in reach[fb]:
        downs.append(line)
    else:
        side.append(line)
print(f"files visited: {len(files)}")
for f in files:
    print(f"  {f}")
print(f"climbs (calls back up): {len(climbs)}")
for c in climbs:
    print(f"  {c}")
print(f"calls down across files (each returns up): {len(downs)}")
print(f"sideways calls across files: {len(side)}")
for c in side:
    print(f"  {c}")
print(f"SUMMARY files={len(files)} climbs={len(climbs)} down={len(downs)} sideways={len(side)}")
