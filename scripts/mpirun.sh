#!/usr/bin/env bash
# mpirun for all ranks on this one machine, with the flags that needs: Open MPI
# refuses to run as root and to put more ranks than cores on a host unless told,
# ranks that share cores run faster when idle ones yield, and TCP stays on the
# loopback interface. MPICH needs none of this. On a cluster, call mpirun (or srun)
# directly with the cluster's own settings.
# Usage: scripts/mpirun.sh -np N program args...
set -euo pipefail
flags=()
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  flags+=(--oversubscribe --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
fi
export OPENBLAS_NUM_THREADS=1
exec mpirun "${flags[@]}" "$@"
