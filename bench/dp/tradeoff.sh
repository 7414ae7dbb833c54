#!/usr/bin/env bash
# Time to a fixed validation loss per algorithm and emulated network (bench/dp/README.md); options: --help.
exec /usr/bin/python3 "$(dirname "$0")/tradeoff.py" "$@"
