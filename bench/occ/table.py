#!/usr/bin/env python3
"""The table of an ablation run: bench/occ/table.py OUT (the --out of ablation.sh).

Reads OUT/runs.tsv (network, configuration, metrics log, load before and after, and
the role: full, or timed for a short run whose loss is taken from the configuration's
full run without emulation) and
every run's metrics log. Per configuration and network, medians over the steps after
the first 10% (SC's full-precision warm-up) of: the iteration time (rank 0's step
time), the bytes per step on each axis (all ranks together), rank 0's exposed
communication time per axis; the stages' computation time per step (busy_s of the
`stages` record over the steps); the validation loss at the end. Speed and loss
relative to the baseline on the same network. With repeats, the median of the
per-run numbers. Writes OUT/table.md and OUT/results.json. Standard library only.
"""
import json
import statistics as st
import sys

AXES = ("dp", "pp", "embed")
NET_NAMES = {"bw=1Gbit,lat=1ms": "1 Gbit, 1 ms", "bw=100Mbit,lat=1ms": "100 Mbit, 1 ms"}


def read_run(path):
    recs = [json.loads(x) for x in open(path)]
    steps = [r for r in recs if r["type"] == "step"]
    n_steps = len(steps)
    steps = steps[max(1, n_steps // 10):]
    evals = [r for r in recs if r["type"] == "eval"]
    stages = [r for r in recs if r["type"] == "stages"][-1]

    def med(f):
        return st.median(f(r) for r in steps)

    return {
        "step_ms": med(lambda r: r["step_ms"]),
        "bytes": {a: med(lambda r: r["axis_bytes"][a]) for a in AXES},
        "exposed": {a: med(lambda r: r["axis_exposed_ms"][a]) for a in AXES},
        "busy_ms": [b * 1e3 / n_steps for b in stages["busy_s"]],
        "val_loss": evals[-1]["val_loss"] if evals else float("nan"),
        "bwd_compressed": stages.get("bwd_compressed"),
    }


def median_of(rows):
    if len(rows) == 1:
        return rows[0]
    m = dict(rows[0])
    for k in ("step_ms", "val_loss"):
        m[k] = st.median(r[k] for r in rows)
    for k in ("bytes", "exposed"):
        m[k] = {a: st.median(r[k][a] for r in rows) for a in AXES}
    m["busy_ms"] = [st.median(r["busy_ms"][s] for r in rows) for s in range(len(rows[0]["busy_ms"]))]
    return m


def main(out):
    runs, order, loads, timed = {}, [], [], set()
    for line in open(f"{out}/runs.tsv"):
        net, name, path, l0, l1, *role = line.rstrip("\n").split("\t")
        loads += [float(l0), float(l1)]
        if (net, name) not in runs:
            order.append((net, name))
        runs.setdefault((net, name), []).append(read_run(path))
        if role == ["timed"]:
            timed.add((net, name))
    table = {k: median_of(v) for k, v in runs.items()}
    for net, name in timed:  # the loss of the full run without emulation
        table[(net, name)]["val_loss"] = table[("off", name)]["val_loss"]
    lines = [
        "| network | configuration | iteration ms | speed-up | stage compute ms | dp MB | pp MB "
        "| embed MB | exposed dp / pp / embed ms | val loss | vs baseline |",
        "|---|---|---:|---:|---|---:|---:|---:|---|---:|---:|",
    ]
    for net, name in order:
        r, b = table[(net, name)], table.get((net, "baseline"))
        speed = b["step_ms"] / r["step_ms"] if b else float("nan")
        dloss = (r["val_loss"] / b["val_loss"] - 1) * 100 if b else float("nan")
        e = r["exposed"]
        lines.append(
            f"| {NET_NAMES.get(net, net)} | {name} "
            f"| {r['step_ms']:.1f} | {speed:.2f}x | {' / '.join(f'{x:.0f}' for x in r['busy_ms'])} "
            f"| {r['bytes']['dp'] / 1e6:.2f} | {r['bytes']['pp'] / 1e6:.3f} "
            f"| {r['bytes']['embed'] / 1e6:.3f} | {e['dp']:.1f} / {e['pp']:.1f} / {e['embed']:.1f} "
            f"| {r['val_loss']:.4f} | {dloss:+.2f}% |")
    lines.append("")
    # Emulation changes timing only: a configuration's losses are the same on every network.
    for name in dict.fromkeys(n for _, n in order):
        vals = {table[k]["val_loss"] for k in table if k[1] == name}
        if len(vals) > 1:
            lines.append(f"note: {name}: validation losses differ between networks: {sorted(vals)}")
    lines.append(f"1-minute load average while running: mean {st.mean(loads):.2f}, "
                 f"min {min(loads):.2f}, max {max(loads):.2f} ({len(loads) // 2} runs)")
    text = "\n".join(lines)
    print(text)
    with open(f"{out}/table.md", "w") as f:
        f.write(text + "\n")
    with open(f"{out}/results.json", "w") as f:
        json.dump({f"{k[0]}|{k[1]}": v for k, v in table.items()}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
