#!/usr/bin/env python3
"""bagpipe plan against measured times to a loss on emulated V100 clusters (experiments/plan_emu.sh).

Per host count and network: `bagpipe plan --device emu:v100 --cluster ...` (one rank per
node, the network between nodes) ranks every configuration from the emulated device's
costs; its top ones then train a few steps on namespace hosts of scripts/cluster.sh (one
rank per host, the hosts' links shaped by the kernel to the rate over the dilation; the
latency, which this kernel cannot add (no netem), by the runtime's emulation, --net lat=L,
which the run dilates) with the same emulated V100s at that dilation. A configuration's
measured step is the mean of its timed steps (3 to the one before the last, a multiple of 4
of them, so that easgd's and AvgPipe's averaging every 4 steps counts in full; the last
step, where every rank agrees whatever the algorithm, counted once in --steps); async,
whose averaging rounds each move an allreduce's bytes, over enough steps for 3 rounds on
the setting's link (a multiple of 20: its ranks agree every 10); one whose first steps
run as allreduce (qadam's warm-up, Optimus-CC's SC) is timed in its warm-up and after it,
weighted by the shares of --steps that plan predicts with; diloco and streaming-diloco,
whose outer steps (every 100 steps) a short run never reaches, are timed again with an
outer step every 4 steps, and their cost is spread over the 100. Steps to the loss are plan's:
--steps x the factor of the statistical-efficiency studies the project ships (plan's
table), so a configuration's measured time to the loss is that x its measured step.
Per setting: the regret of plan's first pick (its measured time over the best measured,
less 1) and Spearman's rank correlation of predicted and measured times to the loss.
Options: --hosts (4,8), --settings RATE:LAT:DILATION,... , --top (10), --steps (1000),
--timed (11), --jobs (2 runs at once), --out DIR, --json FILE, --markdown FILE, --table FILE.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_runs import BP, CLUSTER, SIM_EAGER, Pool, add_output_args, save, table_only  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plan"))
# bench/plan/validate.py: spearman ranks ties alike; diloco's outer steps are timed as
# there (SYNC_PROBE, outer_period)
from validate import SYNC_PROBE, outer_period, spearman, with_last  # noqa: E402

MODEL = ["--layers", "4", "--embd", "256", "--heads", "4", "--seq-len", "128", "--batch", "128"]
SETTINGS = "100gbit:5us:128,10gbit:50us:64,1gbit:1ms:16,100mbit:10ms:4"
# Options whose first steps run as allreduce: the option that makes the whole timed run
# warm-up, the one that ends it before the timed steps, and its share of a run of n steps.
WARM_UPS = {"--dp-algo qadam": (["--qadam-warmup", "1000000"], ["--qadam-warmup", "2"], lambda n: min(100, n) / n),
            "--sc-stages": (["--sc-warmup", "1"], ["--sc-warmup", "0"], lambda n: int(0.1 * n) / n)}


def plan(hosts, rate, lat, K, a, path):
    """plan's top configurations that fit, for this emulated cluster."""
    bw = bandwidth(rate)
    spec = f"nodes={hosts},per-node=1,intra-bw={bw},intra-lat={lat},inter-bw={bw},inter-lat={lat}"
    r = subprocess.run([BP, "plan", "--device", "emu:v100", "--dilation", str(K), "--cluster", spec] + MODEL +
                       ["--steps", str(a.steps), "--json", path] + SIM_EAGER, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"plan failed: {r.stderr}")
    with open(path) as f:
        return [k for k in json.load(f)["ranking"] if k["verdict"] == "fits"][: a.top]


def warm_up(args):
    return next((w for key, w in WARM_UPS.items() if key in args + " "), None)


def params(hosts, lat, K):
    """The model's parameters, as simulate counts them."""
    r = subprocess.run([BP, "simulate", "--device", "emu:v100", "--dilation", str(K), "--dp",
                        str(hosts), "--net", f"lat={lat}"] + MODEL, capture_output=True, text=True)
    m = re.search(r"; ([0-9.]+) M parameters\)", r.stdout)
    if r.returncode or not m:
        sys.exit(f"simulate failed: {r.stderr}")
    return float(m.group(1)) * 1e6


def async_steps(args, rate, hosts, n, step_s, timed):
    """Steps of a run that holds 3 of async's averaging rounds (a ring allreduce of the
    n parameters each, at the link's rate) in a window of a multiple of 20 steps of at
    least step_s from step 3, then the last; other algorithms' --timed. A window
    shorter than a round (8 steps at 100 Mbit/s: 0.15 s of a 1.6 s round) meets the
    agreements' wait behind the round's transfers at most once, where a long run meets
    it at every round."""
    if "--dp-algo async" not in args:
        return timed
    gbit = float(rate[:-4]) * (1 if rate.endswith("gbit") else 1e-3)
    round_s = 2 * (hosts - 1) / hosts * n * 4 * 8 / (gbit * 1e9)
    window = max(20, 20 * math.ceil(3 * round_s / step_s / 20))
    return min(2 + window + 1, 603)


def bandwidth(rate):
    """scripts/cluster.sh's rate (10gbit) as --net and --cluster take it (10Gbit)."""
    return rate.replace("gbit", "Gbit").replace("mbit", "Mbit")


def setting(hosts, rate, lat, K, a):
    tag = f"h{hosts}_{rate}_{lat}" + ("_runtime" if a.links == "runtime" else "")
    top = plan(hosts, rate, lat, K, a, os.path.join(a.out, f"plan_{tag}.json"))
    subprocess.run([CLUSTER, "down"], check=True)
    size = hosts * a.jobs
    # kernel: tbf shapes the links to rate / K, the runtime adds the latency; runtime: the
    # runtime emulates both (--net, dilated) over unshaped links
    shaped = ["--rate", rate, "--dilation", str(K)] if a.links == "kernel" else []
    subprocess.run([CLUSTER, "up", str(size)] + shaped, check=True, stdout=subprocess.DEVNULL)
    pool = Pool(size, a.jobs)
    net = f"lat={lat}" if a.links == "kernel" else f"bw={bandwidth(rate)},lat={lat}"
    base = ["--device", "emu:v100", "--dilation", str(K), "--net", net] + MODEL
    n, fastest = params(hosts, lat, K), min(t["step_s"] for t in top)
    runs = []
    for i, k in enumerate(top):
        # async's step measured down to a quarter of its prediction (no shorter than the
        # fastest predicted), whose wait at its agreements the run is to find
        shortest = max(fastest, k["step_s"] / 4)
        steps = ["--steps", str(async_steps(k["args"], rate, hosts, n, shortest, a.timed))]
        w, H = warm_up(k["args"]), outer_period(k["args"])
        parts = [("warm", w[0]), ("after", w[1])] if w else [("all", [])]
        if H:
            parts.append(("outer", parts[-1][1] + ["--inner-steps", str(SYNC_PROBE)]))
        for part, extra in parts:
            d = os.path.join(a.out, f"{tag}_{i}_{part}")
            runs.append((i, part, pool.train(d, hosts, 1, base + steps + k["args"].split() + extra)))
    meas = {}
    for i, part, fut in runs:
        r = fut.result()
        meas.setdefault(i, {})[part] = with_last(r["mean_but_last_ms"], r["last_ms"], a.steps)
    rows = []
    for i, k in enumerate(top):
        m, w, H = meas[i], warm_up(k["args"]), outer_period(k["args"])
        share = w[2](a.steps) if w else 0
        plain = m["after"] if w else m["all"]
        if H:
            plain += (m["outer"] - plain) * SYNC_PROBE / H
        step = share * m["warm"] + (1 - share) * plain if w else plain
        rows.append({"rank": k["rank"], "args": k["args"], "factor": k["steps_factor"],
                     "pred_ms": k["step_s"] * 1e3, "pred_s": k["time_to_loss_s"], "meas_ms": step,
                     "meas_s": a.steps * k["steps_factor"] * step / 1e3, "parts_ms": m})
        print(f"{tag} #{k['rank']:2d} predicted {k['step_s'] * 1e3:8.2f} ms measured {step:8.2f} ms "
              f"{json.dumps(m)}  {k['args']}", flush=True)
    return score({"hosts": hosts, "rate": rate, "lat": lat, "dilation": K, "links": a.links, "rows": rows})


def score(s):
    rows = s["rows"]
    best = min(rows, key=lambda r: r["meas_s"])
    first = min(rows, key=lambda r: r["rank"])
    s["regret"] = first["meas_s"] / best["meas_s"] - 1
    s["spearman"] = spearman([r["pred_s"] for r in rows], [r["meas_s"] for r in rows])
    s["spearman_step"] = spearman([r["pred_ms"] for r in rows], [r["meas_ms"] for r in rows])
    errs = sorted(abs(r["meas_ms"] / r["pred_ms"] - 1) for r in rows)
    s["median_err"] = errs[len(errs) // 2]
    print(f"h{s['hosts']} {s['rate']}/{s['lat']} ({s['links']} links): regret {100 * s['regret']:+.1f}%, Spearman "
          f"{s['spearman']:.2f} (steps {s['spearman_step']:.2f})", flush=True)
    return s


def short(args):
    """A configuration without the options every one of them repeats."""
    return args.replace(" --tp 1", "").replace(" --micro-batches 1 --schedule 1f1b", "")


def links(s):
    return ", runtime-emulated links" if s.get("links") == "runtime" else ""


def markdown(results, path):
    out = ["| hosts | network (dilation) | first pick | its measured s to loss | best measured | regret | "
           "Spearman (time to loss) | Spearman (step) | median step error |",
           "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for s in results:
        first = min(s["rows"], key=lambda r: r["rank"])
        best = min(s["rows"], key=lambda r: r["meas_s"])
        out.append(f"| {s['hosts']} | {s['rate']} / {s['lat']} ({s['dilation']}{links(s)}) | `{short(first['args'])}` | "
                   f"{first['meas_s']:.2f} | {best['meas_s']:.2f} (`{short(best['args'])}`) | "
                   f"{100 * s['regret']:+.1f}% | {s['spearman']:.2f} | {s['spearman_step']:.2f} | "
                   f"{100 * s['median_err']:.1f}% |")
    out.append("\nPer configuration (plan's rank, predicted and measured step ms, their ratio, the "
               "steps factor, predicted and measured seconds to the loss, measured rank):")
    for s in results:
        order = sorted(s["rows"], key=lambda r: r["meas_s"])
        out += [f"\n{s['hosts']} hosts, {s['rate']} / {s['lat']}, dilation {s['dilation']}{links(s)}:\n",
                "| rank | configuration | pred ms | meas ms | meas / pred | factor | pred s | meas s | measured rank |",
                "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in sorted(s["rows"], key=lambda r: r["rank"]):
            out.append(f"| {r['rank']} | `{short(r['args'])}` | {r['pred_ms']:.2f} | {r['meas_ms']:.2f} | "
                       f"{r['meas_ms'] / r['pred_ms']:.3f} | {r['factor']:.3f} | {r['pred_s']:.2f} | "
                       f"{r['meas_s']:.2f} | {order.index(r) + 1} |")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="4,8")
    ap.add_argument("--settings", default=SETTINGS)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--timed", type=int, default=11)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--links", choices=("kernel", "runtime"), default="kernel",
                    help="kernel: tbf shapes the hosts' links, the runtime adds the latency; "
                         "runtime: --net emulates both over unshaped links")
    add_output_args(ap, "/tmp/bagpipe_plan_emu")
    a = ap.parse_args()
    if table_only(a, markdown):
        return
    os.makedirs(a.out, exist_ok=True)
    results = []
    for hosts in map(int, a.hosts.split(",")):
        for st in a.settings.split(","):
            rate, lat, K = st.split(":")
            results.append(setting(hosts, rate, lat, int(K), a))
            save(a, results, markdown)  # what finished, should a later setting fail
    subprocess.run([CLUSTER, "down"], check=True)


if __name__ == "__main__":
    main()
