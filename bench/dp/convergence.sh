#!/usr/bin/env bash
# Final validation loss of every algorithm vs allreduce (bench/dp/README.md); options: --help.
exec /usr/bin/python3 "$(dirname "$0")/convergence.py" "$@"
