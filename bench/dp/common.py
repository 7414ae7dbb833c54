"""Shared helpers of the data-parallel benchmarks: running bagpipe under mpirun,
reading its metrics log, medians and tables. Standard library only."""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BAGPIPE = os.path.join(ROOT, "build", "bagpipe")
PYTHON = "/usr/bin/python3"  # Debian's interpreter: the one that has python3-torch

# Every algorithm of --dp-algo, in the order of docs/algorithms.md#data-parallel-algorithms.
ALGOS = ["allreduce", "bytegrad", "qadam", "decentralized", "lp-decentralized", "async", "powersgd", "easgd"]


def one_thread_env():
    env = dict(os.environ)
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _open_mpi():
    try:
        out = subprocess.run(["mpirun", "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True).stdout
    except FileNotFoundError:
        sys.exit("bench/dp: mpirun not found (install Open MPI or MPICH)")
    return "Open MPI" in out


def mpirun_prefix(ranks, nice=True):
    """mpirun for all ranks on this machine. Open MPI needs to be told that it may run as
    root and put more ranks than cores on the host; idle ranks yield the core; TCP stays on
    the loopback interface."""
    cmd = ["nice", "-n", "5"] if nice else []
    cmd += ["mpirun"]
    if _open_mpi():
        cmd += ["--oversubscribe", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo",
                "--mca", "mpi_yield_when_idle", "1", "-x", "OPENBLAS_NUM_THREADS=1"]
        if os.geteuid() == 0:
            cmd += ["--allow-run-as-root"]
    return cmd + ["-np", str(ranks)]


class RunFailed(RuntimeError):
    pass


def _end_group(p):
    """End the process group of p (our own child: mpirun and its ranks)."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass


def run_cmd(cmd, timeout, what, cwd=ROOT, watch=None, stop_when=None, on_poll=None):
    """Run cmd in its own process group (so a timeout ends all of it); return
    (output, seconds, stopped). With watch (a JSONL file) and stop_when(records), the run
    is ended early, as a success (stopped = True), once stop_when is true of the records
    written so far."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:  # a file, not a pipe: nothing blocks while we poll
        p = subprocess.Popen(cmd, cwd=cwd, env=one_thread_env(), stdout=log, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        stopped = timed_out = False
        while p.poll() is None:
            if time.perf_counter() - t0 > timeout:
                timed_out = True
                break
            time.sleep(0.5)
            if on_poll:
                on_poll()
            if stop_when and watch and os.path.exists(watch):
                try:
                    if stop_when(read_jsonl(watch, complete_only=True)):
                        stopped = True
                        break
                except ValueError:
                    pass
        if p.poll() is None:
            _end_group(p)
        log.seek(0)
        out = log.read()
    if timed_out:
        raise RunFailed(f"{what}: no result after {timeout} s (killed): {' '.join(cmd)}\n{out[-3000:]}")
    if p.returncode != 0 and not stopped:
        raise RunFailed(f"{what}: exit {p.returncode}: {' '.join(cmd)}\n{out[-3000:]}")
    return out, time.perf_counter() - t0, stopped


def read_jsonl(path, complete_only=False):
    """Records of a JSONL file; complete_only: skip a last line still being written."""
    with open(path) as f:
        lines = f.readlines()
    if complete_only and lines and not lines[-1].endswith("\n"):
        lines = lines[:-1]
    return [json.loads(line) for line in lines if line.startswith("{")]


class Bagpipe:
    """Runs `bagpipe train` on N ranks in fresh directories under one temporary folder."""

    def __init__(self, binary=BAGPIPE, keep=None):
        self.binary = os.path.abspath(binary)
        if not os.access(self.binary, os.X_OK):
            sys.exit(f"bench/dp: {self.binary}: not an executable (build bagpipe first: "
                     "cmake -S . -B build && cmake --build build -j2)")
        self.keep = keep  # keep run directories here (else a temporary folder, removed at exit)
        self.tmp = keep or tempfile.mkdtemp(prefix="bp_bench_dp_")
        os.makedirs(self.tmp, exist_ok=True)
        self.count = 0

    def close(self):
        if not self.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def train(self, ranks, args, timeout=1800, what=None, stop_when=None, thread_cpu=False):
        """Records of the metrics log of `mpirun -np ranks bagpipe train args`; with
        stop_when(records), the run ends as soon as that returns true; thread_cpu: sample
        the CPU time of the ranks' threads while it runs (Run.thread_cpu)."""
        self.count += 1
        out_dir = os.path.join(self.tmp, f"run{self.count:03d}")
        metrics = os.path.join(out_dir, "metrics.jsonl")
        cmd = mpirun_prefix(ranks) + [self.binary, "train", "--out", out_dir, "--metrics", metrics,
                                      "--progress", "none", "--threads", "1"] + list(args)
        what = what or f"bagpipe -np {ranks} {' '.join(args)}"
        sampler = ThreadCpu(out_dir, metrics) if thread_cpu else None
        out, wall, stopped = run_cmd(cmd, timeout, what, watch=metrics, stop_when=stop_when,
                                     on_poll=sampler.sample if sampler else None)
        try:
            recs = read_jsonl(metrics, complete_only=stopped)
        except (OSError, ValueError) as e:
            raise RunFailed(f"{what}: cannot read the metrics log {metrics}: {e}\n{out[-2000:]}")
        if not self.keep:
            shutil.rmtree(out_dir, ignore_errors=True)  # checkpoints are not needed
        run = Run(recs, wall, " ".join(cmd))
        run.stopped = stopped
        run.thread_cpu = sampler.result() if sampler else None
        return run


class ThreadCpu:
    """CPU seconds of each thread of the ranks of one run (processes whose command line
    names its output folder), sampled from /proc while it runs. A thread's time leaves
    /proc when it exits, so the last value seen of every thread is kept. result(): per
    step, the main threads' and the other threads' CPU milliseconds, per rank (the other
    threads: the communication thread, and MPI's own, which stay idle)."""

    def __init__(self, marker, metrics):
        self.marker, self.metrics = marker, metrics
        self.cpu = {}  # (pid, tid): seconds
        self.steps = 0

    def sample(self):
        tick = os.sysconf("SC_CLK_TCK")
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
                if not (cmd and cmd[0].endswith(b"bagpipe") and self.marker.encode() in b" ".join(cmd)):
                    continue
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    self.cpu[(pid, tid)] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
            except (OSError, IndexError, ValueError):
                continue
        try:
            self.steps = sum(1 for r in read_jsonl(self.metrics, complete_only=True) if r.get("type") == "step")
        except (OSError, ValueError):
            pass

    def result(self):
        ranks = len({pid for pid, _ in self.cpu})
        if not ranks or not self.steps:
            return None
        main = sum(v for (pid, tid), v in self.cpu.items() if pid == tid)
        other = sum(v for (pid, tid), v in self.cpu.items() if pid != tid)
        return {"steps": self.steps, "ranks": ranks, "main_ms_per_step": 1e3 * main / ranks / self.steps,
                "other_ms_per_step": 1e3 * other / ranks / self.steps}


class Run:
    def __init__(self, records, wall_s, cmd):
        self.records, self.wall_s, self.cmd = records, wall_s, cmd
        self.config = next((r for r in records if r.get("type") == "config"), {})
        self.steps = [r for r in records if r.get("type") == "step"]
        self.evals = [r for r in records if r.get("type") == "eval"]
        self.summary = next((r for r in records if r.get("type") == "summary"), {})

    def timed(self, key, skip):
        """`key` of every step record after the first `skip` steps."""
        return [r[key] for r in self.steps if r["step"] > skip and key in r]

    def mb_per_rank(self, skip=2):
        """Mean megabytes one rank sent per step: the log's bytes_sent is summed over all
        ranks (it has per-axis parts, axis_bytes); divided by the world size. The mean, not
        the median: async's rounds finish in some steps and not in others."""
        world = self.config.get("world", 1) or 1
        b = self.timed("bytes_sent", skip)
        return sum(b) / len(b) / world / 1e6 if b else float("nan")

    def final_val(self):
        return self.evals[-1]["val_loss"] if self.evals else float("nan")

    def time_to_val(self, threshold):
        """(step, training milliseconds summed over steps 1..step) of the first evaluation with
        val_loss <= threshold; None if never. Evaluation time is not training time."""
        hit = next((e for e in self.evals if e["val_loss"] <= threshold), None)
        if hit is None:
            return None
        ms = sum(r["step_ms"] for r in self.steps if r["step"] <= hit["step"])
        return hit["step"], ms


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def write_json(path, obj):
    """obj as indented JSON in path (the --json option of every script); nothing when path is None."""
    if path:
        with open(path, "w") as f:
            json.dump(obj, f, indent=1)


def table(headers, rows):
    """Plain fixed-width table (also valid Markdown)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    def line(r):  # first column (names) left, numbers right
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, width))) + " |"
    sep = "|" + "|".join(":" + "-" * (w + 1) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(width)) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def _cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[3] + v[4], sum(v)  # idle + iowait, total (jiffies, all cores)


def idle_cores(seconds=1.0):
    """Cores left idle by everything on the machine during the next `seconds`."""
    i0, t0 = _cpu_times()
    time.sleep(seconds)
    i1, t1 = _cpu_times()
    return (os.cpu_count() or 1) * (i1 - i0) / max(1, t1 - t0)


def wait_quiet(need, max_wait):
    """Wait (up to max_wait seconds) until at least `need` cores are idle: timing runs on a
    machine shared with other work measure the other work too. Returns the idle cores seen."""
    if need <= 0:
        return float("nan")
    deadline = time.monotonic() + max_wait
    while True:
        idle = idle_cores()
        if idle >= need or time.monotonic() >= deadline:
            return idle
        time.sleep(1.0)


def load_note():
    try:
        return "load average " + " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "load average unknown"
