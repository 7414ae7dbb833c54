#!/usr/bin/env python3
"""`bagpipe simulate` against measured training runs on this machine.

Per configuration: profile the machine now with `bagpipe simulate --measure` (the
job's other ranks stood for by busy threads), predict with that profile, then train
the same configuration for STEPS steps under scripts/mpirun.sh and take the mean
step time of steps 2.. (step 1 pays the caches' and MPI's warm-up). Prints
predicted / measured / ratio, the drift (rank 0's measured computation over the
predicted one: how much the load moved between profile and run) and the machine's
load (the 1-minute load average of /proc/loadavg, before and after the run), and the
largest error.

A second prediction (`at_run_load`) separates the simulator's model of communication,
overlap and schedule from the load moving under it: the same profile with its
computation set to the load the run itself met (--load: the profile's slowdown times
the drift). Both are printed; only the first is a prediction.

--repeat N runs each row N times over (profile, then run, each time): the spread of
one unchanged configuration's ratio is what this machine allows any prediction made
from a profile taken a few seconds before the run.

Options: --only NAME,NAME (rerun some rows), --repeat N, --steps N, --out DIR, --json FILE,
--markdown FILE (the table in Markdown), --rescore FILE (recompute the columns of a --json FILE from its saved profiles and
runs, e.g. after changing the simulator).
Environment: BAGPIPE (build/bagpipe).
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BP = os.environ.get("BAGPIPE", os.path.join(ROOT, "build", "bagpipe"))
MPIRUN = os.path.join(ROOT, "scripts", "mpirun.sh")
NET = ["--net", "bw=1Gbit,lat=1ms"]
ALGOS = ["allreduce", "bytegrad", "qadam", "decentralized", "lp-decentralized", "async",
         "powersgd", "easgd"]
# qadam and powersgd: most steps after their warm-up; small buckets so that they
# overlap backward (the default 10 MB holds the whole default model).
ALGO_OPTS = {"qadam": ["--qadam-warmup", "3"], "powersgd": ["--powersgd-warmup", "3"],
             "easgd": ["--ea-period", "2"], "decentralized": ["--interval", "2"]}


def configs():
    rows = []
    for w in (2, 4):
        for a in ALGOS:
            base = ["--dp", str(w), "--dp-algo", a, "--bucket-mb", "0.5"] + ALGO_OPTS.get(a, [])
            rows.append((f"{a} dp{w}", w, base))
            if w == 4 or a in ("allreduce", "bytegrad", "decentralized"):
                rows.append((f"{a} dp{w} net", w, base + NET))
    for s in ("gpipe", "1f1b", "afp:2"):
        rows.append((f"{s} pp2", 2, ["--pp", "2", "--micro-batches", "4", "--schedule", s]))
    rows.append(("1f1b pp2 net", 2, ["--pp", "2", "--micro-batches", "4"] + NET))
    rows.append(("avgpipe N2 pp2", 2, ["--pp", "2", "--pipelines", "2", "--micro-batches", "2"]))
    rows.append(("avgpipe N2 pp2 dp2", 4, ["--pp", "2", "--dp", "2", "--pipelines", "2",
                                           "--micro-batches", "2"]))
    rows.append(("tp2", 2, ["--tp", "2"]))
    rows.append(("tp2 pp2", 4, ["--tp", "2", "--pp", "2", "--micro-batches", "2"]))
    occ = ["--pp", "2", "--dp", "2", "--micro-batches", "4"]
    rows.append(("occ baseline pp2 dp2 net", 4, occ + NET))
    rows.append(("occ cb pp2 dp2 net", 4, occ + NET + ["--cb"]))
    rows.append(("occ cb-epilogue pp2 dp2 net", 4, occ + NET + ["--cb", "--cb-epilogue-only"]))
    rows.append(("occ fused-embed pp2 dp2 net", 4, occ + NET + ["--fused-embedding-sync"]))
    rows.append(("occ sc1 pp2 dp2 net", 4, occ + NET + ["--sc-stages", "1", "--sc-warmup", "0.1"]))
    return rows


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def value(text, key):
    for line in text.splitlines():
        if line.split()[:1] == [key]:
            return float(line.split()[1])
    raise ValueError(f"no {key} in:\n{text}")


def exposed(text):
    for line in text.splitlines():
        if line.split()[:1] == ["exposed_ms"]:
            return {k: float(v) for k, v in (x.split("=") for x in line.split()[1:])}
    raise ValueError(f"no exposed_ms in:\n{text}")


def profile_path(out, name):
    return os.path.join(out, name.replace(" ", "_") + ".profile.json")


def score(r, out):
    """Drift and the prediction at the run's load for result r (its run in out)."""
    name, common = r["name"], r["options"]
    prof = profile_path(out, name)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    first = subprocess.run([BP, "simulate"] + common + ["--profile", prof], capture_output=True,
                           text=True, env=env)
    if first.returncode:
        sys.exit(f"{name}: simulate failed: {first.stderr}")
    # Rank 0's computation, tp's blocking allreduces included (on a loaded machine
    # most of their time is waiting for the other tp rank to finish computing),
    # measured and predicted: their ratio is how far the load moved between the
    # profile and the run (drift), apart from communication.
    computes = []
    with open(os.path.join(out, name.replace(" ", "_"), "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") == "step" and rec["step"] >= 2:
                e = rec["axis_exposed_ms"]
                computes.append(rec["step_ms"] - e["dp"] - e["pp"] - e["embed"])
    pe = exposed(first.stdout)
    pred_compute = value(first.stdout, "step_ms") - pe["dp"] - pe["pp"] - pe["embed"]
    r["drift"] = (sum(computes) / len(computes)) / pred_compute
    with open(prof) as f:
        slowdown = json.load(f)["slowdown"]
    load = max(1.0, slowdown * r["drift"])
    again = subprocess.run([BP, "simulate"] + common + ["--profile", prof, "--load", str(load)],
                           capture_output=True, text=True, env=env)
    r["pred_ms"] = value(first.stdout, "step_ms")
    r["at_run_load_ms"] = value(again.stdout, "step_ms")
    r["ratio"] = r["meas_ms"] / r["pred_ms"]
    r["ratio_at_run_load"] = r["meas_ms"] / r["at_run_load_ms"]
    return r


def run(name, w, opts, steps, out):
    common = ["--batch", "16", "--steps", str(steps)] + opts
    prof = profile_path(out, name)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    before = load1()
    sim = subprocess.run([BP, "simulate"] + common + ["--measure", prof], capture_output=True,
                         text=True, env=env)
    if sim.returncode:
        sys.exit(f"{name}: simulate failed: {sim.stderr}")
    pred = value(sim.stdout, "step_ms")
    rundir = os.path.join(out, name.replace(" ", "_"))
    train = subprocess.run([MPIRUN, "-np", str(w), BP, "train"] + common +
                           ["--eval-every", "0", "--progress", "none", "--out", rundir,
                            "--log-every", "1"], capture_output=True, text=True, env=env)
    if train.returncode:
        sys.exit(f"{name}: train failed: {train.stderr[-2000:]}")
    after = load1()
    ms = []
    with open(os.path.join(rundir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "step" and r["step"] >= 2:
                ms.append(r["step_ms"])
    r = {"name": name, "ranks": w, "pred_ms": pred, "meas_ms": sum(ms) / len(ms),
         "load_before": before, "load_after": after, "options": common}
    return score(r, out)


HEADER = (f"{'configuration':30s} {'W':>2s} {'pred_ms':>8s} {'meas_ms':>8s} {'ratio':>6s} "
          f"{'drift':>6s} {'ratio@run_load':>14s} {'load':>11s}")


def row(r):
    return (f"{r['name']:30s} {r['ranks']:2d} {r['pred_ms']:8.2f} {r['meas_ms']:8.2f} "
            f"{r['ratio']:6.3f} {r['drift']:6.3f} {r['ratio_at_run_load']:14.3f} "
            f"{r['load_before']:5.2f}/{r['load_after']:5.2f}")


def markdown(results, path):
    lines = ["| configuration | W | pred_ms | meas_ms | ratio | drift | ratio at run's load | load before/after |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r['name']} | {r['ranks']} | {r['pred_ms']:.1f} | {r['meas_ms']:.1f} | {r['ratio']:.3f} | "
              f"{r['drift']:.3f} | {r['ratio_at_run_load']:.3f} | {r['load_before']:.1f} / {r['load_after']:.1f} |"
              for r in results]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def repeats(results):
    """Per row run more than once: its ratios' spread, and how many of them fall within
    15% of 1 (what an exact simulator would score on this machine)."""
    names = sorted({r["name"].split(" #")[0] for r in results if " #" in r["name"]})
    within = total = 0
    for n in names:
        ratios = [r["ratio"] for r in results if r["name"].split(" #")[0] == n]
        ok = sum(abs(x - 1) <= 0.15 for x in ratios)
        within, total = within + ok, total + len(ratios)
        print(f"repeats of {n}: ratio {min(ratios):.3f} to {max(ratios):.3f}, "
              f"{ok} of {len(ratios)} within 15%")
    if names:
        print(f"repeats: {within} of {total} within 15%")


def summary(results):
    worst = max(results, key=lambda r: abs(r["ratio"] - 1))
    print(f"largest |measured / predicted - 1|: {abs(worst['ratio'] - 1):.3f} ({worst['name']})")
    worst = max(results, key=lambda r: abs(r["ratio_at_run_load"] - 1))
    print(f"at the run's load: {abs(worst['ratio_at_run_load'] - 1):.3f} ({worst['name']}); "
          f"within 15%: {sum(abs(r['ratio_at_run_load'] - 1) <= 0.15 for r in results)} of "
          f"{len(results)} (predicted: {sum(abs(r['ratio'] - 1) <= 0.15 for r in results)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default="/tmp/bagpipe_simulate_validate")
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--rescore", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    print(HEADER, flush=True)
    if a.rescore:
        with open(a.rescore) as f:
            results = [score(r, a.out) for r in json.load(f)["rows"]]
        for r in results:
            print(row(r))
    else:
        only = [s for s in a.only.split(",") if s]
        results = []
        for name, w, opts in [r for r in configs() if not only or r[0] in only]:
            for k in range(a.repeat):
                results.append(run(name + (f" #{k + 1}" if a.repeat > 1 else ""), w, opts, a.steps, a.out))
                print(row(results[-1]), flush=True)
    summary(results)
    repeats(results)
    if a.markdown:
        markdown(results, a.markdown)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
