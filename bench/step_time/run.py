#!/usr/bin/python3
"""Step time of bagpipe vs PyTorch on the same model and batch, 1 thread each.

Runs, in one invocation and alternating (bagpipe, torch, bagpipe, torch, ...), a short
training run of each model in each system, drops the warm-up steps, and prints the
median step time of each, the ratio bagpipe/PyTorch (target <= 1.0), and the peak
resident memory of each process against its theoretical need
(parameters + gradients + optimizer state + activations).

  bench/step_time/run.py                      # gpt and mlp, 5 rounds, build/bagpipe
  bench/step_time/run.py --torch-only         # only the PyTorch half
  bench/step_time/run.py --bagpipe PATH --rounds 7 --steps 30 --models gpt
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH_TRAIN = os.path.join(ROOT, "bench", "torch", "train.py")
MIB = 2**20


def one_thread_env():
    # both systems get exactly one compute thread: OpenBLAS for bagpipe, OpenMP/MKL for torch
    env = dict(os.environ)
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def run(cmd, what):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=one_thread_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"step_time: {what} failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p.stdout, time.perf_counter() - t0


def parse_jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def summarize(records, warmup):
    """(step times after warm-up, summary object) from a metrics stream."""
    steps = [r["step_ms"] for r in records if r.get("type") == "step" and r["step"] > warmup]
    summ = next((r for r in records if r.get("type") == "summary"), {})
    return steps, summ


def bagpipe_run(a, model, tmp):
    run_dir = tempfile.mkdtemp(prefix=f"bagpipe_{model}_", dir=tmp)  # fresh per run: nothing appended
    metrics = os.path.join(run_dir, "metrics.jsonl")
    # --out keeps the end-of-run checkpoint out of the repository
    cmd = [a.bagpipe, "train", "--model", model, "--steps", str(a.warmup + a.steps), "--eval-every", "0",
           "--metrics", metrics, "--out", run_dir, "--progress", "none",
           "--threads", "1"]
    _, wall = run(cmd, f"bagpipe {model}")
    with open(metrics) as f:
        return summarize(parse_jsonl(f.read()), a.warmup) + (wall,)


def torch_run(a, model, tmp):
    cmd = ["/usr/bin/python3", TORCH_TRAIN, "--model", model, "--threads", "1",
           "--time-steps", str(a.steps), "--time-warmup", str(a.warmup)]
    out, wall = run(cmd, f"torch {model}")
    return summarize(parse_jsonl(out), a.warmup) + (wall,)


def memory_row(name, s):
    need = sum(s.get(k, 0) for k in ("param_bytes", "grad_bytes", "optim_bytes", "act_bytes"))
    rss = s.get("peak_rss_bytes", 0)
    cols = [s.get(k, 0) / MIB for k in ("param_bytes", "grad_bytes", "optim_bytes", "act_bytes")]
    line = f"  {name:8s} peak RSS {rss / MIB:8.1f} MiB | need {need / MIB:7.2f} MiB = params {cols[0]:.2f}" \
           f" + grads {cols[1]:.2f} + optim {cols[2]:.2f} + acts {cols[3]:.2f}"
    if "baseline_rss_bytes" in s:  # torch: interpreter, libraries and data before the model exists
        line += f" | runtime+data before model {s['baseline_rss_bytes'] / MIB:.1f} MiB"
    return line + (f" | RSS/need {rss / need:.1f}x" if need else "")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bagpipe", default=os.path.join(ROOT, "build", "bagpipe"), help="binary (default build/bagpipe)")
    p.add_argument("--models", default="gpt,mlp", help="comma-separated (default gpt,mlp)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per model (default 5)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per run (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps at the start of each run (default 3)")
    p.add_argument("--torch-only", action="store_true", help="skip bagpipe (e.g. before it is built)")
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args()
    a.bagpipe = os.path.abspath(a.bagpipe)
    impls = ["torch"] if a.torch_only else ["bagpipe", "torch"]
    if "bagpipe" in impls and not os.access(a.bagpipe, os.X_OK):
        sys.exit(f"step_time: --bagpipe {a.bagpipe}: not an executable (build it, or pass --torch-only)")
    runners = {"bagpipe": bagpipe_run, "torch": torch_run}
    models = a.models.split(",")
    res = {m: {i: {"steps": [], "round_medians": [], "summary": {}, "wall_s": []} for i in impls} for m in models}

    print(f"step_time: {a.rounds} rounds x {a.steps} timed steps (+{a.warmup} warm-up), 1 thread, "
          f"order {' / '.join(impls)} alternating", flush=True)
    with tempfile.TemporaryDirectory(prefix="bp_step_time_") as tmp:
        for m in models:
            for r in range(a.rounds):
                for impl in impls:
                    steps, summ, wall = runners[impl](a, m, tmp)
                    if not steps:
                        sys.exit(f"step_time: {impl} {m}: no step records after warm-up")
                    d = res[m][impl]
                    d["steps"] += steps
                    d["round_medians"].append(statistics.median(steps))
                    d["wall_s"].append(wall)
                    # keep the largest peak RSS seen over the rounds
                    if summ.get("peak_rss_bytes", 0) >= d["summary"].get("peak_rss_bytes", 0):
                        d["summary"] = summ
                    print(f"  {m} round {r + 1}: {impl:7s} median {d['round_medians'][-1]:8.2f} ms/step",
                          flush=True)

    print("\nresults (median over all timed steps of all rounds):")
    for m in models:
        med = {i: statistics.median(res[m][i]["steps"]) for i in impls}
        rng = {i: (min(res[m][i]["round_medians"]), max(res[m][i]["round_medians"])) for i in impls}
        for i in impls:
            res[m][i]["median_ms"] = med[i]
            print(f"  {m} {i:7s} {med[i]:8.2f} ms/step (round medians {rng[i][0]:.2f}..{rng[i][1]:.2f})")
        if "bagpipe" in impls:
            ratio = med["bagpipe"] / med["torch"]
            res[m]["ratio"] = ratio
            verdict = "meets" if ratio <= 1.0 else "MISSES"
            print(f"  {m} ratio bagpipe/PyTorch = {ratio:.3f} ({verdict} target <= 1.0)")
    print("\npeak resident memory vs theoretical need:")
    for m in models:
        for i in impls:
            print(memory_row(f"{m} {i}", res[m][i]["summary"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
