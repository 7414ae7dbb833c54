#!/usr/bin/python3
"""DiLoCo's variants against allreduce: validation loss at equal steps and bytes.

Trains the default gpt (global batch 16) on N ranks with allreduce and each variant
given, evaluates once, at the end (the evaluation averages the replicas over the
group, traffic that is not the algorithm's and that the log would charge to the
step after it), and prints each variant's final validation loss beside allreduce's
with the relative difference, its bytes per rank per step (the first 2 steps, the
common start's broadcast, left out) and how many times fewer that is than
allreduce's. A variant "meets" when it is within --target of allreduce's loss while
sending at least --fewer times fewer bytes. With --reach LOSS (and --eval-every
below --steps), each run's steps to LOSS, linear between evaluations (the factor
that bagpipe plan's efficiencies declare: the variant's over allreduce's).

  bench/dp/diloco.py --variant "diloco --inner-steps 50" --variant "streaming-diloco"
Arguments after `--` go to every `bagpipe train` unchanged.
"""
import argparse
import shlex
import sys

from common import BAGPIPE, Bagpipe, RunFailed, load_note, table, write_json


class Known:
    """allreduce's numbers given by --allreduce."""

    def __init__(self, val, mb):
        self.val, self.mb, self.config, self.evals, self.wall_s = val, mb, {}, [], 0

    def final_val(self):
        return self.val

    def mb_per_rank(self):
        return self.mb


def steps_to(run, loss):
    """The steps at which run's validation loss first reaches loss, linear between
    its evaluations (from step 0's none: the first evaluation's step at most); None."""
    prev = None
    for e in run.evals:
        if e["val_loss"] <= loss:
            if prev is None or prev["val_loss"] == e["val_loss"]:
                return float(e["step"])
            f = (prev["val_loss"] - loss) / (prev["val_loss"] - e["val_loss"])
            return round(prev["step"] + f * (e["step"] - prev["step"]), 1)
        prev = e
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bagpipe", default=None, help="binary (default build/bagpipe)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--target", type=float, default=0.02, help="loss within this of allreduce's (0.02: 2%%)")
    p.add_argument("--fewer", type=float, default=500, help="bytes at least this many times fewer")
    p.add_argument("--variant", action="append", default=[], help='"ALGO option value ..." (repeatable)')
    p.add_argument("--eval-every", type=int, default=0, help="evaluate every N steps (default: at the end)")
    p.add_argument("--reach", type=float, default=0, help="print each run's steps to this validation loss")
    p.add_argument("--allreduce", help="VAL,MB: allreduce's final loss and MB/step/rank from an earlier "
                   "run of the same settings (deterministic), instead of running it")
    p.add_argument("--json", help="also write all numbers here")
    p.add_argument("--keep", help="keep every run's folder here (for bagpipe report)")
    p.add_argument("extra", nargs="*", help="after --: more bagpipe train options for every run")
    a = p.parse_args()
    bp = Bagpipe(a.bagpipe or BAGPIPE, keep=a.keep)
    base = ["--steps", str(a.steps), "--eval-every", str(a.eval_every or a.steps), "--log-every", "10"] + a.extra
    print(f"diloco: gpt, {a.steps} steps, {a.ranks} ranks, extra: {' '.join(a.extra) or 'none'}; "
          f"{load_note()}", flush=True)
    runs, failed = {}, {}
    try:
        ref = Known(*map(float, a.allreduce.split(","))) if a.allreduce else \
            bp.train(a.ranks, base + ["--dp-algo", "allreduce"])
        print(f"  allreduce: val {ref.final_val():.4f}, {ref.mb_per_rank():.3f} MB/step/rank "
              f"({ref.wall_s:.0f} s)", flush=True)
        for v in a.variant:
            try:
                run = bp.train(a.ranks, base + ["--dp-algo"] + shlex.split(v))
            except RunFailed as e:  # a setting that diverges: a row of the table, not the end
                failed[v] = str(e).splitlines()[0]
                print(f"  {v}: FAILED: {failed[v]}", flush=True)
                continue
            runs[v] = run
            print(f"  {v}: val {run.final_val():.4f}, {run.mb_per_rank():.5f} MB/step/rank "
                  f"({run.wall_s:.0f} s)", flush=True)
    except RunFailed as e:
        sys.exit(f"diloco: {e}")
    finally:
        bp.close()

    r, rb = ref.final_val(), ref.mb_per_rank()
    rows = [["allreduce", f"{r:.4f}", "", f"{rb:.4f}", "1", ""]]
    out = {"allreduce": {"val_loss": r, "mb_per_step_rank": rb, "config": ref.config}}
    for v, run in runs.items():
        val, mb = run.final_val(), run.mb_per_rank()
        rel, fewer = (val - r) / r, rb / mb if mb > 0 else float("inf")
        ok = rel <= a.target and fewer >= a.fewer  # a lower loss is never a miss
        rows.append([v, f"{val:.4f}", f"{100 * rel:+.2f}%", f"{mb:.5f}", f"{fewer:.0f}",
                     "meets" if ok else "misses"])
        out[v] = {"val_loss": val, "rel": rel, "mb_per_step_rank": mb, "fewer": fewer, "ok": ok,
                  "config": run.config}
    for v, why in failed.items():
        rows.append([v, "failed", "", "", "", "misses"])
        out[v] = {"failed": why}
    if a.reach:
        reach = {"allreduce": steps_to(ref, a.reach)}
        reach.update({v: steps_to(run, a.reach) for v, run in runs.items()})
        for v, steps in reach.items():
            factor = steps / reach["allreduce"] if steps and reach["allreduce"] else None
            print(f"  steps to {a.reach:g}: {v}: {steps if steps else 'never'}"
                  + (f" (x{factor:.3f} of allreduce's)" if factor else ""))
            out[v]["steps_to_reach"] = steps
    print(f"\nfinal validation loss after {a.steps} steps (nats/byte), bytes per rank per step; "
          f"meets: within {100 * a.target:g}% of allreduce's loss with at least {a.fewer:g}x fewer bytes:")
    print(table(["variant", "val loss", "vs allreduce", "MB/step/rank", "x fewer bytes", ""], rows))
    write_json(a.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
