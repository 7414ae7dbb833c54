#!/usr/bin/env python3
"""`bagpipe simulate --device emu:GPU` against emulated runs on scripts/cluster.sh hosts.

The emulated device's compute equals the cost model's by construction, so what this
checks is what the simulator adds on top of it: communication, schedule, overlap,
contention between groups and the host's own costs. Per configuration: predict with
`bagpipe simulate --device emu:GPU` first, then train the same configuration for STEPS
steps on namespace hosts (one rank per host, two with --npernode 2) with the same
device, dilation and emulated network (--net, dilated by the run), and take the mean
step time of steps 3.. (reported times are the device's: wall time / dilation).

Options: --only NAME,NAME, --repeat NAME,NAME (run these rows REPEATS times),
--repeats N (3), --steps N (12), --dilation K (32), --out DIR, --json FILE,
--markdown FILE, --rescore FILE (recompute predictions of a --json FILE, e.g. after
changing the simulator), --keep FILE (with --only: the other rows from an earlier
--json FILE, rescored, in the table's order, so that a few rows run again), --merge
FILE,FILE (with --keep: rows measured by other passes' --json FILEs, rescored, take
the place of the kept rows of the same configuration: passes run side by side). Environment: BAGPIPE (build/bagpipe), BP_CLUSTER (up with
enough hosts: scripts/cluster.sh up 16).
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validate import ROOT, BP, ALGOS, value, exposed  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "emu"))
from cluster_runs import LOG_ONCE  # noqa: E402

CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
GPU = "a100"
MODEL = ["--layers", "8", "--embd", "256", "--heads", "8", "--seq-len", "512", "--batch", "32"]
FAST = ["--net", "bw=10Gbit,lat=50us"]
SLOW = ["--net", "bw=2500Mbit,lat=100us"]
NVLINK = ["--net", "bw=100Gbit,lat=5us"]
ALGO_OPTS = {"qadam": ["--qadam-warmup", "2"], "powersgd": ["--powersgd-warmup", "2"],
             "easgd": ["--ea-period", "2"], "decentralized": ["--interval", "2"]}


def configs():
    """(name, ranks, ranks per host, options): every row runs on the FAST network
    unless its name says slow."""
    rows = []
    for w in (2, 4):
        for a in ALGOS:
            rows.append((f"{a} dp{w}", w, 1, ["--dp", str(w), "--dp-algo", a, "--bucket-mb", "4"]
                         + ALGO_OPTS.get(a, []) + FAST))
    for a in ("allreduce", "bytegrad", "decentralized"):
        rows.append((f"{a} dp4 slow", 4, 1, ["--dp", "4", "--dp-algo", a, "--bucket-mb", "4"]
                     + ALGO_OPTS.get(a, []) + SLOW))
    for a, w in (("allreduce", 8), ("bytegrad", 8), ("allreduce", 16)):
        rows.append((f"{a} dp{w}", w, 1, ["--dp", str(w), "--dp-algo", a, "--bucket-mb", "4"] + FAST))
    for a, w in (("allreduce", 4), ("allreduce", 8), ("bytegrad", 4)):
        rows.append((f"{a} dp{w} hierarchical", w, 2, ["--dp", str(w), "--dp-algo", a, "--bucket-mb", "4",
                                                        "--hierarchical", "--node-size", "2"] + FAST))
    for s in ("gpipe", "1f1b", "afp:2"):
        rows.append((f"{s} pp2", 2, 1, ["--pp", "2", "--micro-batches", "4", "--schedule", s] + FAST))
    for s in ("gpipe", "1f1b"):
        rows.append((f"{s} pp4", 4, 1, ["--pp", "4", "--micro-batches", "8", "--schedule", s] + FAST))
    rows.append(("1f1b pp4 slow", 4, 1, ["--pp", "4", "--micro-batches", "8"] + SLOW))
    rows.append(("1f1b pp8", 8, 1, ["--pp", "8", "--micro-batches", "8"] + FAST))
    for n, s in ((2, 2), (3, 2), (4, 2), (2, 4)):
        rows.append((f"avgpipe N{n} pp{s}", s, 1, ["--pp", str(s), "--pipelines", str(n),
                                                  "--micro-batches", str(s)] + FAST))
    rows.append(("avgpipe N2 pp2 dp2", 4, 1, ["--pp", "2", "--dp", "2", "--pipelines", "2",
                                             "--micro-batches", "2"] + FAST))
    # tp within a host: its activations' allreduces over a fast link, dilated more so
    # that the real bytes (100 Gbit / dilation) stay well within what the host moves,
    # and so that the emulation's own hand-overs weigh little: a waiting rank tests
    # every poll interval (at most 10 ms of the host's time, 10 us of the device's at
    # K 1024), where a GPU host's progress thread answers within microseconds.
    tp = ["--batch", "8", "--dilation", "1024"] + NVLINK
    rows.append(("tp2", 2, 1, ["--tp", "2"] + tp))
    rows.append(("tp2 dp2", 4, 2, ["--tp", "2", "--dp", "2", "--bucket-mb", "4"] + tp))
    rows.append(("tp2 pp2", 4, 2, ["--tp", "2", "--pp", "2", "--micro-batches", "4"] + tp))
    occ = ["--pp", "2", "--dp", "2", "--micro-batches", "4", "--bucket-mb", "4"] + SLOW
    rows.append(("occ baseline pp2 dp2", 4, 1, occ))
    rows.append(("occ cb pp2 dp2", 4, 1, occ + ["--cb"]))
    rows.append(("occ cb-epilogue pp2 dp2", 4, 1, occ + ["--cb", "--cb-epilogue-only"]))
    rows.append(("occ fused-embed pp2 dp2", 4, 1, occ + ["--fused-embedding-sync"]))
    rows.append(("occ sc1 pp2 dp2", 4, 1, occ + ["--sc-stages", "1", "--sc-warmup", "0.1"]))
    rows.append(("1f1b pp4 dp4", 16, 1, ["--pp", "4", "--dp", "4", "--micro-batches", "8",
                                        "--bucket-mb", "4"] + FAST))
    return rows


def predict(common):
    """The steady state: warm-ups weigh nothing (a run of many steps, --sc-warmup 0),
    as the timed steps 3.. all follow them (qadam's and powersgd's 2 steps, sc's 10%
    of 12 steps)."""
    steady = list(common)
    steady[steady.index("--steps") + 1] = "100000"
    if "--sc-warmup" in steady:
        steady[steady.index("--sc-warmup") + 1] = "0"
    sim = subprocess.run([BP, "simulate"] + steady, capture_output=True, text=True)
    if sim.returncode:
        sys.exit(f"simulate failed: {' '.join(common)}\n{sim.stderr}")
    return value(sim.stdout, "step_ms"), exposed(sim.stdout), value(sim.stdout, "compute_ms")


def measure(rundir):
    ms, ex = [], {"dp": 0.0, "pp": 0.0, "tp": 0.0, "embed": 0.0}
    with open(os.path.join(rundir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "step" and r["step"] >= 3:
                ms.append(r["step_ms"])
                for k in ex:
                    ex[k] += r["axis_exposed_ms"].get(k, 0) / 1
    n = len(ms)
    return sum(ms) / n, {k: v / n for k, v in ex.items()}


def run(name, w, per_host, opts, a):
    common = ["--device", f"emu:{GPU}", "--dilation", str(a.dilation), "--steps", str(a.steps)] + MODEL + opts
    pred, pexp, pcomp = predict(common)
    # Fewer steps where a step is long on the host's clock (at least 6: steps 3.. timed).
    steps = max(6, min(a.steps, int(a.budget_s * 1e3 / (pred * a.dilation))))
    common[common.index("--steps") + 1] = str(steps)
    run_opts = list(common)
    rundir = os.path.join(a.out, name.replace(" ", "_").replace("#", "r"))
    t0 = time.time()
    train = subprocess.run([CLUSTER, "mpirun", "-np", str(w), "--npernode", str(per_host), BP, "train"]
                           + run_opts + ["--eval-every", "0", "--progress", "none", "--out", rundir,
                                       "--overwrite"] + LOG_ONCE,
                           capture_output=True, text=True)
    if train.returncode:
        sys.exit(f"{name}: train failed: {train.stderr[-2000:]}")
    meas, mexp = measure(rundir)
    return {"name": name, "ranks": w, "per_host": per_host, "options": common, "pred_ms": pred,
            "pred_exposed": pexp, "pred_compute_ms": pcomp, "meas_ms": meas, "meas_exposed": mexp,
            "ratio": meas / pred, "wall_s": time.time() - t0}


def rescore(r):
    r.setdefault("pred_at_run_ms", r["pred_ms"])  # the prediction made before the run
    r["pred_ms"], r["pred_exposed"], r["pred_compute_ms"] = predict(r["options"])
    r["ratio"] = r["meas_ms"] / r["pred_ms"]
    return r


def keep_others(results, path):
    """results, and the rows of the earlier run at path whose configuration did not
    run now (rescored), in the order of configs()."""
    ran = {r["name"].split(" #")[0] for r in results}
    with open(path) as f:
        kept = [rescore(r) for r in json.load(f)["rows"] if r["name"].split(" #")[0] not in ran]
    order = {c[0]: i for i, c in enumerate(configs())}
    return sorted(results + kept, key=lambda r: order.get(r["name"].split(" #")[0], len(order)))


def fmt_exp(e):
    return "/".join(f"{e[k]:.1f}" for k in ("dp", "pp", "tp"))


def row(r):
    return (f"{r['name']:28s} {r['ranks']:2d} {r['pred_ms']:8.2f} {r['meas_ms']:8.2f} {r['ratio']:6.3f} "
            f"{fmt_exp(r['pred_exposed']):>16s} {fmt_exp(r['meas_exposed']):>16s}")


def dilation_of(r):
    o = r["options"]
    return o[len(o) - 1 - o[::-1].index("--dilation") + 1]


def markdown(results, path):
    lines = ["| configuration | ranks | per host | dilation | predicted ms | measured ms | measured / predicted | "
             "before the run: predicted, ratio | exposed dp/pp/tp predicted | exposed dp/pp/tp measured |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['name']} | {r['ranks']} | {r['per_host']} | {dilation_of(r)} | {r['pred_ms']:.2f} | {r['meas_ms']:.2f} | "
              f"{r['ratio']:.3f} | {r.get('pred_at_run_ms', r['pred_ms']):.2f}, "
              f"{r['meas_ms'] / r.get('pred_at_run_ms', r['pred_ms']):.3f} | "
              f"{fmt_exp(r['pred_exposed'])} | {fmt_exp(r['meas_exposed'])} |" for r in results]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def summary(results):
    single = [r for r in results if " #" not in r["name"] or r["name"].endswith(" #1")]
    ok = sum(abs(r["ratio"] - 1) <= 0.10 for r in single)
    before = sum(abs(r["meas_ms"] / r.get("pred_at_run_ms", r["pred_ms"]) - 1) <= 0.10 for r in single)
    print(f"within 10% as predicted before the run: {before} of {len(single)}")
    worst = max(single, key=lambda r: abs(r["ratio"] - 1))
    print(f"within 10%: {ok} of {len(single)}; within 5%: "
          f"{sum(abs(r['ratio'] - 1) <= 0.05 for r in single)} of {len(single)}")
    print(f"largest |measured / predicted - 1|: {abs(worst['ratio'] - 1):.3f} ({worst['name']})")
    for n in sorted({r["name"].split(" #")[0] for r in results if " #" in r["name"]}):
        ms = [r["meas_ms"] for r in results if r["name"].split(" #")[0] == n]
        print(f"repeats of {n}: {len(ms)} runs, measured {min(ms):.2f} to {max(ms):.2f} ms, "
              f"spread (max - min) / mean {(max(ms) - min(ms)) / (sum(ms) / len(ms)):.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--repeat", default="")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--dilation", type=int, default=32)
    ap.add_argument("--budget-s", type=float, default=15)
    ap.add_argument("--out", default="/tmp/bagpipe_emu_validate")
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--rescore", default="")
    ap.add_argument("--keep", default="")
    ap.add_argument("--merge", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.rescore:
        with open(a.rescore) as f:
            results = [rescore(r) for r in json.load(f)["rows"]]
        for r in results:
            print(row(r))
    else:
        only = [s for s in a.only.split(",") if s]
        rep = [s for s in a.repeat.split(",") if s]
        results = []
        for name, w, per_host, opts in [r for r in configs() if not only or r[0] in only]:
            n = a.repeats if name in rep else 1
            for k in range(n):
                results.append(run(name + (f" #{k + 1}" if n > 1 else ""), w, per_host, opts, a))
                print(row(results[-1]), flush=True)
    for path in [s for s in a.merge.split(",") if s]:
        ran = {r["name"].split(" #")[0] for r in results}
        with open(path) as f:
            results += [rescore(r) for r in json.load(f)["rows"] if r["name"].split(" #")[0] not in ran]
    if a.keep:
        results = keep_others(results, a.keep)
    summary(results)
    if a.markdown:
        markdown(results, a.markdown)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
