#!/usr/bin/env python3
"""bagpipe plan against measured times to a loss on kernel-shaped hosts.

For each host count and network setting: `scripts/cluster.sh up H --rate R` (one rank
per host; tbf shapes the bandwidth, and the latency, which this kernel cannot add
(no netem), is the runtime's emulation, --net lat=L, passed to plan and to every run);
`bagpipe plan` on those ranks ranks the configurations; the top ones (and plain
allreduce, the target's source) each train a few steps there, shaped, for their
mean step time over whole averaging periods (qadam, whose first 100 steps run as
allreduce, is timed both in its warm-up and after it, the two weighted by their shares
of --steps, since plan predicts the mean over the run; diloco and streaming-diloco,
whose outer steps come every 100 steps, which a short run never reaches, are timed
again with one every 4 steps, their cost spread over the 100). With --spread S, S more are
taken down the ranking (ranks 2 top, 4 top, ...). The losses do not depend on the network: each configuration
trains once (async, whose steps to a loss depend on timing, three times: the median),
unshaped, on this machine's ranks, and its steps to the target loss
(allreduce's validation loss at 60% of its steps) times its shaped step time is its
measured time to the loss. With --passes P, every configuration is timed P times, every
other pass in reverse order, and its step is the median pass. Per setting: the regret of plan's first pick (its measured
time over the best measured, less 1) and Spearman's rank correlation of predicted
against measured time to the loss. With --trial-kinds N, plan's statistical efficiency
comes from `plan --trials` (N kinds, --steps steps each), run once per host count on
this machine's unshaped ranks and given to each setting's plan as --factors, instead
of the table measured on the default gpt. --rescore FILE recomputes a saved --json FILE's
measured columns from its runs (in --out) instead of running anything.
"""
import argparse, json, math, os, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BP = os.environ.get("BAGPIPE", os.path.join(ROOT, "build", "bagpipe"))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
MPIRUN = os.path.join(ROOT, "scripts", "mpirun.sh")
MODEL = ["--layers", "2", "--embd", "64", "--heads", "2", "--seq-len", "32", "--batch", "16",
         "--seed", "1234", "--progress", "none"]
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", BP_CLUSTER="plan")


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def sh(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if p.returncode:
        sys.exit(f"{what} failed ({p.returncode}): {p.stderr[-1500:]}")
    return p.stdout


def records(rundir, kind):
    with open(os.path.join(rundir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r.get("type") == kind]


# Steps between averagings that a timed window spans whole: easgd and AvgPipe
# average every 4 steps by default, decentralized every 1 or 2.
PERIOD = 4


# async's ranks agree every --async-agree-every steps (10 by default), so a short window
# would hold more agreements than plan's mean step spreads: its runs take ASYNC_EXTRA
# more steps and are timed over a multiple of ASYNC_PERIOD steps (whole periods of both
# the agreement and PERIOD) before the last.
ASYNC_PERIOD, ASYNC_EXTRA = 20, 12


def is_async(args):
    words = args.split()
    return "--dp-algo" in words and words[words.index("--dp-algo") + 1] == "async"


def timed_step_ms(rundir, steps, first=3, period=PERIOD):
    """Mean step time of the last steps from step `first` on, a multiple of `period` of them
    (a median would take a step without averaging for the typical one and miss the
    averaging's cost altogether: easgd at 20 Mbit/s, 30 ms median, several times the
    mean). The run's last step agrees over every rank whatever the algorithm (local
    steps end there, and async's rounds), which a run of `steps` does once: it is left
    out of the window and its excess over the window's mean spread over `steps` (in a
    window of 8 it made diloco's steps at 20 ms latency 2.5x their length)."""
    ms = [r["step_ms"] for r in records(rundir, "step") if r["step"] >= first]
    if len(ms) < 2:
        return math.nan
    last, ms = ms[-1], ms[:-1]
    ms = ms[len(ms) % period:] if len(ms) >= period else ms
    return with_last(sum(ms) / len(ms), last, steps)


def with_last(mean, last, steps):
    """A run's mean step over `steps` from its window's mean and its last step, which
    agrees over every rank and comes once in the run."""
    return mean + (last - mean) / steps


def steps_to(curve, target):
    """Steps at which the validation curve [(step, loss)] first reaches target (linear
    between evaluations), inf if never."""
    prev = (0, None)
    for s, v in curve:
        if v <= target:
            if prev[1] is None or not math.isfinite(prev[1]):
                return s
            return prev[0] + (prev[1] - target) / (prev[1] - v) * (s - prev[0])
        prev = (s, v)
    return math.inf


def ranks(x):
    order = sorted(range(len(x)), key=lambda i: x[i])
    r = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va > 0 and vb > 0 else math.nan


def baseline(hosts):
    return f"--dp {hosts} --pp 1 --tp 1 --micro-batches 1 --schedule 1f1b --dp-algo allreduce --bucket-mb 10"


def trials(hosts, a, out):
    """With --trial-kinds: plan --trials once on this machine's ranks, unshaped (a kind's
    steps to a loss do not depend on the network); every setting's plan then takes its
    factors (--factors). Returns plan's options for that and the trials' seconds."""
    if not a.trial_kinds:
        return [], 0.0
    fj = os.path.join(out, f"factors_h{hosts}.json")
    t0 = time.time()
    sh([MPIRUN, "-np", str(hosts), BP, "plan"] + MODEL +
       ["--steps", str(a.steps), "--trials", str(a.steps), "--trial-kinds", str(a.trial_kinds),
        "--json", fj], f"plan --trials h{hosts}")
    return ["--factors", fj], time.time() - t0


def setting(hosts, rate, lat, a, out, factors):
    """Plan on the shaped cluster, then each listed configuration's shaped step time."""
    tag = f"h{hosts}_{rate}_{lat}"
    sh([CLUSTER, "up", str(hosts), "--rate", rate], "cluster up")
    try:
        before = load1()
        t0 = time.time()
        pj = os.path.join(out, f"plan_{tag}.json")
        sh([CLUSTER, "mpirun", "-np", str(hosts), BP, "plan"] + MODEL + factors +
           ["--steps", str(a.steps), "--net", f"lat={lat}", "--json", pj], f"plan {tag}")
        plan_s = time.time() - t0
        with open(pj) as f:
            plan = json.load(f)
        fits = [k for k in plan["ranking"] if k["verdict"] == "fits"]
        # plan's first few, then a few spread down its ranking (ranks 8, 16, 32, ...),
        # so that the correlation is over predictions that differ
        listed = fits[: a.top]
        pos = 2 * a.top
        while a.spread and pos <= len(fits) and len(listed) < a.top + a.spread:
            listed.append(fits[pos - 1])
            pos *= 2
        if baseline(hosts) not in [k["args"] for k in listed]:
            listed += [k for k in fits if k["args"] == baseline(hosts)]
        rows = [{"args": k["args"], "plan_rank": k["rank"], "pred_step_ms": k["step_s"] * 1e3,
                 "pred_to_loss_s": k["time_to_loss_s"], "factor": k["steps_factor"], "rundirs": []}
                for k in listed]
        def timed(args, rundir, extra=0):
            sh([CLUSTER, "mpirun", "-np", str(hosts), BP, "train"] + MODEL + args +
               ["--net", f"lat={lat}", "--steps", str(a.timed_steps + extra), "--eval-every", "0",
                "--log-every", "1", "--out", rundir], f"timed run {tag} {' '.join(args)}")
            return rundir

        # Each pass times every listed configuration, the next in the reverse order, so
        # that the machine's speed moving over minutes weighs on all of them alike.
        for p in range(a.passes):
            for i in (range(len(rows)) if p % 2 == 0 else reversed(range(len(rows)))):
                r = rows[i]
                name = f"timed_{tag}_{i}" + (f"_p{p}" if p else "")
                extra = ASYNC_EXTRA if is_async(r["args"]) else 0
                r["rundirs"].append(timed(r["args"].split(), os.path.join(out, name), extra))
                warm = warm_up(r["args"])
                if warm:
                    after = r["args"].split() + [warm[0], str(warm[2])]
                    r.setdefault("after_rundirs", []).append(
                        timed(after, os.path.join(out, name + "_after"), warm[2]))
                if outer_period(r["args"]):
                    probe = r["args"].split() + ["--inner-steps", str(SYNC_PROBE)]
                    r.setdefault("outer_rundirs", []).append(
                        timed(probe, os.path.join(out, name + "_outer")))
        for r in rows:
            measured_step(r, a.steps)
        return {"hosts": hosts, "rate": rate, "lat": lat, "plan_s": plan_s, "rows": rows,
                "network": plan["network"], "load_before": before, "load_after": load1()}
    finally:
        sh([CLUSTER, "down"], "cluster down")


# async's steps to a loss depend on when its thread's transfers land (209 to 230 steps in
# five runs of one job here): its loss runs are repeated and the median taken, as plan
# --trials does for its factor.
LOSS_REPEATS = 3


def loss_runs(hosts, args, a, out, i):
    """The validation curves [(step, loss)] of configuration args: one run, or
    LOSS_REPEATS of an async one (the repeats in loss_h<hosts>_<i>_r<k>)."""
    curves = []
    for k in range(LOSS_REPEATS if is_async(args) else 1):
        rundir = os.path.join(out, f"loss_h{hosts}_{i}" + (f"_r{k}" if k else ""))
        if a.rescore and not os.path.isdir(rundir):
            break
        if not a.rescore:
            sh([MPIRUN, "-np", str(hosts), BP, "train"] + MODEL + args.split() +
               ["--steps", str(a.steps), "--eval-every", str(a.eval_every), "--eval-batches", "5",
                "--log-every", "50", "--out", rundir], f"loss run h{hosts} {args}")
        curves.append([(r["step"], r["val_loss"]) for r in records(rundir, "eval")])
    return curves


def timed_median_ms(rundirs, steps, first=3, **window):
    """The median over the passes of each pass's step time. This machine's two cores are
    virtual: for a few seconds at a time both compute up to 1.6x slower than alone
    (two independent single-process runs at once: mostly 2.7-3.4 ms steps, both 4.8 in
    one try of ten), and a pass that falls in such a stretch runs slow throughout
    (streaming-diloco: 2.8-3.2 ms in 13 runs of 16, 4.4-4.8 in 3), which a mean over two
    passes carried into the comparison."""
    return statistics.median(timed_step_ms(d, steps, first, **window) for d in rundirs)


# Algorithms whose first steps run as allreduce by default: their option, its default,
# and the shorter warm-up of the run that times the steps after it (qadam's second
# moment needs a few steps: 2 diverged here). A short timed run would be all warm-up,
# while plan predicts the mean over --steps.
WARM_UPS = {"qadam": ("--qadam-warmup", 100, 10)}


def warm_up(args):
    words = args.split()
    algo = words[words.index("--dp-algo") + 1] if "--dp-algo" in words else "allreduce"
    return WARM_UPS.get(algo)


# diloco and streaming-diloco take their outer step every --inner-steps H (100 unless
# the configuration says), so a short timed run holds none of them, while plan's step
# spreads their cost over H. Each is timed again with H = SYNC_PROBE (diloco's outer
# steps, and streaming-diloco's fragments, then fall whole in the timed window: a
# multiple of PERIOD steps), and its step is the plain one plus the outer steps' cost
# at H: plain + (probe - plain) x SYNC_PROBE / H.
SYNC_PROBE = 4


def outer_period(args):
    """H of a diloco or streaming-diloco configuration, else None."""
    words = args.split()
    if not ({"diloco", "streaming-diloco"} & set(words)):
        return None
    return int(words[words.index("--inner-steps") + 1]) if "--inner-steps" in words else 100


def measured_step(r, steps):
    """Row r's measured step time as plan predicts it, the mean over --steps: with a
    warm-up, its steps timed as given (all warm-up) and the rest timed in runs whose
    warm-up ends at once (after_rundirs), weighted by their shares of the run; with
    outer steps, their cost from the runs that take one every SYNC_PROBE steps
    (outer_rundirs), spread over H."""
    window = {"period": ASYNC_PERIOD} if is_async(r["args"]) else {}
    r["pass_ms"] = [timed_step_ms(d, steps, **window) for d in r["rundirs"]]
    r["meas_step_ms"] = statistics.median(r["pass_ms"])
    warm, H = warm_up(r["args"]), outer_period(r["args"])
    if H and r.get("outer_rundirs"):
        r["plain_step_ms"] = r["meas_step_ms"]
        r["outer_step_ms"] = timed_median_ms(r["outer_rundirs"], steps)
        r["meas_step_ms"] += (r["outer_step_ms"] - r["plain_step_ms"]) * SYNC_PROBE / H
    if warm and r.get("after_rundirs"):
        share = min(warm[1], steps) / steps
        r["warm_step_ms"] = r["meas_step_ms"]
        # from step 3 after the shorter warm-up, as the other runs from step 3
        r["after_step_ms"] = timed_median_ms(r["after_rundirs"], steps, warm[2] + 3)
        r["meas_step_ms"] = share * r["warm_step_ms"] + (1 - share) * r["after_step_ms"]


def rescored(s, out, steps):
    """Setting s of a saved --json with its measured step times taken again from its
    timed runs (named as setting() names them)."""
    tag = f"h{s['hosts']}_{s['rate']}_{s['lat']}"
    for i, r in enumerate(s["rows"]):
        r["rundirs"] = r.get("rundirs", [r.get("rundir", os.path.join(out, f"timed_{tag}_{i}"))])
        measured_step(r, steps)
    return s


def score(s, curves, target):
    for r in s["rows"]:
        r["steps_each"] = [steps_to(c, target) for c in curves[r["args"]]]
        r["steps_to_target"] = statistics.median(r["steps_each"])
        r["meas_to_loss_s"] = r["steps_to_target"] * r["meas_step_ms"] / 1e3
    rows = s["rows"]
    best = min(r["meas_to_loss_s"] for r in rows)
    first = min(rows, key=lambda r: r["plan_rank"])
    s["regret"] = first["meas_to_loss_s"] / best - 1 if math.isfinite(best) else math.nan
    big = 1e30  # never reached: last, tied
    s["spearman"] = spearman([r["pred_to_loss_s"] for r in rows],
                             [r["meas_to_loss_s"] if math.isfinite(r["meas_to_loss_s"]) else big for r in rows])
    s["spearman_step"] = spearman([r["pred_step_ms"] for r in rows], [r["meas_step_ms"] for r in rows])


def meas_cell(r):
    """The measured step; with several passes, their range (of the plain steps)."""
    each = r.get("pass_ms", [])
    if len(each) < 2:
        return f"{r['meas_step_ms']:.1f}"
    return f"{r['meas_step_ms']:.1f} ({min(each):.1f}-{max(each):.1f})"


def steps_cell(r):
    """Steps to the target; of repeated loss runs, the median and each run's."""
    each = r.get("steps_each", [])
    if len(each) < 2:
        return f"{r['steps_to_target']:.0f}"
    return f"{r['steps_to_target']:.0f} ({', '.join(f'{x:.0f}' for x in each)})"


def markdown(results, f):
    f.write("| hosts | network | plan s | first pick | its measured s to loss | best measured | regret | "
            "Spearman (time to loss) | Spearman (step) | load before/after |\n"
            "|---:|---|---:|---|---:|---:|---:|---:|---:|---|\n")
    for s in results:
        first = min(s["rows"], key=lambda r: r["plan_rank"])
        best = min(s["rows"], key=lambda r: r["meas_to_loss_s"])
        f.write(f"| {s['hosts']} | {s['rate']} / {s['lat']} | {s['plan_s']:.1f} | `{first['args']}` | "
                f"{first['meas_to_loss_s']:.2f} | {best['meas_to_loss_s']:.2f} (`{best['args']}`) | "
                f"{100 * s['regret']:+.1f}% | {s['spearman']:.2f} | {s['spearman_step']:.2f} | "
                f"{s['load_before']:.1f} / {s['load_after']:.1f} |\n")
    f.write("\nPer configuration (plan's rank, predicted and measured step ms, the latter with "
            "the range of its passes' plain steps, steps factor, steps to the target, predicted "
            "and measured seconds to the loss):\n\n")
    for s in results:
        f.write(f"\n{s['hosts']} hosts, {s['rate']} / {s['lat']} (target {s['target']:.4f}):\n\n"
                "| rank | configuration | pred ms | meas ms | factor | steps | pred s | meas s |\n"
                "|---:|---|---:|---:|---:|---:|---:|---:|\n")
        for r in sorted(s["rows"], key=lambda r: r["plan_rank"]):
            f.write(f"| {r['plan_rank']} | `{r['args']}` | {r['pred_step_ms']:.1f} | {meas_cell(r)} | "
                    f"{r['factor']:.3f} | {steps_cell(r)} | {r['pred_to_loss_s']:.2f} | "
                    f"{r['meas_to_loss_s']:.2f} |\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", default="2,4")
    p.add_argument("--settings", default="10gbit:0.1ms,1gbit:1ms,100mbit:5ms,20mbit:20ms")
    p.add_argument("--top", type=int, default=6)
    p.add_argument("--spread", type=int, default=0)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--timed-steps", type=int, default=12)
    p.add_argument("--passes", type=int, default=1,
                   help="times each configuration is timed per setting, every other pass in "
                        "reverse order; its step time is their median")
    p.add_argument("--out", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--markdown", required=True)
    p.add_argument("--rescore", default="")
    p.add_argument("--trial-kinds", type=int, default=0,
                   help="factors from plan --trials over this many kinds, run once per host count "
                        "unshaped (0: plan's shipped table)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = []
    saved = json.load(open(a.rescore)) if a.rescore else []
    for hosts in map(int, a.hosts.split(",")):
        if a.rescore:
            mine = [rescored(s, a.out, a.steps) for s in saved if s["hosts"] == hosts]
        else:
            factors, took = trials(hosts, a, a.out)
            if factors:
                print(f"{hosts} hosts: plan --trials {a.steps} --trial-kinds {a.trial_kinds} "
                      f"unshaped, {took:.0f} s", flush=True)
            mine = [setting(hosts, *st.split(":"), a, a.out, factors) for st in a.settings.split(",")]
        for s in mine:
            print(f"{hosts} hosts {s['rate']}/{s['lat']}: plan {s['plan_s']:.1f} s, "
                  f"{len(s['rows'])} configurations timed", flush=True)
        configs = sorted({r["args"] for s in mine for r in s["rows"]})
        curves = {c: loss_runs(hosts, c, a, a.out, i) for i, c in enumerate(configs)}
        base = curves[baseline(hosts)][0]
        at = max(s for s, _ in base if s <= 0.6 * a.steps)
        target = dict(base)[at]
        for s in mine:
            s["target"] = target
            score(s, curves, target)
            print(f"{hosts} hosts {s['rate']}/{s['lat']}: regret {100 * s['regret']:+.1f}%, "
                  f"Spearman {s['spearman']:.2f} (step {s['spearman_step']:.2f})", flush=True)
        results += mine
    with open(a.json, "w") as f:
        json.dump(results, f, indent=1)
    with open(a.markdown, "w") as f:
        markdown(results, f)


if __name__ == "__main__":
    main()
