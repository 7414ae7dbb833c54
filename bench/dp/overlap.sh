#!/usr/bin/env bash
# Overlap of gradient communication with backward (bench/dp/README.md); options: --help.
exec /usr/bin/python3 "$(dirname "$0")/overlap.py" "$@"
