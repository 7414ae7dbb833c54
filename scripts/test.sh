#!/usr/bin/env bash
# Install what is missing, check that every #include points down the layers
# (scripts/check-layers.sh), build, and run the whole test suite (fast, mpi and slow
# tests alike), then the suite under sanitizers (scripts/sanitize.sh) and every fuzz
# harness for a few seconds (scripts/fuzz.sh). Extra arguments go to ctest and run
# that part of the normal suite only, e.g. `scripts/test.sh -L fast`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check-layers.sh
scripts/build.sh
export OPENBLAS_NUM_THREADS=1
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
if [ $# -eq 0 ]; then
  scripts/sanitize.sh
  scripts/fuzz.sh 12
fi
