#!/usr/bin/python3
"""AvgPipe against gpipe and 1f1b on 2 stages (2 ranks), same global batch.

Phases, all in one run by default (bench/pipe/README.md, section "AvgPipe"):

0. `bagpipe tune --pp 2`, without and with the emulated network, lists its (N, M, K)
   candidates; its fastest one with N > 1 is "AvgPipe tuned"; the partition it
   prints is used by every run.
1. sweep: gpipe and 1f1b at several M (--Ms), the tuned AvgPipe, tune's overall pick
   and a few other AvgPipe configurations train --time-steps steps each, without
   emulation and with --net, all taking turns in every one of --rounds rounds; per
   configuration the median over rounds of each run's median step time, samples/s,
   ratios to gpipe and 1f1b at their best M, the busy and idle shares of the stages,
   and what a stream that is not flushed at every step could reach at most.
2. duel: gpipe and 1f1b at their best M, the tuned AvgPipe and AvgPipe N = 2 with
   gpipe's micro-batches, back to back, --duel-reps times; ratios within each
   repetition (the load of a shared machine drifts over minutes), median and quartiles.
3. convergence (no emulation: the losses do not depend on it): 1f1b and gpipe at
   their best M, the tuned AvgPipe, N = 2 with --ea-alpha in --alphas (at
   --ea-period 4) and --ea-period in --periods (at --ea-alpha 0.5) or the whole grid
   (--grid), and N = 4 with --n4-alphas, --conv-steps steps each, evaluated every
   --eval-every steps; a run whose validation loss doubles is stopped as diverged.
   Time to the validation loss 1f1b reaches at half the steps (or --target):
   samples, the run's own training time, and samples / samples/s of phases 1-2 with
   and without emulation. Validation loss at half and all of the samples against
   1f1b (target of the project for N = 2: within 5%).

Markdown tables go to stdout and to OUT/report.md, every number to OUT/results.json,
every run's metrics log under OUT/runs. Standard library only.
"""
import argparse
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NET_ON = "bw=1Gbit,lat=1ms"


def parse_args():
    ap = argparse.ArgumentParser(
        prog="bench/pipe/avgpipe.sh",
        description="AvgPipe vs gpipe and 1f1b on 2 stages: samples/s with and without an emulated "
        "network, time to a validation loss, and the --ea-alpha / --ea-period sweep.",
        epilog="Options after -- go to both bagpipe tune and bagpipe train (the model: e.g. "
        "-- --layers 8 --embd 256). The binary is $BAGPIPE_BIN or build/bagpipe; ranks run under "
        "nice -n 5 with one BLAS thread each.")
    ap.add_argument("--quick", action="store_true",
                    help="2 rounds of 12 steps, M in 8,16, 200 convergence steps, alpha 0.1,0.5,0.9 "
                    "only (about 10 minutes on a loaded 2-core machine)")
    ap.add_argument("--out", help="working directory (default: a new one under /tmp)")
    ap.add_argument("--rounds", type=int, help="timing rounds (default 5)")
    ap.add_argument("--time-steps", type=int, help="steps of each timing run (default 40)")
    ap.add_argument("--Ms", help="micro-batch counts of gpipe and 1f1b (default 4,8,16)")
    ap.add_argument("--net", default=NET_ON, help="the emulated network (default %s)" % NET_ON)
    ap.add_argument("--conv-steps", type=int, help="steps of each convergence run (default 1000)")
    ap.add_argument("--eval-every", type=int, help="evaluation interval (default conv-steps / 20)")
    ap.add_argument("--eval-batches", type=int, default=20, help="validation batches (default 20)")
    ap.add_argument("--target", type=float, help="validation loss of time-to-loss (default: 1f1b's at "
                    "half the steps)")
    ap.add_argument("--alphas", help="--ea-alpha values of the sweep (default 0.1,0.3,0.5,0.9)")
    ap.add_argument("--periods", help="--ea-period values of the sweep (default 1,4,16)")
    ap.add_argument("--grid", action="store_true", help="every alpha with every period")
    ap.add_argument("--no-scaled-lr", dest="scaled_lr", action="store_false",
                    help="skip the runs of N = 2 and of 1f1b with the learning rate x 3/2")
    ap.add_argument("--n4-alphas", help="--ea-alpha values tried with N = 4 (default 0.5,0.2; none in --quick)")
    ap.add_argument("--duel-reps", type=int, help="repetitions of the side-by-side runs (default 10)")
    ap.add_argument("--duel-steps", type=int, help="steps of each side-by-side run (default 20)")
    ap.add_argument("--phases", default="sweep,duel,convergence",
                    help="what to run of sweep,duel,convergence (default all three)")
    ap.add_argument("--reuse", metavar="DIR", help="take the tune outputs, and the results of the phases "
                    "not run now, from an earlier --out DIR")
    ap.add_argument("extra", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()
    q = a.quick
    a.rounds = a.rounds or (2 if q else 5)
    a.time_steps = a.time_steps or (12 if q else 40)
    a.Ms = [int(x) for x in (a.Ms or ("8,16" if q else "4,8,16")).split(",")]
    a.duel_reps = a.duel_reps or (3 if q else 10)
    a.duel_steps = a.duel_steps or (12 if q else 20)
    a.phases = [x for x in a.phases.split(",") if x]
    for x in a.phases:
        if x not in ("sweep", "duel", "convergence"):
            ap.error("--phases: unknown phase %s" % x)
    if not a.reuse and "sweep" not in a.phases and ("duel" in a.phases or "convergence" in a.phases):
        ap.error("--phases: duel and convergence take configurations from sweep (or --reuse)")
    a.conv_steps = a.conv_steps or (200 if q else 1000)
    a.eval_every = a.eval_every or max(1, a.conv_steps // 20)
    a.alphas = [float(x) for x in (a.alphas or ("0.1,0.5,0.9" if q else "0.1,0.3,0.5,0.9")).split(",")]
    a.scaled_lr = a.scaled_lr and not q
    a.n4_alphas = [float(x) for x in (a.n4_alphas or ("" if q else "0.5,0.2")).split(",") if x]
    a.periods = [int(x) for x in (a.periods or ("4" if q else "1,4,16")).split(",")]
    return a


ARGS = parse_args()
BP = os.environ.get("BAGPIPE_BIN") or os.path.join(ROOT, "build", "bagpipe")
OUT = ARGS.out or None
LOADS = []  # 1-minute load average at the start of every run


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def env():
    e = dict(os.environ)
    e.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return e


def run(cmd, timeout, logfile, watch=None, stop=None):
    """Run cmd in its own process group; its output goes to logfile. With watch (a JSONL
    file) and stop(records), the run is ended early once stop says why (returned).
    Raises on failure."""
    LOADS.append(load1())
    why = None
    t0 = time.time()
    with open(logfile, "w") as out:
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env(),
                             start_new_session=True)
        rc = None
        while rc is None:
            try:
                rc = p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                if time.time() - t0 > timeout:
                    why = "timeout after %d s" % timeout
                elif watch and stop and os.path.exists(watch):
                    why = stop(read_metrics(watch, partial=True))
                if why:
                    end_group(p)
                    break
    if why and not why.startswith("timeout"):
        return why
    if rc != 0:
        with open(logfile) as f:
            tail = [l for l in f.read().strip().splitlines() if l.strip()][:3]
        raise RuntimeError("%s: %s\n  %s\n  (%s)" % (" ".join(cmd), why or "exit %s" % rc, "\n  ".join(tail),
                                                     logfile))
    return None


def end_group(p):
    """End the process group of our own child p (mpirun and its ranks)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
            p.wait(timeout=10)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            pass


def mpirun():
    return ["nice", "-n", "5", os.path.join(ROOT, "scripts", "mpirun.sh"), "-np", "2", BP, "train"]


def net_args(net):
    return ["--net", net] if net != "off" else []


# --------------------------------------------------------------------------- tune

def read_metrics(path, partial=False):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    if not partial:  # a line being written while the run goes on
                        raise
    out = {"steps": [], "evals": []}
    for r in recs:
        t = r.get("type")
        if t == "step":
            out["steps"].append(r)
        elif t == "eval":
            out["evals"].append((r["step"], r["val_loss"]))
        elif t in ("summary", "stages", "config"):
            out[t] = r
    return out


def cfg_args(c, part):
    a = ["--pp", "2", "--partition", part, "--micro-batches", str(c["M"]), "--schedule", c["sched"]]
    if c["N"] > 1:
        a += ["--pipelines", str(c["N"]), "--ea-alpha", str(c.get("alpha", 0.5)),
              "--ea-period", str(c.get("period", 4))]
    if "lr" in c:
        a += ["--lr", "%g" % c["lr"]]
    return a


def strip_lr(extra):
    out, skip = [], False
    for a in extra:
        if skip:
            skip = False
        elif a == "--lr":
            skip = True
        elif not a.startswith("--lr="):
            out.append(a)
    return out


def label(c):
    if c["N"] == 1:
        return "%s M=%d" % (c["sched"], c["M"])
    s = "AvgPipe N=%d M=%d %s" % (c["N"], c["M"], c["sched"])
    if "alpha" in c:
        s += " a=%g tau=%d" % (c["alpha"], c["period"])
    if "lr" in c:
        s += " lr=%g" % c["lr"]
    return s


def key(c):
    return (c["N"], c["M"], c["sched"], c.get("alpha", 0.5), c.get("period", 4))


def unique(cs, key_of, merge):
    """cs without repeats by key_of(c), in order; a repeat is merged into the first by
    merge(first, repeat)."""
    seen, uniq = {}, []
    for c in cs:
        k = key_of(c)
        if k in seen:
            merge(seen[k], c)
        else:
            seen[k] = c
            uniq.append(c)
    return uniq


def add_role(first, repeat):
    first["role"] += ", " + repeat["role"]


def diverged(m):
    """Why a run is ended early: its validation loss has grown past twice its first one
    (elastic averaging that amplifies instead of damping), or is not finite."""
    ev = m["evals"]
    if ev and (ev[-1][1] != ev[-1][1] or ev[-1][1] > 2 * ev[0][1]):
        return "diverged: validation loss %.4g at step %d (first %.4g)" % (ev[-1][1], ev[-1][0], ev[0][1])
    return None


def train(c, part, net, steps, eval_every, name, watch=False, ckpt_every=0):
    d = os.path.join(OUT, "runs", name)
    os.makedirs(d, exist_ok=True)
    metrics = os.path.join(d, "metrics.jsonl")
    cmd = mpirun() + cfg_args(c, part) + net_args(net) + [
        "--steps", str(steps), "--eval-every", str(eval_every), "--eval-batches", str(ARGS.eval_batches),
        "--progress", "none", "--log-every", str(max(steps, 1)), "--keep-checkpoints", "2",
        "--checkpoint-every", str(ckpt_every),
        "--out", d, "--overwrite", "--metrics", metrics] + (strip_lr(ARGS.extra) if "lr" in c else ARGS.extra)
    if os.path.exists(metrics):
        os.remove(metrics)
    try:
        why = run(cmd, 600 + steps * 20, os.path.join(d, "log.txt"), metrics if watch else None, diverged)
    except RuntimeError as e:
        if not watch or not os.path.exists(metrics):
            raise
        m = read_metrics(metrics, partial=True)  # e.g. stopped at a non-finite gradient
        with open(os.path.join(d, "log.txt")) as f:
            errs = [l for l in f.read().splitlines() if "error" in l]
        m["failed"] = errs[0] if errs else str(e).splitlines()[0]
        return m
    m = read_metrics(metrics, partial=why is not None)
    if why:
        m["failed"] = why
    return m


def base_lr():
    for i, a in enumerate(ARGS.extra):
        if a == "--lr":
            return float(ARGS.extra[i + 1])
    return 1e-3  # gpt's default


def batch():
    for i, a in enumerate(ARGS.extra):
        if a == "--batch":
            return int(ARGS.extra[i + 1])
        if a.startswith("--batch="):
            return int(a.split("=", 1)[1])
    return 16


# --------------------------------------------------------------------------- phase 1

def timing(part_of, tuned_of, pick_of):
    """Every configuration on both networks, taking turns; returns {net: {key: result}}."""
    B = batch()
    configs = {}
    for net in NETS:
        cs = [dict(N=1, M=m, sched=s) for s in ("gpipe", "1f1b") for m in ARGS.Ms if B % m == 0]
        t = tuned_of[net]
        cs.append(dict(N=t["N"], M=t["M"], sched=t["sched"], tuned=True))
        p = pick_of[net]  # tune's pick over every N: a reference when it is a plain pipeline
        cs.append(dict(N=p["N"], M=p["M"], sched=p["sched"], pick=True))
        others = [(2, 8, "gpipe"), (2, 8, "1f1b")] + ([] if ARGS.quick else [(2, 4, "gpipe"), (4, 4, "gpipe")])
        for n, m, s in others:
            if B % (n * m) == 0:
                cs.append(dict(N=n, M=m, sched=s))
        configs[net] = unique(cs, key, dict.update)  # a repeat keeps the tuned / pick marks
    runs = {net: {key(c): [] for c in configs[net]} for net in NETS}
    total = ARGS.rounds * sum(len(v) for v in configs.values())
    done = 0
    for r in range(ARGS.rounds):
        for i in range(max(len(v) for v in configs.values())):
            for net in NETS:
                cs = configs[net]
                if i >= len(cs):
                    continue
                c = cs[(i + r) % len(cs)]  # each round starts one further: no fixed neighbours
                done += 1
                log("[timing %d/%d] %s, net %s" % (done, total, label(c), net))
                name = "time_%s_%s_r%d" % (net.replace(",", "_").replace("=", ""),
                                           label(c).replace(" ", "_").replace("=", ""), r)
                m = train(c, part_of[net], net, ARGS.time_steps, 0, name)
                runs[net][key(c)].append(m)
    res = {}
    for net in NETS:
        res[net] = {}
        for c in configs[net]:
            ms = runs[net][key(c)]
            meds = [m["summary"]["median_step_ms"] for m in ms]
            bub, other, busy_sh = [], [], []
            for m in ms:
                n = len(m["steps"])
                wall = sum(st["step_ms"] for st in m["steps"]) / 1000.0
                idle, busy = m["stages"]["idle_s"], m["stages"]["busy_s"]
                # The busier stage (least idle) sets the pace; its idle share is the bubble.
                s_ = min(range(len(idle)), key=lambda i: idle[i])
                bub.append(idle[s_] / wall)
                busy_sh.append(max(busy) / wall)
                # What it does besides forward, backward and waiting: optimizer steps,
                # the tied embedding's sync, elastic averaging.
                other.append((wall - idle[s_] - busy[s_]) / n * 1000.0)
            step = statistics.median(meds)
            b = statistics.median(bub)
            res[net][key(c)] = dict(cfg=c, label=label(c), step_ms=step, runs_ms=meds,
                                    samples_s=B / step * 1000.0, bubble=b, unflushed_bound=1.0 / (1.0 - b),
                                    other_ms=statistics.median(other), busy=statistics.median(busy_sh))
    return res


def best(res_net, sched):
    cands = [v for v in res_net.values() if v["cfg"]["N"] == 1 and v["cfg"]["sched"] == sched]
    return max(cands, key=lambda v: v["samples_s"]) if cands else None


def timing_table(res, pred_of):
    lines = []
    for net in NETS:
        r = res[net]
        g, o = best(r, "gpipe"), best(r, "1f1b")
        lines.append("")
        lines.append("Network %s: samples/s = %d / median step time (median over rounds of each run's "
                     "median); ratios to gpipe M=%d and 1f1b M=%d (their best M); V = N x M micro-batches "
                     "per step of %s sequences each; busy = forward and backward share of the step on the "
                     "busiest stage; bubble = idle share (waits for the other stage) of the stage that "
                     "waits least; unflushed bound = 1 / (1 - bubble); other = that stage's ms per step "
                     "outside forward, backward and pipeline waits (optimizer steps, tied-embedding sync, "
                     "elastic averaging); tune = predicted ms." % (
                         net, batch(), g["cfg"]["M"], o["cfg"]["M"], "B/V"))
        lines.append("")
        lines.append("| configuration | V | step ms (runs) | samples/s | / gpipe | / 1f1b | busy | bubble | "
                     "unflushed bound | other ms | tune ms |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for v in sorted(r.values(), key=lambda v: -v["samples_s"]):
            c = v["cfg"]
            pred = pred_of[net].get((c["N"], c["M"], c["sched"]))
            lines.append("| %s%s%s | %d | %.1f (%s) | %.1f | %.3f | %.3f | %.0f%% | %.0f%% | %.2fx | %.1f | %s |" % (
                v["label"], " (tuned)" if c.get("tuned") else "",
                " (tune's pick)" if c.get("pick") else "",
                c["N"] * c["M"], v["step_ms"],
                " ".join("%.0f" % x for x in v["runs_ms"]), v["samples_s"], v["samples_s"] / g["samples_s"],
                v["samples_s"] / o["samples_s"], 100 * v.get("busy", float("nan")), 100 * v["bubble"], v["unflushed_bound"],
                v["other_ms"],
                "%.1f" % pred if pred else "-"))
    return lines


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def duel(part_of, tres, tuned_of):
    """gpipe and 1f1b at their best M (from the sweep), the tuned AvgPipe and AvgPipe
    N = 2 with gpipe's number and size of micro-batches, run back to back --duel-reps
    times (order rotating); ratios taken within each repetition, so that the machine's
    load, which drifts over minutes, affects both sides alike."""
    B = batch()
    configs = {}
    for net in NETS:
        g, o = best(tres[net], "gpipe")["cfg"], best(tres[net], "1f1b")["cfg"]
        t = tuned_of[net]
        cs = [dict(N=1, M=g["M"], sched="gpipe", role="gpipe"), dict(N=1, M=o["M"], sched="1f1b", role="1f1b"),
              dict(N=t["N"], M=t["M"], sched=t["sched"], role="AvgPipe tuned")]
        if g["M"] % 2 == 0:
            cs.append(dict(N=2, M=g["M"] // 2, sched="gpipe", role="AvgPipe, gpipe's V"))
        configs[net] = unique(cs, key, add_role)
    ms = {net: {key(c): [] for c in configs[net]} for net in NETS}
    total = ARGS.duel_reps * sum(len(v) for v in configs.values())
    done = 0
    for k in range(ARGS.duel_reps):
        for net in NETS:
            cs = configs[net]
            for i in range(len(cs)):
                c = cs[(i + k) % len(cs)]
                done += 1
                log("[side by side %d/%d] %s, net %s" % (done, total, label(c), net))
                name = "duel_%s_%s_r%d" % (net.replace(",", "_").replace("=", ""),
                                           label(c).replace(" ", "_").replace("=", ""), k)
                m = train(c, part_of[net], net, ARGS.duel_steps, 0, name)
                ms[net][key(c)].append(m["summary"]["median_step_ms"])
    out = {}
    for net in NETS:
        cs = configs[net]
        gk = key(cs[0])
        ok = key(cs[1]) if cs[1]["N"] == 1 and cs[1]["sched"] == "1f1b" else key(cs[0])
        rows = []
        for c in cs:
            x = ms[net][key(c)]
            rg = [gm / xm for gm, xm in zip(ms[net][gk], x)]
            ro = [om / xm for om, xm in zip(ms[net][ok], x)]
            q1, q3 = quartiles(rg)
            rows.append(dict(cfg=c, label=label(c), role=c["role"], runs_ms=x, step_ms=statistics.median(x),
                             samples_s=B / statistics.median(x) * 1000.0, vs_gpipe=statistics.median(rg),
                             vs_gpipe_q=[q1, q3], vs_1f1b=statistics.median(ro),
                             wins=sum(1 for r in rg if r > 1)))
        out[net] = rows
    return out


def duel_table(dres):
    lines = ["", "Side by side: each repetition runs these back to back (order rotating), %d repetitions of "
             "%d steps; ratio = the other's step time / this one's within a repetition: median [quartiles]; "
             "faster = repetitions in which it beat gpipe." % (len(dres[NETS[0]][0]["runs_ms"]),
                                                              ARGS.duel_steps), ""]
    lines += ["| network | configuration | role | step ms (median) | samples/s | / gpipe | / 1f1b | faster |",
              "|---|---|---|---|---|---|---|---|"]
    for net in NETS:
        for r in dres[net]:
            lines.append("| %s | %s | %s | %.1f | %.1f | %.3f [%.2f, %.2f] | %.3f | %d/%d |" % (
                net, r["label"], r["role"], r["step_ms"], r["samples_s"], r["vs_gpipe"], r["vs_gpipe_q"][0],
                r["vs_gpipe_q"][1], r["vs_1f1b"], r["wins"], len(r["runs_ms"])))
    return lines


def throughput(tres, dres, net, c):
    """samples/s of configuration c on net: side by side if it ran there, else the sweep."""
    k = key(dict(c, alpha=0.5, period=4))
    if dres and net in dres:
        for r in dres[net]:
            if key(r["cfg"]) == k:
                return r["samples_s"]
    if tres and net in tres:
        t = tres[net].get(k)
        if t:
            return t["samples_s"]
    return None


def reproject(cv, tres, dres):
    for r in cv["runs"]:
        r["projected_s"] = {}
        for net in NETS:
            sps = throughput(tres, dres, net, r["cfg"])
            if sps and r["samples_to_target"]:
                r["projected_s"][net] = r["samples_to_target"] / sps


# --------------------------------------------------------------------------- phases 2, 3

def crossing(evals, target, B):
    """Samples (interpolated between evaluations) at which the validation loss first
    reaches target; None if it never does."""
    prev = (0, None)
    for step, v in evals:
        if v <= target:
            if prev[1] is None or prev[1] == v:
                return step * B
            s0, v0 = prev
            return (s0 + (step - s0) * (v0 - target) / (v0 - v)) * B
        prev = (step, v)
    return None


def train_seconds(m, samples, B):
    """Training time (sum of step times) up to the interpolated step samples / B."""
    x = samples / B
    t = 0.0
    for s in m["steps"]:
        if s["step"] <= x:
            t += s["step_ms"] / 1000.0
        else:
            t += (x - (s["step"] - 1)) * s["step_ms"] / 1000.0 if x > s["step"] - 1 else 0.0
            break
    return t


def val_at(evals, step):
    for s, v in evals:
        if s == step:
            return v
    return None


def convergence(part, tres, dres):
    B = batch()
    S = ARGS.conv_steps
    half = (S // 2) // ARGS.eval_every * ARGS.eval_every or ARGS.eval_every
    off = tres.get("off") if tres else None

    def fastest(n, sched=None):
        if off is None:
            return None
        cs = [v for v in off.values() if v["cfg"]["N"] == n and (sched is None or v["cfg"]["sched"] == sched)]
        return max(cs, key=lambda v: v["samples_s"])["cfg"] if cs else None

    base = fastest(1, "1f1b") or dict(N=1, M=8, sched="1f1b")
    gp = fastest(1, "gpipe") or dict(N=1, M=16, sched="gpipe")
    tuned = next((v["cfg"] for v in off.values() if v["cfg"].get("tuned")), None) if off else None
    n2 = fastest(2) or dict(N=2, M=8, sched="gpipe")
    runs = [dict(base, role="1f1b"), dict(gp, role="gpipe")]
    if tuned:
        runs.append(dict(tuned, role="AvgPipe tuned", alpha=0.5, period=4))
    pts = ([(a, p) for a in ARGS.alphas for p in ARGS.periods] if ARGS.grid else
           [(a, 4) for a in ARGS.alphas] + [(0.5, p) for p in ARGS.periods if p != 4])
    for a, p in pts:
        runs.append(dict(N=2, M=n2["M"], sched=n2["sched"], alpha=a, period=p, role="sweep"))
    if ARGS.scaled_lr:
        # In a steady drift the center, a particle without gradient, holds the replicas back
        # to N/(N+1) of their speed (docs/manual/pipelines.md): the learning rate scaled by (N+1)/N.
        runs.append(dict(N=2, M=n2["M"], sched=n2["sched"], alpha=0.5, period=4, lr=base_lr() * 1.5,
                         role="lr x 3/2"))
        runs.append(dict(base, lr=base_lr() * 1.5, role="1f1b, lr x 3/2"))  # is it the lr alone?
    for a in ARGS.n4_alphas:
        n4 = fastest(4) or dict(N=4, M=4, sched="gpipe")
        runs.append(dict(N=4, M=n4["M"], sched=n4["sched"], alpha=a, period=4, role="N=4"))

    def same_losses(c):  # M and K do not change the losses
        if c["N"] == 1:
            return (1, c["sched"], c.get("lr"))
        return (c["N"], c.get("alpha"), c.get("period"), c.get("lr"))

    uniq = unique(runs, same_losses, add_role)
    out = []
    prev = {}
    if OLD.get("convergence") and OLD["convergence"]["steps"] == S:
        prev = {r["label"]: r for r in OLD["convergence"]["runs"]}
    for i, c in enumerate(uniq):
        if label(c) in prev:  # --reuse: a run of the earlier results
            r = dict(prev[label(c)], cfg=c, role=c["role"], reused=True)
            r["metrics"] = dict(steps=[dict(step=j + 1, step_ms=x) for j, x in enumerate(r.get("steps_ms", []))])
            out.append(r)
            continue
        log("[convergence %d/%d] %s (%s), %d steps" % (i + 1, len(uniq), label(c), c["role"], S))
        m = train(c, part, "off", S, ARGS.eval_every, conv_name(c), watch=True, ckpt_every=half)
        if m.get("failed"):
            log("  stopped: " + m["failed"])
        out.append(dict(cfg=c, label=label(c), role=c["role"], evals=m["evals"], metrics=m,
                        failed=m.get("failed"), dir=os.path.join(OUT, "runs", conv_name(c)),
                        steps_ms=[st["step_ms"] for st in m["steps"]],
                        median_step_ms=statistics.median([st["step_ms"] for st in m["steps"]])))
    ref = out[0]
    target = ARGS.target if ARGS.target is not None else val_at(ref["evals"], half)
    for r in out:
        r["val_half"] = val_at(r["evals"], half)
        r["val_end"] = val_at(r["evals"], S)
        r["rel_half"] = r["val_half"] / ref["val_half"] - 1 if r["val_half"] is not None else None
        r["rel_end"] = r["val_end"] / ref["val_end"] - 1 if r["val_end"] is not None else None
        smp = crossing(r["evals"], target, B)
        r["samples_to_target"] = smp
        if r["metrics"]["steps"] or not r.get("reused"):
            r["measured_s"] = train_seconds(r["metrics"], smp, B) if smp else None
        elif r.get("measured_s") is not None and target != OLD["convergence"]["target"]:
            r["measured_s"] = None  # an earlier run without its step times, another target
        del r["metrics"]
    cv = dict(target=target, half=half, steps=S, runs=out)
    reproject(cv, tres, dres)
    average_evals(cv, part, OUT)
    return cv


def conv_name(c):
    return "conv_" + label(c).replace(" ", "_").replace("=", "").replace(":", "")


def average_evals(cv, part, root=None):
    """Validation loss of the average of the pipelines' replicas (what a checkpoint
    holds) at half and all of the steps: one more step at learning rate 0 from the
    checkpoint, as a plain pipeline, evaluates it."""
    for r in cv["runs"]:
        c = r["cfg"]
        if c["N"] == 1 or r.get("failed"):
            continue
        for step, k in ((cv["half"], "avg_half"), (cv["steps"], "avg_end")):
            if r.get(k) is not None:
                continue
            ck = None
            dirs = [r["dir"]] if r.get("dir") else []
            for base in [x for x in (root, ARGS.reuse, OUT) if x]:
                dirs += [os.path.join(base, "runs", conv_name(c)),
                         os.path.join(base, "runs", "conv_" + label(c).replace(" ", "_").replace("=", ""))]
            for dd in dirs:
                d = os.path.join(dd, "ckpt-%08d" % step)
                if os.path.isdir(d):
                    ck = d
                    break
            if not ck:
                continue
            log("[average of replicas] %s at step %d" % (label(c), step))
            d = os.path.join(OUT, "runs", "avg_%s_%d" % (conv_name(c), step))
            os.makedirs(d, exist_ok=True)
            metrics = os.path.join(d, "metrics.jsonl")
            if os.path.exists(metrics):
                os.remove(metrics)
            cmd = mpirun() + ["--pp", "2", "--partition", part, "--micro-batches", "1", "--resume", ck,
                              "--steps", str(step + 1), "--lr", "0", "--eval-every", str(step + 1),
                              "--eval-batches", str(ARGS.eval_batches), "--progress", "none", "--out", d,
                              "--keep-checkpoints", "1", "--metrics", metrics] + ARGS.extra
            run(cmd, 600, os.path.join(d, "log.txt"))
            ev = read_metrics(metrics)["evals"]
            r[k] = ev[-1][1] if ev else None


def conv_tables(cv):
    B = batch()
    lines = ["", "Time to validation loss %.4f (1f1b's at step %d; %d samples per step; evaluations not "
             "counted). Measured: the run's own step times, no emulation. Projected: samples to the "
             "target / samples/s side by side (or of the sweep)." % (cv["target"], cv["half"], B), ""]
    hdr = "| configuration | samples to target | measured s | " + " | ".join(
        "projected s, net %s" % n for n in NETS) + " |"
    lines += [hdr, "|---|---|---|" + "---|" * len(NETS)]
    g = next(r for r in cv["runs"] if "gpipe" in r["role"].split(", "))
    for r in cv["runs"]:
        cells = []
        for n in NETS:
            p = r["projected_s"].get(n)
            gp = g["projected_s"].get(n)
            cells.append("%.1f (%.2fx gpipe)" % (p, gp / p) if p and gp else "-")
        lines.append("| %s (%s) | %s | %s | %s |" % (
            r["label"], r["role"], "%.0f" % r["samples_to_target"] if r["samples_to_target"] else "not reached",
            "%.1f (%.2fx gpipe)" % (r["measured_s"], g["measured_s"] / r["measured_s"])
            if r["measured_s"] and g["measured_s"] else "-", " | ".join(cells)))
    lines += ["", "Validation loss (replica 0 evaluated) at %d and %d samples, relative to 1f1b (target of "
              "the project: N = 2 within +5%%); a = --ea-alpha, tau = --ea-period." % (
                  cv["half"] * B, cv["steps"] * B), ""]
    lines += ["| configuration | val @%d | rel | val @%d | rel | average of replicas @%d, @%d (rel) | "
              "samples to %.4f | median step ms |" % (cv["half"] * B, cv["steps"] * B, cv["half"] * B,
                                                      cv["steps"] * B, cv["target"]),
              "|---|---|---|---|---|---|---|---|"]
    ref = cv["runs"][0]

    def val(v, rel):
        return ("%.4f" % v, "%+.1f%%" % (100 * rel)) if v is not None else ("-", "-")

    for r in cv["runs"]:
        vh, rh = val(r["val_half"], r["rel_half"])
        ve, re_ = val(r["val_end"], r["rel_end"])
        note = ""
        if r["failed"]:
            last = r["evals"][-1] if r["evals"] else None
            note = " (stopped%s: %s)" % (" after val %.3g at step %d" % (last[1], last[0]) if last else "",
                                         r["failed"].split(": ", 1)[-1] if "diverged" not in r["failed"]
                                         else "diverged")
        avg = []
        for k, rk in (("avg_half", "val_half"), ("avg_end", "val_end")):
            v = r.get(k)
            avg.append("%.4f (%+.1f%%)" % (v, 100 * (v / ref[rk] - 1)) if v is not None and ref[rk] else "-")
        lines.append("| %s%s | %s | %s | %s | %s | %s | %s | %.1f |" % (
            r["label"], note, vh, rh, ve, re_, ", ".join(avg),
            "%.0f" % r["samples_to_target"] if r["samples_to_target"] else "not reached", r["median_step_ms"]))
    return lines


# --------------------------------------------------------------------------- main

NETS = ["off", ARGS.net]


def parse_tune(path):
    """The candidate rows (fastest first) and the partition of a tune output."""
    rows, part, table = [], None, False
    with open(path) as f:
        for line in f:
            if re.match(r"^\s+rank\s+N\s+M\s+micro", line):
                table = True
                continue
            if line.startswith("fastest:"):
                table = False
            m = re.search(r"--partition (\S+)", line)
            if m and part is None and not table:
                part = m.group(1)
            if table:
                f_ = line.split()
                if len(f_) >= 11:
                    rows.append(dict(rank=int(f_[0]), N=int(f_[1]), M=int(f_[2]), micro=int(f_[3]),
                                     sched=f_[4], pred_ms=float(f_[5]), fits=f_[9] == "yes"))
    if not rows or not part:
        raise RuntimeError("no candidates or no partition in %s" % path)
    return rows, part


OLD = {}


def main():
    global OUT
    if ARGS.reuse:
        with open(os.path.join(ARGS.reuse, "results.json")) as f:
            OLD.update(json.load(f))
    if not os.access(BP, os.X_OK):
        sys.exit("avgpipe.sh: no bagpipe binary at %s (build first, or set BAGPIPE_BIN)" % BP)
    if OUT is None:
        OUT = subprocess.run(["mktemp", "-d", "/tmp/bp_avgpipe.XXXXXX"], stdout=subprocess.PIPE,
                             text=True, check=True).stdout.strip()
    os.makedirs(os.path.join(OUT, "runs"), exist_ok=True)
    phases = ARGS.phases
    old = OLD
    started = datetime.datetime.now()
    load_start = open("/proc/loadavg").read().split()[:3]
    head = ["AvgPipe bench, %s, %d cores, load average at start %s; model %s; batch %d; 2 stages" % (
        started.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), " ".join(load_start),
        " ".join(ARGS.extra) or "default gpt", batch())]
    if ARGS.reuse:
        head.append("phases %s run now; the others taken from the run of %s (%s)" % (
            ",".join(phases) or "none", old.get("started", "?")[:16].replace("T", " "), ARGS.reuse))
    log(head[0] + "; output in " + OUT)
    results = dict(started=started.isoformat(), args=vars(ARGS))
    part_of, tuned_of, pred_of, pick_of = {}, {}, {}, {}
    lines = list(head)
    for net in NETS:
        name = "tune_%s.txt" % net.replace(",", "_")
        path = os.path.join(OUT, name)
        if ARGS.reuse:
            with open(os.path.join(ARGS.reuse, name)) as f, open(path, "w") as g:
                g.write(f.read())
        else:
            log("[tune] net %s" % net)
            run(["nice", "-n", "5", BP, "tune", "--pp", "2", "--trial-steps", "0"] + net_args(net) + ARGS.extra, 900, path)
        rows, part = parse_tune(path)
        part_of[net] = part
        pred_of[net] = {(r["N"], r["M"], r["sched"]): r["pred_ms"] for r in rows}
        pick_of[net] = rows[0]
        tuned_of[net] = next(r for r in rows if r["N"] > 1 and r["fits"])
        lines.append("tune, net %s: partition %s; fastest N=%d M=%d %s (%.1f ms predicted); fastest "
                     "with N > 1: N=%d M=%d %s (%.1f ms)" % (
                         net, part, rows[0]["N"], rows[0]["M"], rows[0]["sched"], rows[0]["pred_ms"],
                         tuned_of[net]["N"], tuned_of[net]["M"], tuned_of[net]["sched"],
                         tuned_of[net]["pred_ms"]))
    results["tune"] = dict(partition=part_of, pick=pick_of, tuned=tuned_of)
    tres = None
    if "sweep" in phases:
        tres = timing(part_of, tuned_of, pick_of)
    elif old.get("timing"):
        tres = {n: {key(v["cfg"]): v for v in old["timing"][n]} for n in NETS}
    if tres:
        lines += timing_table(tres, pred_of)
        results["timing"] = {n: list(tres[n].values()) for n in NETS}
    dres = None
    if "duel" in phases and tres:
        dres = duel(part_of, tres, tuned_of)
    elif old.get("duel"):
        dres = old["duel"]
    if dres:
        lines += duel_table(dres)
        results["duel"] = dres
    print("\n".join(lines), flush=True)
    shown = len(lines)
    cv = None
    if "convergence" in phases:
        cv = convergence(part_of["off"], tres, dres)
    elif old.get("convergence"):
        cv = old["convergence"]
        reproject(cv, tres, dres)
        average_evals(cv, part_of["off"], ARGS.reuse)
    if cv:
        lines += conv_tables(cv)
        results["convergence"] = cv
    load_end = open("/proc/loadavg").read().split()[:3]
    loads = LOADS or [float(x) for x in load_start[:1]]
    tail = "load average at the end %s; 1-minute load at the start of the runs: median %.1f, range %.1f-%.1f; " \
           "took %.0f min" % (" ".join(load_end), statistics.median(loads), min(loads), max(loads),
                              (datetime.datetime.now() - started).total_seconds() / 60)
    if ARGS.reuse and old.get("load"):
        ol = old["load"]["runs"]
        tail += "; the reused run: median %.1f, range %.1f-%.1f" % (statistics.median(ol), min(ol), max(ol))
    lines += ["", tail]
    results["load"] = dict(start=load_start, end=load_end, runs=LOADS)
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    print("\n".join(lines[shown:]))
    log("report: %s/report.md" % OUT)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        sys.exit("avgpipe.sh: %s" % e)
