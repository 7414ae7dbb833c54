#!/usr/bin/env python3
"""Optimus-CC's ablation on emulated A100s, dp 2 x pp 4 x tp 2 (experiments/occ_emu.sh).

16 ranks on 8 namespace hosts, the two ranks of a tp group on one host: tp's allreduces
stay within the host (shared memory, `--net` at NVLink's order), pp's and dp's messages
cross the hosts' links, which the kernel shapes to the slow inter-node rate divided by the
dilation (scripts/cluster.sh up 8 --rate). A gpt of Optimus-CC's GPT-2.5B shape scaled
down (the artifact's 52 layers of 1920 channels, 24 heads, 1024 tokens, tp 8 x pp 4 ->
8 layers of 960 channels, 24 heads, 512 tokens, tp 2 x pp 4 x dp 2), its flags as the
artifact's Fig. 10 scripts set them: CB at rank 16 on the epilogue only, FE, SC at rank
128 on 3 of 4 stages without warm-up. Per configuration: median step (steps 3..),
the bytes all ranks sent per axis and step, the simulator's prediction on the same two-level
network. The baseline runs twice (the repeats' spread).
Options: --steps N (5), --dilation K (64), --inter BW (the slow link's rate before
dilation, 50Gbit), --out DIR, --json FILE, --markdown FILE, --table FILE (the markdown of an earlier --json).
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_runs import BP, SIM_EAGER, Pool, add_output_args, save, spread, table_only  # noqa: E402

MODEL = ["--layers", "8", "--embd", "960", "--heads", "24", "--seq-len", "512", "--batch", "32"]
GRID = ["--dp", "2", "--pp", "4", "--tp", "2", "--partition", "3,2,2,3", "--micro-batches", "8",
        "--bucket-mb", "25"]
INTRA = "bw=1200Gbit,lat=5us"  # tp within a host: --net, every message (150 GB/s)
CB = ["--cb", "--cb-rank", "16", "--cb-epilogue-only"]
FE = ["--fused-embedding-sync"]
SC = ["--sc-stages", "3", "--sc-rank", "128", "--sc-warmup", "0"]
CONFIGS = [("baseline", []), ("CB", CB), ("CB+FE", CB + FE), ("CB+FE+SC", CB + FE + SC)]
AXES = ("dp", "pp", "tp", "embed")


def predict(flags, inter):
    sim = subprocess.run([BP, "simulate", "--device", "emu:a100", "--steps", "100000"] + MODEL + GRID
                         + flags + ["--intra", INTRA, "--inter", f"{inter},lat=50us",
                                    "--ranks-per-node", "2"] + SIM_EAGER, capture_output=True, text=True)
    if sim.returncode:
        sys.exit(f"simulate failed: {sim.stderr}")
    v = dict(line.split(None, 1) for line in sim.stdout.splitlines() if " " in line)

    def axes(key):
        return {k: float(x) for k, x in (f.split("=") for f in v[key].split())}
    return float(v["step_ms"]), axes("exposed_ms"), axes("bytes_total")


def fmt(d, scale=1.0, digits=1):
    return " / ".join(f"{d[a] * scale:.{digits}f}" for a in AXES)


def markdown(rows, path):
    base = [r for r in rows if r["name"] == "baseline"]
    ms = sorted(r["step_ms"] for r in base)
    ref = (ms[(len(ms) - 1) // 2] + ms[len(ms) // 2]) / 2  # the median
    pref = base[0]["pred_ms"]
    lines = ["| configuration | step ms | speed-up | predicted ms | predicted speed-up | "
             "MB sent per step by all ranks, dp / pp / tp / embed | predicted | "
             "exposed ms dp / pp / tp / embed | predicted exposed ms |", "|---|---:|---:|---:|---:|---|---|---|---|"]
    for r in rows:
        if r["rep"]:
            continue
        ms = ref if r["name"] == "baseline" else r["step_ms"]
        lines.append(f"| {r['name']} | {ms:.1f} | {ref / ms:.2f}x | {r['pred_ms']:.1f} | "
                     f"{pref / r['pred_ms']:.2f}x | {fmt(r['bytes'], 1e-6, 2)} | {fmt(r['pred_bytes'], 1e-6, 0)} | "
                     f"{fmt(r['exposed_ms'])} | "
                     f"{fmt(r['pred_exposed'])} |")
    ms = [r["step_ms"] for r in base]
    lines += ["", f"- baseline: the median of {len(ms)} runs ({', '.join(f'{x:.1f}' for x in ms)} ms), "
              f"spread (max - min) / mean {spread(ms):.3f}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--dilation", type=int, default=64)
    ap.add_argument("--inter", default="bw=50Gbit")
    add_output_args(ap, "/tmp/bagpipe_occ_emu")
    a = ap.parse_args()
    if table_only(a, markdown):
        return
    pool = Pool(8, 1)
    rows = []
    for rep in (0, 1):
        for name, flags in CONFIGS if rep == 0 else CONFIGS[:1]:
            o = ["--device", "emu:a100", "--dilation", str(a.dilation), "--steps", str(a.steps),
                 "--net", INTRA] + MODEL + GRID + flags
            d = os.path.join(a.out, name.replace("+", "_") + (f"_r{rep}" if rep else ""))
            m = pool.train(d, 16, 2, o).result()
            m["pred_ms"], m["pred_exposed"], m["pred_bytes"] = predict(flags, a.inter)
            m.update(name=name, rep=rep)
            rows.append(m)
            print(f"{name:9s} r{rep}: {m['step_ms']:8.1f} ms (predicted {m['pred_ms']:.1f}); MB dp/pp/tp/embed "
                  f"{fmt(m['bytes'], 1e-6, 2)}; exposed {fmt(m['exposed_ms'])}", flush=True)
    save(a, rows, markdown)


if __name__ == "__main__":
    main()
