#!/usr/bin/python3
"""bagpipe's CPU training against PyTorch's, side by side: each case runs the two
commands in turn (A B A B ...), times each whole process (user + system CPU seconds,
start-up and data loading included) and prints the median of the per-pair ratios
bagpipe / PyTorch, so that a machine whose speed drifts still gives a fair ratio.
One thread each (OPENBLAS_NUM_THREADS=1, --threads 1 for both).

  bench/cpu_step/run.py [--pairs 5] [--cases gpt,gpt-openblas,gpt-bf16,gpt2s,gpt2s-bf16]
                        [--steps N] [--gpt2s-steps N] [--warmup 1] [--bin build/bagpipe]
  LLMC_DIR=/path/to/llm.c bench/cpu_step/run.py ...

With LLMC_DIR naming a checkout of karpathy/llm.c, the fp32 cases run llm.c's CPU
trainer (train_gpt2.c, built here with -Ofast -march=native as its Makefile does,
through llmc.c: same shape, vocabulary 256, AdamW at lr 1e-3, one forward at the end)
as a third process of each pair, and print bagpipe / llm.c beside bagpipe / PyTorch;
without it that column says "-". llm.c's code is never part of bagpipe.

Cases: gpt (the default gpt, 4 layers, 128 channels, T 64, B 16, with --matmul auto),
gpt-openblas (the same on OpenBLAS, the default library), gpt-bf16 (--dtype bf16
against PyTorch's bf16 autocast), gpt2s and gpt2s-bf16 (GPT-2 small's shape: 12 layers,
768 channels, 12 heads, T 256, B 4). Both evaluate once at the end on one batch. The
first pair is a warm-up, not counted (--matmul auto measures its shapes there once
per machine; --warmup 0 skips it where the cache is already filled). Each pair prints
its CPU seconds (bagpipe, PyTorch[, llm.c]) and the running median as it ends; the
table row comes at the end of each case. Prints the CPU model and the library each
bagpipe run reported.
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH = [sys.executable, os.path.join(ROOT, "bench", "torch", "train.py")]

SHAPES = {
    "gpt": [],
    "gpt2s": ["--layers", "12", "--embd", "768", "--heads", "12", "--seq-len", "256", "--batch", "4"],
}
# The shapes for llm.c, which has no defaults of bagpipe's: layers, channels, heads, T, B.
DIMS = {"gpt": (4, 128, 4, 64, 16), "gpt2s": (12, 768, 12, 256, 4)}
CASES = {  # name: (shape, dtype, bagpipe's extra options)
    "gpt": ("gpt", "fp32", ["--matmul", "auto"]),
    "gpt-openblas": ("gpt", "fp32", ["--matmul", "openblas"]),
    "gpt-bf16": ("gpt", "bf16", ["--matmul", "auto"]),
    "gpt2s": ("gpt2s", "fp32", ["--matmul", "auto"]),
    "gpt2s-bf16": ("gpt2s", "bf16", ["--matmul", "auto"]),
}


def cpu_seconds(cmd, log):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w") as out:
        subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def build_llmc(work):
    """llmc.c against $LLMC_DIR's train_gpt2.c, and the text it trains on; None without."""
    src = os.environ.get("LLMC_DIR")
    if not src:
        return None
    exe, text = os.path.join(work, "llmc"), os.path.join(work, "kjv.txt")
    subprocess.run(["cc", "-Ofast", "-march=native", "-fopenmp", "-DOMP", "-w", "-I", src,
                    os.path.join(HERE, "llmc.c"), "-lm", "-o", exe], check=True)
    sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
    import data  # noqa: E402  (the bible's range PyTorch's script trains on)
    with open(text, "wb") as f:
        subprocess.run(["bible", data.KJV_RANGE], check=True, stdout=f)
    return exe, text


def cpu_model():
    with open("/proc/cpuinfo") as f:
        text = f.read()
    name = re.search(r"model name\s*:\s*(.*)", text)
    fam, mod = re.search(r"cpu family\s*:\s*(\d+)", text), re.search(r"\nmodel\s*:\s*(\d+)", text)
    flags = re.search(r"flags\s*:\s*(.*)", text).group(1).split()
    has = [f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{name.group(1) if name else '?'} (family {fam.group(1)}, model {mod.group(1)}; {' '.join(has)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--cases", default="gpt,gpt-openblas,gpt-bf16,gpt2s,gpt2s-bf16")
    ap.add_argument("--steps", type=int, default=150, help="default gpt's steps (default 150)")
    ap.add_argument("--gpt2s-steps", type=int, default=20, help="GPT-2 small's steps (default 20)")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted pairs first (default 1)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bagpipe"))
    a = ap.parse_args()
    if a.pairs < 1 or a.warmup < 0:
        ap.error("--pairs must be at least 1 and --warmup at least 0")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    print(f"cpu: {cpu_model()}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    work = tempfile.mkdtemp(prefix="bp_cpu_step_")
    llmc = build_llmc(work)
    print(f"{'case':13s} {'dtype':5s} {'steps':>5s}  {'/pytorch (min-max)':>22s}  "
          f"{'/llm.c (min-max)':>22s}  products; bagpipe val loss", flush=True)
    for name in a.cases.split(","):
        shape, dtype, extra = CASES[name]
        steps = str(a.steps if shape == "gpt" else a.gpt2s_steps)
        common = SHAPES[shape] + ["--steps", steps, "--eval-batches", "1", "--threads", "1"]
        ours = [a.bin, "train", "--model", "gpt", *common, "--eval-every", steps, "--dtype", dtype,
                "--progress", "none", "--out", os.path.join(work, name), "--overwrite",
                "--no-final-checkpoint", *extra]  # the others save none either
        cmds = [ours, [*TORCH, "--model", "gpt", *common, "--eval-every", "0", "--dtype", dtype]]
        if llmc and dtype == "fp32":
            cmds.append([llmc[0], *map(str, DIMS[shape]), steps, llmc[1]])
        logs = [os.path.join(work, f"{name}.{i}") for i in range(len(cmds))]
        ratios = [[] for _ in cmds[1:]]
        for pair in range(a.pairs + a.warmup):
            t = [cpu_seconds(cmd, log) for cmd, log in zip(cmds, logs)]
            counted = pair >= a.warmup
            for i in range(1, len(cmds)):
                if counted:
                    ratios[i - 1].append(t[0] / t[i])
            # Each pair as it ends, so that a long run killed half-way still says something.
            times = " ".join(f"{x:.1f}" for x in t)
            running = " ".join(f"{statistics.median(r):.3f}" for r in ratios) if counted else "warm-up"
            label = f"pair {pair + 1 - a.warmup}" if counted else f"warm-up {pair + 1}"
            print(f"  {name} {label}: cpu s {times}; median so far {running}; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
        with open(logs[0]) as f:
            text = f.read()
        lib = re.search(r"matrix products: (.*)", text)
        val = re.search(r"validation loss ([0-9.]+)", text)
        cols = [f"{statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})" for r in ratios] + ["-"]
        print(f"{name:13s} {dtype:5s} {steps:>5s}  {cols[0]:>22s}  {cols[1]:>22s}  "
              f"{lib.group(1) if lib else 'openblas'}; {val.group(1) if val else '?'}", flush=True)
    print(f"{a.pairs} pairs each ({a.warmup} warm-up pairs first, not counted); load average at the end "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
