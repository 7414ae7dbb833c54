#!/usr/bin/env bash
# bagpipe data-parallel vs PyTorch DDP, step time (bench/dp/README.md); options: --help.
exec /usr/bin/python3 "$(dirname "$0")/ddp.py" "$@"
