#!/usr/bin/env bash
# --bucket-mb auto against a manual sweep of bucket sizes (bench/dp/README.md); options: --help.
exec /usr/bin/python3 "$(dirname "$0")/bucket_tune.py" "$@"
