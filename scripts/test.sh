#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite (fast, mpi and slow
# tests alike). Extra arguments go to ctest, e.g. `scripts/test.sh -L fast`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
export OPENBLAS_NUM_THREADS=1
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
