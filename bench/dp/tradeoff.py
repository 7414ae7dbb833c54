#!/usr/bin/python3
"""The Bagua paper's trade-off table in miniature: time to reach a fixed validation loss.

For each emulated network and each algorithm, trains the default gpt on N ranks until the
validation loss (evaluated every --eval-every steps) first reaches --target, and reports
the training time it took: the sum of the step times (step_ms) up to that evaluation
(evaluation itself is not training time). Expected shape: low-precision algorithms win at
low bandwidth (target: bytegrad >= 1.5x faster than allreduce at 100 Mbit), decentralized
ones at high latency. A second table gives what explains the first: step time,
exposed communication per step and bytes sent per step (means over the steps run).

  bench/dp/tradeoff.sh --quick          # looser target, fewer steps (~15-25 min on 2 cores)
  bench/dp/tradeoff.sh                  # the full table (~1 h on 2 shared cores)
  bench/dp/tradeoff.sh --nets none,100Mbit --algos allreduce,bytegrad
Arguments after `--` go to every `bagpipe train` unchanged.
"""
import argparse
import shlex
import sys

from common import ALGOS, BAGPIPE, Bagpipe, RunFailed, load_note, table, write_json


def mean(xs):  # means, not medians: easgd and decentralized --interval communicate in some steps only
    return sum(xs) / len(xs) if xs else float("nan")

NETS = {  # column name: --net value
    "none": "off",
    "1Gbit/0.1ms": "bw=1Gbit,lat=0.1ms",
    "100Mbit/0.1ms": "bw=100Mbit,lat=0.1ms",
    "1Gbit/5ms": "bw=1Gbit,lat=5ms",
}
NET_ALIASES = {"none": "none", "off": "none", "1Gbit": "1Gbit/0.1ms", "100Mbit": "100Mbit/0.1ms", "5ms": "1Gbit/5ms"}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bagpipe", default=None, help="binary (default build/bagpipe)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="target 2.60 within 200 steps instead of 2.25 within 600")
    p.add_argument("--target", type=float, help="validation loss to reach (default 2.25; --quick 2.60)")
    p.add_argument("--max-steps", type=int, help="give up after this many steps (default 600; --quick 200)")
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--nets", default=",".join(NETS), help="comma-separated, of: " + ", ".join(NETS))
    p.add_argument("--algos", default=",".join(ALGOS), help="comma-separated (default: all that fit --ranks)")
    p.add_argument("--variant", action="append", default=[],
                   help='extra rows: "ALGO option value ...", e.g. "decentralized --interval 4" (repeatable)')
    p.add_argument("--json", help="also write all numbers here")
    p.add_argument("--keep", help="keep every run's folder here (for bagpipe report)")
    p.add_argument("extra", nargs="*", help="after --: more bagpipe train options for every run")
    a = p.parse_args()
    a.target = a.target if a.target is not None else (2.60 if a.quick else 2.25)
    a.max_steps = a.max_steps or (200 if a.quick else 600)
    nets = [NET_ALIASES.get(n, n) for n in a.nets.split(",") if n]
    for n in nets:
        if n not in NETS:
            p.error(f"--nets: unknown '{n}' (one of {', '.join(NETS)})")
    rows = [(x, x, []) for x in a.algos.split(",") if x]
    rows += [(v, shlex.split(v)[0], shlex.split(v)[1:]) for v in a.variant]
    bp = Bagpipe(a.bagpipe or BAGPIPE, keep=a.keep)
    print(f"tradeoff: gpt, {a.ranks} ranks, time to val loss <= {a.target} (eval every {a.eval_every} steps, "
          f"at most {a.max_steps} steps); nets {', '.join(nets)}; {load_note()}", flush=True)
    res = {}
    try:
        for net in nets:
            for label, algo, extra in rows:
                args = ["--steps", str(a.max_steps), "--eval-every", str(a.eval_every), "--eval-batches",
                        str(a.eval_batches), "--net", NETS[net], "--dp-algo", algo] + extra + a.extra
                # the run ends once an evaluation reaches the target: the steps after it are not needed
                reached = lambda recs: any(r.get("type") == "eval" and r["val_loss"] <= a.target  # noqa: E731
                                           for r in recs)
                run = bp.train(a.ranks, args, timeout=7200, stop_when=reached)
                hit = run.time_to_val(a.target)
                d = {"hit_step": hit[0] if hit else None, "time_s": hit[1] / 1e3 if hit else None,
                     "mean_step_ms": mean(run.timed("step_ms", 2)),
                     "mean_exposed_ms": mean(run.timed("comm_exposed_ms", 2)),
                     "mb_per_step": run.mb_per_rank(),
                     "best_val": min((e["val_loss"] for e in run.evals), default=float("nan")),
                     "wall_s": run.wall_s}
                res[(net, label)] = d
                reached = (f"reached at step {d['hit_step']} in {d['time_s']:.1f} s" if hit else
                           f"not reached in {a.max_steps} steps (best {d['best_val']:.3f})")
                print(f"  {net:13s} {label:16s} {reached}; {d['mean_step_ms']:.1f} ms/step, exposed "
                      f"{d['mean_exposed_ms']:.1f} ms, {d['mb_per_step']:.2f} MB/step", flush=True)
    except RunFailed as e:
        sys.exit(f"tradeoff: {e}")
    finally:
        bp.close()

    t_rows, s_rows = [], []
    for label, algo, _ in rows:
        tr, sr = [label], [label]
        for net in nets:
            d, ref = res[(net, label)], res[(net, "allreduce")] if (net, "allreduce") in res else None
            if d["time_s"] is None:
                tr.append(f"> {a.max_steps} steps")
            else:
                speed = ""
                if ref and ref["time_s"]:
                    speed = f" ({ref['time_s'] / d['time_s']:.2f}x)"
                tr.append(f"{d['time_s']:.1f} s @{d['hit_step']}{speed}")
            sr.append(f"{d['mean_step_ms']:.0f} / {d['mean_exposed_ms']:.0f} / {d['mb_per_step']:.2f}")
        t_rows.append(tr)
        s_rows.append(sr)
    print(f"\ntime to val loss <= {a.target}: training seconds @ step reached (speed-up vs allreduce, same network):")
    print(table(["algorithm"] + nets, t_rows))
    print("\nper step (means over the steps run): step ms / exposed communication ms / MB sent by a rank:")
    print(table(["algorithm"] + nets, s_rows))
    checks = []
    if ("100Mbit/0.1ms", "allreduce") in res and ("100Mbit/0.1ms", "bytegrad") in res:
        r, b = res[("100Mbit/0.1ms", "allreduce")]["time_s"], res[("100Mbit/0.1ms", "bytegrad")]["time_s"]
        if r and b:
            checks.append(f"bytegrad vs allreduce at 100 Mbit: {r / b:.2f}x faster "
                          f"({'meets' if r / b >= 1.5 else 'MISSES'} target >= 1.5x)")
        else:
            checks.append("bytegrad vs allreduce at 100 Mbit: not comparable (one did not reach the target)")
    if ("1Gbit/5ms", "allreduce") in res and ("1Gbit/5ms", "decentralized") in res:
        r, d = res[("1Gbit/5ms", "allreduce")]["time_s"], res[("1Gbit/5ms", "decentralized")]["time_s"]
        if r and d:
            checks.append(f"decentralized vs allreduce at 1 Gbit / 5 ms: {r / d:.2f}x faster")
    for c in checks:
        print(c)
    write_json(a.json, {f"{n}|{l}": v for (n, l), v in res.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
