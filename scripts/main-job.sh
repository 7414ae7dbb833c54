#!/usr/bin/env bash
# The main job: install what is missing, build, train the default gpt on the King
# James Bible data-parallel on 2 ranks (the global batch of 16 split 8 + 8, bucketed
# allreduce overlapped with backward), then print a sample of what it learned.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/mpirun.sh -np 2 build/bagpipe train --model gpt --dp 2 --dp-algo allreduce --out runs/gpt --overwrite
build/bagpipe sample --ckpt runs/gpt --prompt "And God said" --length 300
