"""Emulated runs on scripts/cluster.sh hosts for the papers' studies (bench/emu/*_emu.py).

A run is `bagpipe train` under the cluster's mpirun on a set of hosts of its own, so that
runs of a few ranks each can share the cluster at once (`Pool`): an emulated rank sleeps
through its modeled work, and the dilation keeps the little CPU the hosts' messages need
out of the measured times (a repeated configuration shows how little, `spread`).
Environment: BAGPIPE (build/bagpipe), BP_CLUSTER (up with enough hosts).
"""
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BP = os.environ.get("BAGPIPE", os.path.join(ROOT, "build", "bagpipe"))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
AXES = ("dp", "pp", "tp", "embed")
# Open MPI's TCP transport sends a message above its eager limit (64 KiB) only while both
# ranks are inside MPI calls, and an emulated stage spends its time waiting for its device
# instead: its sends stalled (a 4-stage gpipe step took 160 ms where 94 are predicted, 97.5
# with these). GPUs' transports progress on their own; sending eagerly up to 32 MiB is
# closer to them. The progress hook (a rank waiting on its device calls MPI) does not
# make it unneeded: a rendezvous still takes several hand-overs, each waiting for the
# other rank's next (dilated) poll. Side by side on 4 hosts at 10 Gbit/s, dilation 64,
# without these: qadam's step +6%, allreduce's (2 MB buckets) +32%, dp 2 x pp 2 gpipe
# with decentralized +18-23% (plan_emu's gpt, two runs at once, host halves swapped).
EAGER = {"OMPI_MCA_btl_tcp_eager_limit": "33554432", "OMPI_MCA_btl_tcp_rndv_eager_limit": "33554432",
         "OMPI_MCA_btl_tcp_max_send_size": "4194304"}
# The loss's bookkeeping is a collective of the meta group, whose waits poll at the
# dilated interval: about 0.1 ms of the device's time between two logged steps, in
# which async's averaging thread copies the weights while no step waits for it. A
# run logs once, at its end, so that no timed step has such a gap before it.
LOG_ONCE = ["--log-every", "100000"]
# simulate, told the same limit, charges a message up to it one hand-over instead of a
# rendezvous's three (the Optimus-CC baseline: 208 ms predicted without, 123 with).
SIM_EAGER = ["--mpi-eager-bytes", EAGER["OMPI_MCA_btl_tcp_eager_limit"]]


def measure(rundir, first=3):
    """The run's steps from `first` on: median step ms, mean bytes and exposed ms per
    axis and step, and the summary's peak device memory."""
    steps, summary = [], {}
    with open(os.path.join(rundir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "step" and r["step"] >= first:
                steps.append(r)
            elif r.get("type") == "summary":
                summary = r
    if not steps:
        sys.exit(f"{rundir}: no steps from {first} on")
    ms = sorted(r["step_ms"] for r in steps)
    n = len(steps)
    last = steps[-1]["step_ms"]
    return {"step_ms": ms[n // 2] if n % 2 else (ms[n // 2 - 1] + ms[n // 2]) / 2,
            "mean_ms": sum(ms) / n,
            # the run's last step agrees over every rank whatever the algorithm
            "last_ms": last, "mean_but_last_ms": (sum(ms) - last) / (n - 1) if n > 1 else last,
            "bytes": {a: sum(r["axis_bytes"].get(a, 0) for r in steps) / n for a in AXES},
            "exposed_ms": {a: sum(r["axis_exposed_ms"].get(a, 0) for r in steps) / n for a in AXES},
            "device_peak_bytes": summary.get("device_peak_bytes", 0)}


class Pool:
    """Runs of `ranks` ranks (`per_host` to a host) at once on the cluster's `hosts`
    hosts, each on hosts no other running run holds."""

    def __init__(self, hosts, jobs):
        self.free = list(range(hosts))
        self.cv = threading.Condition()
        self.ex = ThreadPoolExecutor(max_workers=jobs)

    def _take(self, n):
        with self.cv:
            self.cv.wait_for(lambda: len(self.free) >= n)
            got, self.free = self.free[:n], self.free[n:]
            return got

    def _give(self, got):
        with self.cv:
            self.free = sorted(self.free + got)
            self.cv.notify_all()

    def train(self, rundir, ranks, per_host, opts, first=3):
        """Submit one run; its future gives measure(rundir, first)."""
        return self.ex.submit(self._train, rundir, ranks, per_host, opts, first)

    def _train(self, rundir, ranks, per_host, opts, first):
        name = os.environ.get("BP_CLUSTER", "bpc")
        got = self._take(ranks // per_host)
        try:
            hosts = ",".join(f"{name}-h{h}:{per_host}" for h in got)
            cmd = [CLUSTER, "mpirun", "-np", str(ranks), "--host", hosts, BP, "train"] + opts + [
                "--eval-every", "0", "--progress", "none", "--out", rundir, "--overwrite"] + LOG_ONCE
            r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **EAGER))
            if r.returncode:
                raise RuntimeError(f"{rundir}: train failed ({r.returncode}): {r.stderr[-1500:]}")
        finally:
            self._give(got)
        return measure(rundir, first)


def spread(values):
    """(max - min) / mean."""
    return (max(values) - min(values)) / (sum(values) / len(values))


def add_output_args(ap, out):
    """--out (the runs' folders), --json, --markdown and --table (the markdown of an
    earlier --json, without running), which every study takes."""
    ap.add_argument("--out", default=out)
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--table", default="")


def table_only(a, markdown):
    """With --table: markdown(data of that --json, --markdown) and True."""
    if not a.table:
        return False
    with open(a.table) as f:
        markdown(json.load(f), a.markdown)
    return True


def save(a, data, markdown):
    """data into --json and markdown(data, --markdown), where given."""
    if a.json:
        with open(a.json, "w") as f:
            json.dump(data, f, indent=1)
    if a.markdown:
        markdown(data, a.markdown)
