#!/usr/bin/env bash
# mpirun with the flags this kind of machine needs: Open MPI refuses to run as root
# and to put more ranks than cores on a host unless told, and ranks that share the
# cores run faster when idle ones yield. MPICH needs none of this.
# Usage: scripts/mpirun.sh -np N program args...
set -euo pipefail
flags=()
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  flags+=(--oversubscribe --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
fi
export OPENBLAS_NUM_THREADS=1
exec mpirun "${flags[@]}" "$@"
