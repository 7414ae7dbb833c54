#!/usr/bin/env bash
# AvgPipe against gpipe and 1f1b on 2 stages (bench/pipe/README.md, section "AvgPipe"):
# samples per second with and without an emulated network, time to a validation loss,
# and the elastic-averaging constants (--ea-alpha, --ea-period). Options: --help.
exec /usr/bin/python3 "$(dirname "$0")/avgpipe.py" "$@"
