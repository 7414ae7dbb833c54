#!/usr/bin/env bash
# The papers' studies at their scale, predicted by bagpipe simulate (docs/results/scale.md).
exec /usr/bin/python3 "$(dirname "$0")/scale.py" "$@"
