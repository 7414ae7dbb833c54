#!/usr/bin/env python3
"""`bagpipe plan --cluster` at the papers' scale: Bagua's BERT-large setting on 64 V100
(8 per node) at 100 and 10 Gbit/s between nodes, and Optimus-CC's GPT-2.5B on 512 A100
(8 per node, 200 Gbit/s InfiniBand). Writes each answer's top 5 and the best
configuration of each family (plain allreduce, each relaxed algorithm, AvgPipe,
Optimus-CC) as markdown on stdout."""
import json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BP = os.environ.get("BAGPIPE", os.path.join(ROOT, "build", "bagpipe"))
V100 = "flops=125e12,mem-bw=900e9,mem=32GiB"
A100 = "flops=312e12,mem-bw=1555e9,mem=40GiB"
BERT = ["--layers", "24", "--embd", "1024", "--heads", "16", "--seq-len", "384", "--vocab", "30522",
        "--batch", "384"]
GPT25 = ["--layers", "52", "--embd", "1920", "--heads", "24", "--seq-len", "1024", "--vocab", "51200",
         "--batch", "512"]
CASES = [
    ("64 V100, BERT-large shape, 6 samples per GPU, 100 Gbit/s / 50 us between nodes", BERT,
     f"nodes=8,per-node=8,intra-bw=1200Gbit,intra-lat=5us,inter-bw=100Gbit,inter-lat=50us,{V100}"),
    ("64 V100, BERT-large shape, 6 samples per GPU, 10 Gbit/s / 50 us between nodes", BERT,
     f"nodes=8,per-node=8,intra-bw=1200Gbit,intra-lat=5us,inter-bw=10Gbit,inter-lat=50us,{V100}"),
    ("512 A100, GPT-2.5B (Optimus-CC's), batch 512, 200 Gbit/s / 5 us between nodes", GPT25,
     f"nodes=64,per-node=8,intra-bw=2400Gbit,intra-lat=5us,inter-bw=200Gbit,inter-lat=5us,{A100}"),
]
FAMILIES = [
    ("allreduce", lambda k: k["algo"] == "allreduce" and not (k["sc"] or k["cb"] or k["fe"])),
    ("bytegrad", lambda k: k["algo"] == "bytegrad"), ("qadam", lambda k: k["algo"] == "qadam"),
    ("decentralized", lambda k: k["algo"] == "decentralized"),
    ("lp-decentralized", lambda k: k["algo"] == "lp-decentralized"),
    ("async", lambda k: k["algo"] == "async"), ("powersgd", lambda k: k["algo"] == "powersgd"),
    ("easgd", lambda k: k["algo"] == "easgd"), ("AvgPipe", lambda k: k["pipelines"] > 0),
    ("Optimus-CC CB+FE+SC", lambda k: k["sc"] and k["cb"] and k["fe"]),
    ("Optimus-CC SC", lambda k: k["sc"] and not k["cb"] and not k["fe"]),
]


def main():
    tmp = tempfile.mkdtemp()
    for title, model, spec in CASES:
        js = os.path.join(tmp, "p.json")
        p = subprocess.run([BP, "plan"] + model + ["--cluster", spec, "--efficiency", "0.35", "--json", js],
                           capture_output=True, text=True)
        if p.returncode:
            sys.exit(f"plan failed: {p.stderr}")
        d = json.load(open(js))
        fits = [k for k in d["ranking"] if k["verdict"] == "fits"]
        print(f"\n### {title}\n\n`{' '.join(model)} --cluster {spec}` ({len(d['ranking'])} configurations, "
              f"{len(fits)} fit, answered in {d['seconds']:.2f} s)\n")
        print("| rank | configuration | step ms | steps factor | time to loss s |\n|---:|---|---:|---:|---:|")
        for k in fits[:5]:
            print(f"| {k['rank']} | `{k['args']}` | {1e3 * k['step_s']:.0f} | {k['steps_factor']:.3f} | "
                  f"{k['time_to_loss_s']:.0f} |")
        base = min((k for k in fits if FAMILIES[0][1](k)), key=lambda k: k["time_to_loss_s"])
        print("\nBest of each family (step speed-up and time-to-loss speed-up over the best plain allreduce):\n")
        print("| family | rank | configuration | step ms | step x | time to loss x |\n|---|---:|---|---:|---:|---:|")
        for name, f in FAMILIES:
            ks = [k for k in fits if f(k)]
            if not ks:
                continue
            k = min(ks, key=lambda k: k["time_to_loss_s"])
            print(f"| {name} | {k['rank']} | `{k['args']}` | {1e3 * k['step_s']:.0f} | "
                  f"{base['step_s'] / k['step_s']:.2f} | {base['time_to_loss_s'] / k['time_to_loss_s']:.2f} |")


if __name__ == "__main__":
    main()
