#!/usr/bin/env bash
# bagpipe simulate against measured runs (bench/simulate/README.md); options: --help.
exec /usr/bin/python3 "$(dirname "$0")/validate.py" "$@"
