#!/usr/bin/env bash
# Run the communication benchmark on 2 and 4 ranks: bench/comm/run.sh [build-dir] [max_mb]
set -eu
build=${1:-build}
max_mb=${2:-64}
flags=()
if mpiexec --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
  flags=(--allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1
         --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
fi
export OPENBLAS_NUM_THREADS=1
for np in 2 4; do
  mpiexec "${flags[@]}" -np "$np" "$build/bench/comm/bench_comm" "$max_mb"
done
