#!/usr/bin/python3
"""bagpipe data-parallel vs PyTorch DDP on the same model and global batch, 1 thread each.

Alternates, in one run, fresh processes of
  bagpipe  mpirun -np W bagpipe train --dp-algo allreduce
  torch    bench/torch/ddp.py --world W                  (DDP, gloo over loopback)
  bagpipe  mpirun -np W bagpipe train --dp-algo powersgd --rank R --powersgd-warmup S
  torch    bench/torch/ddp.py --world W --hook powersgd --rank R --powersgd-start S
drops the first --warmup steps of each run and prints the median step time of each and
the ratios bagpipe/PyTorch (allreduce target <= 0.80). No network emulation: PyTorch has
none, so both communicate through this machine's memory/loopback.

  bench/dp/ddp.sh                         # gpt, 2 ranks, global batch 16, 5 rounds
  bench/dp/ddp.sh --rounds 7 --rank 4 --powersgd-warmup 10
  bench/dp/ddp.sh --model mlp
"""
import argparse
import json
import os
import sys

from common import PYTHON, ROOT, Bagpipe, Run, RunFailed, load_note, median, run_cmd, table, wait_quiet, write_json

TORCH_DDP = os.path.join(ROOT, "bench", "torch", "ddp.py")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bagpipe", default=None, help="binary (default build/bagpipe)")
    p.add_argument("--model", choices=["gpt", "mlp"], default="gpt")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--batch", type=int, help="global batch (default: the model's, 16 for gpt, 64 for mlp)")
    p.add_argument("--rank", type=int, default=4, help="PowerSGD rank (default 4)")
    p.add_argument("--powersgd-warmup", type=int, default=2,
                   help="steps of plain allreduce before PowerSGD, both systems (PyTorch needs >= 2; default 2)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30, help="timed steps per run (default 30)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps per run (default 5, >= --powersgd-warmup)")
    p.add_argument("--algos", default="allreduce,powersgd", help="which pairs (default allreduce,powersgd)")
    p.add_argument("--quiet-cores", type=float, default=1.7,
                   help="before each run wait until this many cores are idle (0: do not wait; default 1.7)")
    p.add_argument("--quiet-wait", type=float, default=120)
    p.add_argument("--json", help="also write all numbers here")
    a = p.parse_args()
    if a.warmup < a.powersgd_warmup:
        p.error("--warmup must be >= --powersgd-warmup (the timed steps are PowerSGD steps)")
    bp = Bagpipe(a.bagpipe) if a.bagpipe else Bagpipe()
    total = a.warmup + a.steps
    common_bp = ["--model", a.model, "--steps", str(total), "--eval-every", "0"]
    common_t = ["--model", a.model, "--world", str(a.ranks), "--threads", "1", "--time-steps", str(a.steps),
                "--time-warmup", str(a.warmup)]
    if a.batch:
        common_bp += ["--batch", str(a.batch)]
        common_t += ["--batch", str(a.batch)]
    cases = []
    algos = a.algos.split(",")
    if "allreduce" in algos:
        cases += [("allreduce", "bagpipe", common_bp + ["--dp-algo", "allreduce"]),
                  ("allreduce", "torch", common_t)]
    if "powersgd" in algos:
        cases += [("powersgd", "bagpipe", common_bp + ["--dp-algo", "powersgd", "--rank", str(a.rank),
                                                       "--powersgd-warmup", str(a.powersgd_warmup)]),
                  ("powersgd", "torch", common_t + ["--hook", "powersgd", "--rank", str(a.rank),
                                                    "--powersgd-start", str(a.powersgd_warmup)])]
    print(f"ddp: {a.model}, {a.ranks} ranks, global batch {a.batch or 'default'}, 1 thread each, PowerSGD rank "
          f"{a.rank} after {a.powersgd_warmup} allreduce steps; {a.rounds} rounds x {a.steps} timed steps "
          f"(+{a.warmup}); {load_note()}", flush=True)
    res = {(algo, impl): {"steps": [], "rounds": []} for algo, impl, _ in cases}
    try:
        for r in range(a.rounds):
            for algo, impl, args in cases:
                idle = wait_quiet(a.quiet_cores, a.quiet_wait)
                if impl == "bagpipe":
                    run = bp.train(a.ranks, args)
                else:
                    out, wall, _ = run_cmd(["nice", "-n", "5", PYTHON, TORCH_DDP] + args, 1800, f"torch ddp {algo}")
                    run = Run([json.loads(x) for x in out.splitlines() if x.startswith("{")], wall, "")
                t = run.timed("step_ms", a.warmup)
                if not t:
                    raise RunFailed(f"{impl} {algo}: no step records after warm-up")
                res[(algo, impl)]["steps"] += t
                res[(algo, impl)]["rounds"].append(median(t))
                if impl == "bagpipe":
                    res[(algo, impl)]["mb_per_rank_step"] = run.mb_per_rank()
                print(f"  round {r + 1}: {algo:9s} {impl:7s} median {median(t):7.2f} ms/step; idle cores before "
                      f"{idle:.1f}", flush=True)
    except RunFailed as e:
        sys.exit(f"ddp: {e}")
    finally:
        bp.close()

    rows, out = [], {}
    for algo in [x for x in ("allreduce", "powersgd") if x in algos]:
        b, t = res[(algo, "bagpipe")], res[(algo, "torch")]
        mb, mt = median(b["steps"]), median(t["steps"])
        ratio = mb / mt
        target = "<= 0.80" if algo == "allreduce" else "(none)"
        verdict = ("meets" if ratio <= 0.80 else "MISSES") if algo == "allreduce" else ""
        rows.append([algo, f"{mb:.2f}", f"{min(b['rounds']):.1f}..{max(b['rounds']):.1f}", f"{mt:.2f}",
                     f"{min(t['rounds']):.1f}..{max(t['rounds']):.1f}", f"{ratio:.3f}", f"{target} {verdict}"])
        out[algo] = {"bagpipe_ms": mb, "torch_ms": mt, "ratio": ratio, "bagpipe_round_medians": b["rounds"],
                     "torch_round_medians": t["rounds"], "bagpipe_mb_per_rank_step": b.get("mb_per_rank_step")}
    print("\nmedian over all timed steps of all rounds (ms/step):")
    print(table(["algorithm", "bagpipe", "rounds", "PyTorch DDP", "rounds", "ratio bagpipe/PyTorch", "target"],
                rows))
    write_json(a.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
