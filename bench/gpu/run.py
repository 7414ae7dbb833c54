#!/usr/bin/env python3
"""bagpipe on the GPU against PyTorch on the same GPU, side by side, in one run.

For the default gpt (4 layers, 128 channels, 4 heads, T 64, B 16) and the GPT-2 small
shape (12 layers, 768 channels, 12 heads, T 1024, B 16; byte vocabulary), in fp32 (TF32
products) and bf16: the median step time of bagpipe (bench/gpu/gpu_bench.c), PyTorch
eager and torch.compile (bench/gpu/torch_gpt.py), tokens per second, model FLOP
utilization (llm.c's count: 6 N + 12 L C T FLOPs per token, against the GPU's dense
peak: TF32 for fp32, bf16 for bf16) and bagpipe's time over PyTorch's. Then MinMaxUInt8
on the GPU against the memory's peak, and the default gpt trained on the GPU and on the
CPU (validation loss of each). One table; the numbers also go to --json. The runs that
matter most come first (bagpipe and eager PyTorch), torch.compile last, and nothing
starts after --deadline.

  bench/gpu/run.py --bin build-cuda/bench/gpu/gpu_bench --text kjv.txt [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Dense peaks (FLOP/s) by GPU name: NVIDIA's data sheets, without sparsity.
PEAKS = {"H200": {"fp32": 494.7e12, "bf16": 989.4e12}, "H100": {"fp32": 494.7e12, "bf16": 989.4e12},
         "A100": {"fp32": 156e12, "bf16": 312e12}}
# the default gpt, GPT-2 small, and the 303 M gpt of the emulated AvgPipe study
# (docs/results/avgpipe_emu: 24 blocks of 1024, T 128, B 8)
SHAPES = [("gpt", 4, 128, 4, 64, 16), ("gpt2-small", 12, 768, 12, 1024, 16),
          ("gpt-303m", 24, 1024, 16, 128, 8)]


def sh(cmd, timeout):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %.0f s" % timeout}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def flops_per_token(L, C, T, params):
    return 6 * params + 12 * L * C * T


def print_compute_model(rows):
    """bagpipe's phases on this GPU beside the emulated device of its data sheet."""
    have = [r for r in rows if r.get("impl") == "bagpipe" and "model_ms" in r]
    if not have:
        return
    print("\nThe compute model against this GPU: forward, backward, update (ms), measured with a "
          "synchronization after each, and on the emulated %s (--device emu:GPU's model, "
          "efficiency 0.5); measured / modeled" % have[0]["sheet"])
    print("%-11s %-5s %26s %26s %20s %16s" % ("model", "dtype", "measured", "emulated", "ratio",
                                            "step / model"))
    for r in have:
        m, e = r["phases_ms"], r["model_ms"]
        ratio = [a / b if b > 0 else float("nan") for a, b in zip(m, e)]
        r["model_ratio"] = ratio
        r["step_over_model"] = r["ms"] / sum(e)
        print("%-11s %-5s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %6.2f %6.2f %6.2f %15.2fx" % (
            r["shape"], r["dtype"], *m, *e, *ratio, r["step_over_model"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--text", help="text for the GPU-vs-CPU training run (skipped without)")
    ap.add_argument("--train-steps", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--deadline", type=float, help="Unix time after which runs are skipped")
    ap.add_argument("--json", default=os.path.join(HERE, "..", "results", "gpu.json"))
    a = ap.parse_args()
    rows, gpu = [], ""
    deadline = a.deadline or float("inf")

    def timed(cmd, timeout):
        left = deadline - time.time()
        if left < 20:
            return {"error": "skipped: the time budget is spent"}
        return sh(cmd, min(timeout, left))

    # the runs that matter most first (bagpipe and eager), torch.compile last
    plan = []
    for name, L, C, H, T, B in SHAPES:
        shape = ["--layers", str(L), "--embd", str(C), "--heads", str(H), "--seq-len", str(T),
                 "--batch", str(B), "--steps", str(a.steps)]
        for dt in ("fp32", "bf16"):
            meta = dict(shape=name, dtype=dt, L=L, C=C, T=T, B=B)
            plan.append((0, meta, [a.bin, "step", str(L), str(C), str(H), str(T), str(B), dt, str(a.steps)]))
            plan.append((0, meta, [sys.executable, os.path.join(HERE, "torch_gpt.py"), "--dtype", dt] + shape))
            if not a.no_compile:
                plan.append((1, meta, [sys.executable, os.path.join(HERE, "torch_gpt.py"), "--dtype", dt,
                                       "--compile"] + shape))
    results = {}
    for phase in (0, 1):
        if phase == 1:
            codec = timed([a.bin, "codec", str(1 << 26)], 120)
            tr = timed([a.bin, "train", a.text, str(a.train_steps)], 300) if a.text else None
        for i, (ph, meta, cmd) in enumerate(plan):
            if ph == phase:
                r = timed(cmd, 400 if "--compile" in cmd else 300)
                r.setdefault("impl", "bagpipe" if cmd[0] == a.bin else
                             "torch-compile" if "--compile" in cmd else "torch-eager")
                results[i] = dict(r, **meta)
    for i in sorted(results):
        r = results[i]
        gpu = r.get("gpu", gpu)
        eager = next((x.get("ms") for x in results.values() if x["impl"] == "torch-eager" and
                      x["shape"] == r["shape"] and x["dtype"] == r["dtype"]), None)
        if "ms" in r and "params" in r:
            r["tok_s"] = r["B"] * r["T"] / (r["ms"] / 1e3)
            r["flops"] = flops_per_token(r["L"], r["C"], r["T"], r["params"]) * r["tok_s"]
        if "ms" in r and eager:
            r["vs_eager"] = r["ms"] / eager
        rows.append(r)
    peak = next((v for k, v in PEAKS.items() if k in gpu), None)
    print("\nGPU step time, bagpipe vs PyTorch (%s; MFU against the dense %s peak)" %
          (gpu or "GPU", "TF32/bf16" if peak else "unknown"))
    print("%-11s %-5s %-14s %10s %12s %7s %9s" % ("model", "dtype", "impl", "ms/step", "tokens/s",
                                                  "MFU", "/eager"))
    for r in rows:
        if "error" in r:
            print("%-11s %-5s %-14s  error: %s" % (r["shape"], r["dtype"], r.get("impl", "?"), r["error"]))
            continue
        mfu = "%6.1f%%" % (100 * r["flops"] / peak[r["dtype"]]) if peak else "     ?"
        print("%-11s %-5s %-14s %10.2f %12.0f %7s %8.2fx" % (r["shape"], r["dtype"], r["impl"], r["ms"],
                                                            r["tok_s"], mfu, r.get("vs_eager", float("nan"))))
    print_compute_model(rows)
    rows.append(dict(codec))
    if "error" in codec:
        print("\nMinMaxUInt8 on the GPU: error: %s" % codec["error"])
    else:
        print("\nMinMaxUInt8 encode+decode of 2^26 floats: %.2f ms, %.0f GB/s = %.0f%% of %.0f GB/s peak "
              "(target >= 50%%)" % (codec["ms"], codec["gbps"], 100 * codec["fraction"], codec["peak_gbps"]))
    if tr is not None:
        rows.append(dict(tr, what="train"))
        if "error" in tr:
            print("GPU vs CPU training: error: %s" % tr["error"])
        else:
            print("default gpt, %d steps: validation loss GPU %.4f, CPU %.4f (%.2f%% apart, target <= 1%%); "
                  "step %.2f ms GPU, %.2f ms CPU" % (tr["steps"], tr["gpu_val_loss"], tr["cpu_val_loss"],
                                                   100 * tr["rel"], tr["gpu_ms"], tr["cpu_ms"]))
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
