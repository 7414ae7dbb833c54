#!/usr/bin/python3
"""Overlap of gradient communication with backward, measured in one run.

Alternates (overlap, --no-overlap, overlap, ...) bucketed allreduce on N ranks under an
emulated network and prints:
  overlapped step time          median step_ms of the overlap runs
  sequential compute + comm     from the --no-overlap runs: median compute_ms + median
                                comm_exposed_ms (buckets sent only after backward, so all of
                                the communication is exposed)
  ratio overlapped / sequential target <= 0.70 (at least 30% below)

  bench/dp/overlap.sh                             # 2 ranks, bw=1Gbit,lat=0.1ms, 0.5 MB buckets, batch 24
  bench/dp/overlap.sh --bucket-mb 0.25,0.5,10     # one line per bucket size
  bench/dp/overlap.sh --spin                      # also with --comm-poll-us 0 (MPI spins)
  bench/dp/overlap.sh --late                      # also with the update after all buckets
  bench/dp/overlap.sh --rounds 7 --steps 40 -- --batch 32
Arguments after `--` go to every `bagpipe train` unchanged.
"""
import argparse
import sys

from common import Bagpipe, RunFailed, load_note, median, table, wait_quiet, write_json


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bagpipe", default=None, help="binary (default build/bagpipe)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--net", default="bw=1Gbit,lat=0.1ms", help="emulated network (default bw=1Gbit,lat=0.1ms)")
    p.add_argument("--bucket-mb", default="0.5", help="comma-separated bucket sizes (default 0.5)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    p.add_argument("--steps", type=int, default=30, help="timed steps per run (default 30)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps at the start of each run (default 5)")
    p.add_argument("--quiet-cores", type=float, default=1.7,
                   help="before each run wait until this many cores are idle (0: do not wait; default 1.7)")
    p.add_argument("--quiet-wait", type=float, default=120, help="wait at most this many seconds (default 120)")
    p.add_argument("--spin", action="store_true",
                   help="also run every case with --comm-poll-us 0 (the communication thread blocks in "
                        "MPI_Waitall, which spins), rows marked 'spin'")
    p.add_argument("--late", action="store_true",
                   help="also run every case with --skip-nonfinite, under which each bucket's update waits for "
                        "all buckets instead of starting when its average arrives, rows marked 'late'")
    p.add_argument("--json", help="also write all numbers here")
    p.add_argument("extra", nargs="*", help="after --: more bagpipe train options (default --batch 24)")
    a = p.parse_args()
    bp = Bagpipe(a.bagpipe) if a.bagpipe else Bagpipe()
    sizes = [s for s in a.bucket_mb.split(",") if s]
    modes = [""] + (["spin"] if a.spin else []) + (["late"] if a.late else [])
    variants = [(s, m) for m in modes for s in sizes]
    mode_args = {"": [], "spin": ["--comm-poll-us", "0"], "late": ["--skip-nonfinite"]}
    extra = a.extra or ["--batch", "24"]
    base = ["--steps", str(a.warmup + a.steps), "--eval-every", "0", "--net", a.net] + extra
    print(f"overlap: {a.ranks} ranks, --net {a.net}, buckets {','.join(sizes)} MB, {a.rounds} rounds x "
          f"{a.steps} timed steps (+{a.warmup} warm-up), extra: {' '.join(extra)}; {load_note()}", flush=True)
    res = {v: {m: {"step": [], "compute": [], "exposed": [], "round_step": [], "cpu_main": [], "cpu_comm": []}
               for m in ("overlap", "seq")}
           for v in variants}
    try:
        for r in range(a.rounds):
            for v in variants:
                s, extra_mode = v
                name = f"{s} MB {extra_mode}".rstrip()
                # alternate which mode goes first, so a drift in background load hits both alike
                order = ("overlap", "seq") if r % 2 == 0 else ("seq", "overlap")
                for mode in order:
                    args = base + ["--bucket-mb", s] + (["--no-overlap"] if mode == "seq" else []) + \
                        mode_args[extra_mode]
                    idle = wait_quiet(a.quiet_cores, a.quiet_wait)
                    run = bp.train(a.ranks, args, thread_cpu=True)
                    d = res[v][mode]
                    d["step"] += run.timed("step_ms", a.warmup)
                    d["compute"] += run.timed("compute_ms", a.warmup)
                    d["exposed"] += run.timed("comm_exposed_ms", a.warmup)
                    d["round_step"].append(median(run.timed("step_ms", a.warmup)))
                    d["mb_per_rank"] = run.mb_per_rank()
                    if run.thread_cpu:
                        d["cpu_main"].append(run.thread_cpu["main_ms_per_step"])
                        d["cpu_comm"].append(run.thread_cpu["other_ms_per_step"])
                    print(f"  round {r + 1} bucket {name} {mode:7s}: step {d['round_step'][-1]:7.2f} ms "
                          f"(compute {median(run.timed('compute_ms', a.warmup)):6.2f}, exposed comm "
                          f"{median(run.timed('comm_exposed_ms', a.warmup)):6.2f}); CPU per step: main "
                          f"{median(d['cpu_main'][-1:]):.1f} ms, other threads {median(d['cpu_comm'][-1:]):.1f} ms; "
                          f"idle cores before {idle:.1f}", flush=True)
    except RunFailed as e:
        sys.exit(f"overlap: {e}")
    finally:
        bp.close()

    rows, out = [], {}
    for v in variants:
        s, extra_mode = v
        name = f"{s} {extra_mode}".rstrip()
        o, q = res[v]["overlap"], res[v]["seq"]
        seq = median(q["compute"]) + median(q["exposed"])
        ratio = median(o["step"]) / seq
        out[name] = {"overlap_step_ms": median(o["step"]), "overlap_compute_ms": median(o["compute"]),
                  "overlap_exposed_ms": median(o["exposed"]), "seq_compute_ms": median(q["compute"]),
                  "seq_comm_ms": median(q["exposed"]), "seq_step_ms": median(q["step"]),
                  "ratio": ratio, "mb_per_rank_step": o.get("mb_per_rank"), "round_medians_overlap": o["round_step"],
                  "round_medians_seq": q["round_step"], "cpu_main_ms": median(o["cpu_main"]),
                  "cpu_comm_ms": median(o["cpu_comm"]), "seq_cpu_comm_ms": median(q["cpu_comm"])}
        rows.append([name, f"{median(o['step']):.2f}", f"{median(o['compute']):.2f}", f"{median(o['exposed']):.2f}",
                     f"{median(q['compute']):.2f}", f"{median(q['exposed']):.2f}", f"{seq:.2f}", f"{ratio:.3f}",
                     "meets" if ratio <= 0.70 else "MISSES", f"{median(o['cpu_comm']):.1f}"])
    print("\nmedians over all timed steps (ms); overlap compute = step - exposed, so it includes any slow-down"
          " of backward by the communication thread:")
    print(table(["bucket MB", "overlap step", "overlap compute", "overlap exposed", "seq compute", "seq comm",
                 "seq sum", "ratio", "target <= 0.70", "comm thread CPU"], rows))
    print("comm thread CPU: CPU milliseconds per step of each rank's threads other than the main one (the "
          "communication thread) in the overlap runs, sampled from /proc")
    write_json(a.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
