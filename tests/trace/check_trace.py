"""Checks a --trace file against the run's metrics log.

usage: check_trace.py TRACE METRICS WORLD [--pp S --micro M] [--dp-thread]

- the file is valid trace-event JSON (an object with traceEvents; "X" events with
  numeric ts and dur >= 0; "M" events naming processes and threads);
- one process per rank, named "rank r (stage p, replica d, tp t)";
- the bytes_sent of all events add up to the bytes_sent of the metrics' step records;
- with --pp: every rank's forward and backward events of every step come in 1F1B's
  order (computed here from the rule, not taken from the runtime), and the pipeline
  bubble shows: the time each stage spends in pipeline receives and waits is
  positive and matches the stages record's idle_s (when the run finished);
- with --dp-thread: every rank has a thread named "dp communication" whose events
  are the data-parallel allreduces.
"""
import json
import sys
from collections import defaultdict


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def one_f_one_b(S, s, M):
    """(kind, micro) of stage s in 1F1B: S-s-1 warm-up forwards, then one forward
    and one backward in turn, then the remaining backwards."""
    w = min(S - s - 1, M)
    ops = [("forward", i) for i in range(w)]
    for i in range(M - w):
        ops += [("forward", w + i), ("backward", i)]
    return ops + [("backward", i) for i in range(M - w, M)]


def main():
    args = sys.argv[1:]
    path, metrics_path, world = args[0], args[1], int(args[2])
    opts = dict(zip(args[3::2], args[4::2])) if "--dp-thread" not in args else {}
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("no traceEvents array")
    events = doc["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X"]
    for e in xs:
        for k in ("pid", "tid", "ts", "dur", "name", "cat"):
            if k not in e:
                fail("event without %s: %r" % (k, e))
        if not (isinstance(e["ts"], (int, float)) and e["dur"] >= 0):
            fail("bad time in %r" % e)
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "process_name"}
    if sorted(procs) != list(range(world)):
        fail("process tracks %s, expected ranks 0..%d" % (sorted(procs), world - 1))
    for r, name in procs.items():
        if not name.startswith("rank %d (stage " % r):
            fail("rank %d is named %r" % (r, name))
    if {e["pid"] for e in xs} != set(range(world)):
        fail("not every rank has events")
    print("%d events on %d ranks" % (len(xs), world))

    records = [json.loads(l) for l in open(metrics_path)]
    logged = sum(r["bytes_sent"] for r in records if r["type"] == "step")
    traced = sum(e["args"].get("bytes_sent", 0) for e in xs)
    if traced != logged:
        fail("events send %d bytes, the metrics log %d" % (traced, logged))
    print("bytes: %d in events = %d in the metrics log" % (traced, logged))

    if "--pp" in opts:
        S, M = int(opts["--pp"]), int(opts["--micro"])
        # A run stopped by a signal has no stages record.
        stages = ([r for r in records if r["type"] == "stages"] or [None])[-1]
        for r in range(world):
            s = int(procs[r].split("stage ")[1].split(",")[0])
            steps = defaultdict(list)
            for e in sorted(xs, key=lambda e: e["ts"]):
                if e["pid"] == r and e["name"] in ("forward", "backward"):
                    steps[e["args"]["step"]].append((e["name"], e["args"]["micro"]))
            want = one_f_one_b(S, s, M)
            for step, ops in steps.items():
                if ops != want:
                    fail("rank %d step %d ran %s, 1F1B is %s" % (r, step, ops, want))
            idle = sum(e["dur"] for e in xs if e["pid"] == r and e["cat"] == "comm"
                       and e["args"].get("axis") == "pp"
                       and e["name"] in ("recv", "wait isend", "wait irecv")) * 1e-6
            busy = sum(e["dur"] for e in xs if e["pid"] == r
                       and e["name"] in ("forward", "backward")) * 1e-6
            if not idle > 0:
                fail("stage %d shows no bubble" % s)
            logged_idle = stages["idle_s"][s] if stages else idle
            if abs(idle - logged_idle) > 0.1 * logged_idle + 1e-3:
                fail("stage %d waits %.6f s in the trace, the stages record says %.6f s"
                     % (s, idle, logged_idle))
            print("stage %d: %d steps in 1F1B order; busy %.2f ms, bubble %.2f ms "
                  "(stages record: %.2f ms)" % (s, len(steps), busy * 1e3, idle * 1e3,
                                                logged_idle * 1e3))

    if "--dp-thread" in args:
        for r in range(world):
            tids = [e["tid"] for e in events if e.get("ph") == "M" and e["pid"] == r
                    and e["name"] == "thread_name" and e["args"]["name"] == "dp communication"]
            if len(tids) != 1:
                fail("rank %d has no dp communication thread" % r)
            on = [e for e in xs if e["pid"] == r and e["tid"] == tids[0]]
            if not on or any(e["args"].get("axis") != "dp" for e in on if e["cat"] == "comm"):
                fail("rank %d: the dp communication thread has %d events, not all dp: %s"
                     % (r, len(on), {e["name"] for e in on}))
            print("rank %d: dp communication thread (tid %d) with %d events"
                  % (r, tids[0], len(on)))


main()
