#!/usr/bin/env python3
"""Where plan_emu's measured steps part from the simulator's: per configuration of a
plan_emu.py --json, the measured step's compute and exposed communication per axis (the
runs' metrics, steps 3 on, the device's time) beside `bagpipe simulate`'s for the same
configuration, network and dilation (after any warm-up: qadam's and SC's runs after it).
A step over its prediction splits into compute that took longer (the device waited for
its host: kernels issued late, the CPU shared by the ranks) and communication exposed
beyond the simulator's (the links, the exchange's host work). In a pipeline the runs
count a stage's wait for its neighbour (the bubble included) as exposed pp time, the
simulator its critical path's compute: compare their steps.
Usage: plan_emu_split.py RESULTS.json RUNS_DIR --markdown FILE
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_runs import BP, SIM_EAGER  # noqa: E402
from plan_emu import MODEL, WARM_UPS, bandwidth, short  # noqa: E402

AXES = ("dp", "pp")


def measured(rundir):
    """Mean step, compute and exposed ms per axis over steps 3 on."""
    with open(os.path.join(rundir, "metrics.jsonl")) as f:
        steps = [r for r in map(json.loads, f) if r.get("type") == "step" and r["step"] >= 3]
    n = len(steps)
    return {"step": sum(r["step_ms"] for r in steps) / n, "compute": sum(r["compute_ms"] for r in steps) / n,
            **{a: sum(r["axis_exposed_ms"].get(a, 0) for r in steps) / n for a in AXES}}


def simulated(s, args):
    """simulate's step, compute and exposed ms per axis, after any warm-up."""
    extra = next((w[1] for key, w in WARM_UPS.items() if key in args + " "), [])
    cmd = [BP, "simulate", "--device", "emu:v100", "--dilation", str(s["dilation"]), "--net",
           f"bw={bandwidth(s['rate'])},lat={s['lat']}"] + MODEL + args.split() + extra + SIM_EAGER
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"simulate failed: {r.stderr}")
    out = {}
    for line in r.stdout.splitlines():
        key, _, rest = line.partition(" ")
        if key in ("step_ms", "compute_ms"):
            out[key[:-3]] = float(rest)
        elif key == "exposed_ms":
            for kv in rest.split():
                k, v = kv.split("=")
                if k in AXES:
                    out[k] = float(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("runs")
    ap.add_argument("--markdown", required=True)
    a = ap.parse_args()
    with open(a.results) as f:
        results = json.load(f)
    out = ["| hosts | network | rank | configuration | step ms meas / sim | compute ms meas / sim | dp exposed ms meas / sim | "
           "pp exposed ms meas / sim |", "|---:|---|---:|---|---:|---:|---:|---:|"]
    for s in results:
        tag = f"h{s['hosts']}_{s['rate']}_{s['lat']}" + ("_runtime" if s.get("links") == "runtime" else "")
        for i, r in enumerate(s["rows"]):
            part = "after" if "after" in r["parts_ms"] else "all"
            m, p = measured(os.path.join(a.runs, f"{tag}_{i}_{part}")), simulated(s, r["args"])
            cells = " | ".join(f"{m[k]:.2f} / {p.get(k, 0):.2f}" for k in ("step", "compute") + AXES)
            out.append(f"| {s['hosts']} | {s['rate']} / {s['lat']} | {r['rank']} | `{short(r['args'])}` | {cells} |")
    with open(a.markdown, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
