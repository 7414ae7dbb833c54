#!/usr/bin/env python3
"""The three papers' studies at their scale, predicted by `bagpipe simulate` from
data-sheet numbers; writes docs/results/scale.md (or --out).

  1. Bagua's trade-off: every dp algorithm x 10/25/100 Gbps between nodes x 16-128
     V100 workers (8 per node, NVLink within), a BERT-large-sized model.
  2. Optimus-CC's ablation: GPT-2.5B as TP8 x PP4 x DP4 on 128 A100 (8 per node),
     200 Gbps InfiniBand between nodes.
  3. AvgPipe against gpipe and 1f1b as the pipeline deepens, S = 2..16, a GPT-2
     large-sized model, one stage per V100, 8 per node, 100 Gbps between nodes.

Environment: BAGPIPE (build/bagpipe). Runs in seconds: nothing is allocated.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BP = os.environ.get("BAGPIPE", os.path.join(ROOT, "build", "bagpipe"))

# Data sheets. V100 SXM2: 125 TFLOP/s fp16 tensor cores, 900 GB/s HBM2, NVLink 2
# (300 GB/s per GPU). A100 SXM4 40 GB: 312 TFLOP/s bf16, 1555 GB/s HBM2e, NVLink 3
# (600 GB/s per GPU). HDR InfiniBand: 200 Gbit/s per port. Efficiency: the share of
# those peaks that training kernels reach (about a third for these models).
V100 = ["--device-flops", "125e12", "--device-bw", "900e9", "--efficiency", "0.35"]
A100 = ["--device-flops", "312e12", "--device-bw", "1555e9", "--efficiency", "0.35"]
NVLINK_V100 = "bw=1200Gbit,lat=5us"  # a ring over NVLink 2: ~150 GB/s per direction
NVLINK_A100 = "bw=2400Gbit,lat=5us"
TCP_LAT = "50us"

BERT_LARGE = ["--layers", "24", "--embd", "1024", "--heads", "16", "--seq-len", "384",
              "--vocab", "30522"]
GPT25B = ["--layers", "52", "--embd", "1920", "--heads", "24", "--seq-len", "1024",
          "--vocab", "51200"]  # the paper's artifact scripts (GPT2-2.5B-*-Breakdown.sh)
GPT2_LARGE = ["--layers", "36", "--embd", "1280", "--heads", "20", "--seq-len", "1024",
              "--vocab", "50257"]

ALGOS = ["allreduce", "bytegrad", "qadam", "decentralized", "lp-decentralized", "async",
         "powersgd", "easgd"]


def simulate(args):
    r = subprocess.run([BP, "simulate", "--steps", "10000"] + args, capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(f"bagpipe simulate {' '.join(args)}: {r.stderr}")
    out = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] in ("step_ms", "samples_per_s", "peak_MB", "bubble", "compute_ms"):
            out[f[0]] = float(f[1])
        if f and f[0] in ("exposed_ms", "bytes_max"):
            out[f[0]] = {k: float(v) for k, v in (x.split("=") for x in f[1:])}
    return out


def bagua(md):
    md.append("## 1. Bagua's trade-off: algorithms x network x workers\n")
    md.append("BERT-large-sized gpt (24 layers, 1024 channels, sequence 384, vocabulary "
              "30522; 335 M parameters), 6 samples per worker and step (Bagua's BERT-large "
              "fine-tuning setting), V100 data sheet at efficiency 0.35, 8 workers per node "
              "over NVLink, the nodes over TCP at 10, 25 or 100 Gbit/s (50 us), gradients "
              "in fp32. Bagua runs its algorithms hierarchically (within the node first, "
              "then among one leader per node), so every row here does too (`--hierarchical`). "
              "Defaults otherwise: decentralized shift_one every step, async every 20 ms, "
              "PowerSGD rank 8, easgd every 4 steps, qadam after its warm-up (mean over "
              "10000 steps). Cells: samples per second (all workers), and in brackets the "
              "speedup over allreduce.\n")
    for gbps in (10, 25, 100):
        md.append(f"\n### {gbps} Gbit/s between nodes\n")
        md.append("| algorithm | 16 workers | 32 | 64 | 128 |")
        md.append("|---|---|---|---|---|")
        base = {}
        rows = []
        for a in ALGOS:
            cells = []
            for w in (16, 32, 64, 128):
                r = simulate(BERT_LARGE + V100 + [
                    "--batch", str(6 * w), "--dp", str(w), "--dp-algo", a, "--hierarchical",
                    "--intra", NVLINK_V100, "--inter", f"bw={gbps}Gbit,lat={TCP_LAT}",
                    "--ranks-per-node", "8"])
                if a == "allreduce":
                    base[w] = r["samples_per_s"]
                cells.append(r["samples_per_s"])
            rows.append((a, cells))
        for a, cells in rows:
            md.append(f"| {a} | " + " | ".join(
                f"{c:.0f} ({c / base[w]:.2f}x)" for c, w in zip(cells, (16, 32, 64, 128))) + " |")
    md.append("")


def optimus(md):
    md.append("## 2. Optimus-CC's ablation: GPT-2.5B, TP8 x PP4 x DP4 on 128 A100\n")
    md.append("GPT-2.5B as the paper's artifact scripts set it (52 layers, 1920 channels, 24 "
              "heads, sequence 1024; vocabulary 51200, GPT-2's padded; 2.4 B parameters), "
              "global batch 512 in micro-batches of 8 (16 per pipeline and step), 1f1b, A100 "
              "data sheet at efficiency 0.35, 8 GPUs per node (a node holds one stage's 8 tp "
              "ranks), the nodes over 200 Gbit/s InfiniBand (5 us): pipeline and dp traffic "
              "cross the network, tp stays on NVLink. The rows follow the artifact's Figure "
              "10 scripts: CB is rank 16 on the epilogue only with lazy error propagation; SC "
              "compresses the dp gradients of the first 3 stages with PowerSGD rank 128, no "
              "warm-up. Two rows more: CB on every backward send, and SC alone.\n")
    base = GPT25B + A100 + ["--batch", "512", "--dp", "4", "--pp", "4", "--tp", "8",
                            "--micro-batches", "16", "--intra", NVLINK_A100,
                            "--inter", "bw=200Gbit,lat=5us", "--ranks-per-node", "8"]
    cb = ["--cb", "--cb-rank", "16", "--cb-epilogue-only"]
    fe = ["--fused-embedding-sync"]
    sc = ["--sc-stages", "3", "--sc-rank", "128", "--sc-warmup", "0"]
    rows = [("baseline (Megatron)", []),
            ("CB", cb),
            ("CB + FE", cb + fe),
            ("CB + FE + SC (Optimus-CC)", cb + fe + sc),
            ("CB on every send", ["--cb", "--cb-rank", "16"]),
            ("SC alone", sc)]
    md.append("| configuration | step ms | speedup | exposed dp ms | pp idle ms | tp ms | "
              "embed ms | pp MB/step/rank | dp MB/step/rank | peak GB |")
    md.append("|---|---|---|---|---|---|---|---|---|---|")
    t0 = None
    for name, extra in rows:
        r = simulate(base + extra)
        t0 = t0 or r["step_ms"]
        e, b = r["exposed_ms"], r["bytes_max"]
        md.append(f"| {name} | {r['step_ms']:.0f} | {t0 / r['step_ms']:.3f}x | {e['dp']:.0f} | "
                  f"{e['pp']:.0f} | {e['tp']:.0f} | {e['embed']:.1f} | {b['pp'] / 1e6:.0f} | "
                  f"{b['dp'] / 1e6:.0f} | {r['peak_MB'] / 1024:.1f} |")
    md.append("")


def avgpipe(md):
    md.append("## 3. AvgPipe against gpipe and 1f1b as the pipeline deepens\n")
    md.append("GPT-2 large shape (36 layers, 1280 channels, sequence 1024, vocabulary 50257; "
              "774 M parameters), one stage per V100 (data sheet, efficiency 0.35), 8 per node "
              "over NVLink, nodes over 100 Gbit/s (5 us). The batch that convergence allows "
              "is fixed at 32 sequences per pipeline and step, in micro-batches of 4 (M = 8): "
              "gpipe and 1f1b run one pipeline; AvgPipe runs N = 2 or 4 pipelines on the same "
              "ranks (each its own batch of 32, interleaved in one afp:1 stream, elastic "
              "averaging every 4 steps, no communication). Cells: samples per second, and for "
              "AvgPipe its speedup over the better of gpipe and 1f1b; the bubble in brackets.\n")
    md.append("| S | gpipe | 1f1b | AvgPipe N=2 | AvgPipe N=4 | peak GB 1f1b / N=4 |")
    md.append("|---|---|---|---|---|---|")
    for S in (2, 4, 8, 16):
        common = GPT2_LARGE + V100 + ["--pp", str(S), "--micro-batches", "8", "--intra",
                                      NVLINK_V100, "--inter", "bw=100Gbit,lat=5us",
                                      "--ranks-per-node", "8"]
        g = simulate(common + ["--batch", "32", "--schedule", "gpipe"])
        f = simulate(common + ["--batch", "32", "--schedule", "1f1b"])
        best = max(g["samples_per_s"], f["samples_per_s"])
        cells = [f"{g['samples_per_s']:.1f} ({g['bubble']:.0%})",
                 f"{f['samples_per_s']:.1f} ({f['bubble']:.0%})"]
        peak4 = 0
        for N in (2, 4):
            a = simulate(common + ["--batch", str(32 * N), "--pipelines", str(N),
                                   "--schedule", "afp:1"])
            peak4 = a["peak_MB"]
            cells.append(f"{a['samples_per_s']:.1f} ({a['samples_per_s'] / best:.2f}x, "
                         f"{a['bubble']:.0%})")
        md.append(f"| {S} | " + " | ".join(cells) +
                  f" | {f['peak_MB'] / 1024:.1f} / {peak4 / 1024:.1f} |")
    md.append("")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results", "scale.md"))
    a = ap.parse_args()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    md = ["<!-- generated by bench/simulate/scale.sh; edit the script, not this file "
          "(the commentary lives in docs/results/scale_notes.md) -->",
          "# Scale tables: the three papers' studies, predicted\n",
          f"Generated by `bench/simulate/scale.sh` with `bagpipe simulate` at commit {commit} "
          f"on {time.strftime('%Y-%m-%d', time.gmtime())}. Every number is a prediction from "
          "data-sheet hardware (no measurement at this scale is possible here); the "
          "simulator is validated on this machine in bench/simulate/README.md.\n"]
    bagua(md)
    optimus(md)
    avgpipe(md)
    notes = os.path.join(os.path.dirname(a.out), "scale_notes.md")
    if os.path.exists(notes):
        with open(notes) as f:
            md.append(f.read())
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(md) + "\n")
    os.replace(tmp, a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
