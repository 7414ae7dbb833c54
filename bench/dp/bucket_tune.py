#!/usr/bin/python3
"""--bucket-mb auto against a manual sweep of bucket sizes, on one emulated network.

Each round runs, in an order that alternates between rounds:
  auto      bagpipe train --bucket-mb auto: its bucket_tune record gives the size it
            chose (and the times it measured); its step time after the choice is kept
  sweep     one run per size of --sizes with that fixed --bucket-mb: median step_ms
            of the timed steps
and prints, per size, the median over rounds of the sweep's step time and its ratio to
the fastest size; per round, the size auto chose. Target: the size chosen has a sweep
time within 5% of the fastest size's.

  bench/dp/bucket_tune.sh                                   # 2 ranks, bw=1Gbit,lat=1ms
  bench/dp/bucket_tune.sh --rounds 5 --net bw=100Mbit,lat=0.1ms
Arguments after `--` go to every `bagpipe train` unchanged.
"""
import argparse
import sys

from common import Bagpipe, RunFailed, load_note, median, table, wait_quiet, write_json

TUNE_STEPS = 36  # at most: 6 sizes x (1 warm-up + 5 timed steps), bucket_tune.c


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bagpipe", default=None, help="binary (default build/bagpipe)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--net", default="bw=1Gbit,lat=1ms", help="emulated network (default bw=1Gbit,lat=1ms)")
    p.add_argument("--sizes", default="0.25,0.5,1,2,4,10", help="the sweep's bucket sizes in MB")
    p.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--steps", type=int, default=30, help="timed steps per run (default 30)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (after auto's choice) (default 5)")
    p.add_argument("--quiet-cores", type=float, default=1.7,
                   help="before each run wait until this many cores are idle (0: do not wait; default 1.7)")
    p.add_argument("--quiet-wait", type=float, default=120, help="wait at most this many seconds (default 120)")
    p.add_argument("--json", help="also write all numbers here")
    p.add_argument("extra", nargs="*", help="after --: more bagpipe train options")
    a = p.parse_args()
    bp = Bagpipe(a.bagpipe) if a.bagpipe else Bagpipe()
    sizes = [s for s in a.sizes.split(",") if s]
    base = ["--eval-every", "0", "--net", a.net] + a.extra
    print(f"bucket_tune: {a.ranks} ranks, --net {a.net}, sizes {','.join(sizes)} MB, {a.rounds} rounds x "
          f"{a.steps} timed steps (+{a.warmup}), extra: {' '.join(a.extra) or 'none'}; {load_note()}", flush=True)
    sweep = {s: [] for s in sizes}
    auto = []  # per round: (chosen MB, its measured times, median step after the choice)
    try:
        for r in range(a.rounds):
            order = ["auto"] + sizes if r % 2 == 0 else sizes[::-1] + ["auto"]
            for case in order:
                idle = wait_quiet(a.quiet_cores, a.quiet_wait)
                if case == "auto":
                    run = bp.train(a.ranks, base + ["--bucket-mb", "auto", "--steps",
                                                     str(TUNE_STEPS + a.warmup + a.steps)])
                    tune = next(x for x in run.records if x.get("type") == "bucket_tune")
                    after = median(run.timed("step_ms", tune["step"] + a.warmup))
                    auto.append((tune["chosen_mb"], tune["step_ms"], after))
                    print(f"  round {r + 1} auto: chose {tune['chosen_mb']:g} MB at step {tune['step']} "
                          f"(measured {tune['step_ms']}); then {after:.1f} ms/step; idle cores before {idle:.1f}",
                          flush=True)
                else:
                    run = bp.train(a.ranks, base + ["--bucket-mb", case, "--steps", str(a.warmup + a.steps)])
                    sweep[case].append(median(run.timed("step_ms", a.warmup)))
                    print(f"  round {r + 1} {case:>5} MB: {sweep[case][-1]:.1f} ms/step; idle cores before "
                          f"{idle:.1f}", flush=True)
    except (RunFailed, StopIteration) as e:
        sys.exit(f"bucket_tune: {e or 'no bucket_tune record'}")
    finally:
        bp.close()
    med = {s: median(v) for s, v in sweep.items()}
    best = min(med.values())
    print("\nmanual sweep, median over rounds (ms per step):")
    print(table(["bucket MB", "step ms", "vs fastest", "rounds"],
                [[s, f"{med[s]:.1f}", f"{med[s] / best:.3f}", " ".join(f"{x:.1f}" for x in sweep[s])] for s in sizes]))
    rows, ok = [], True
    for i, (chosen, _, after) in enumerate(auto):
        key = next((s for s in sizes if float(s) == chosen), None)
        ratio = med[key] / best if key else float("nan")
        ok = ok and ratio <= 1.05
        rows.append([i + 1, f"{chosen:g}", f"{ratio:.3f}", "meets" if ratio <= 1.05 else "MISSES", f"{after:.1f}"])
    print("\n--bucket-mb auto (chosen size's sweep time / fastest size's; target <= 1.05):")
    print(table(["round", "chosen MB", "vs fastest", "target", "auto's step ms after"], rows))
    write_json(a.json, {"sweep_ms": med, "sweep_rounds": sweep,
                        "auto": [{"chosen_mb": c, "measured_ms": m, "after_ms": x} for c, m, x in auto]})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
