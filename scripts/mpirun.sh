#!/usr/bin/env bash
# mpirun for all ranks on this one machine, with the flags that needs: Open MPI
# refuses to run as root and to put more ranks than cores on a host unless told,
# ranks that share cores run faster when idle ones yield, and TCP stays on the
# loopback interface. MPICH needs none of this. On a cluster, call mpirun (or srun)
# directly with the cluster's own settings. $MPIEXEC names another launcher.
#
# SIGINT and SIGTERM (Ctrl-C, kill) go to the ranks, which stop together after one
# step, save a checkpoint and exit 3, and this script exits with the launcher's
# code, 3: Open MPI's mpirun, signalled itself, ends the job and exits 1 whatever
# the ranks return. SIGQUIT (Ctrl-\) goes to them as SIGTERM too (a shell script
# would otherwise leave it unanswered). SIGHUP (the terminal closed, ssh dropped)
# goes to them as SIGTERM, as plain mpirun forwards it: a script killed by it
# would leave the job running without a parent, holding the --out lock. The launcher runs in a process
# group of its own (a Ctrl-C or hang-up on the terminal reaches only this script)
# with stdin from /dev/null (bagpipe reads none; a background group must not read
# the terminal). Open MPI's ranks write to pseudo-terminals even when this
# script's output goes to a file, so BAGPIPE_TERMINAL tells bagpipe which it is
# (a progress bar on a terminal, plain lines in a log).
# Usage: scripts/mpirun.sh -np N program args...
set -euo pipefail
launcher=${MPIEXEC:-mpirun}
flags=()
if "$launcher" --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
  flags+=(--oversubscribe --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1 -x BAGPIPE_TERMINAL
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
fi
export OPENBLAS_NUM_THREADS=1
if [ -t 1 ]; then export BAGPIPE_TERMINAL=1; else export BAGPIPE_TERMINAL=0; fi
set -m
"$launcher" "${flags[@]}" "$@" </dev/null &
pid=$!
set +m
# The ranks are the launcher's children on one machine (Open MPI's mpirun and
# MPICH's Hydra proxy alike: the proxy's children for MPICH).
to_ranks() { pkill -"$1" -P "$(pgrep -d, -P "$pid" -f hydra_pmi_proxy || echo "$pid")" || true; }
trap 'to_ranks TERM' TERM HUP QUIT
trap 'to_ranks INT' INT
while kill -0 "$pid" 2>/dev/null; do wait "$pid" || true; done
rc=0
wait "$pid" || rc=$?
exit "$rc"
