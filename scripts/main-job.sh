#!/usr/bin/env bash
# The main job: install what is missing, build, train the default gpt on the King
# James Bible, then print a sample of what it learned.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
export OPENBLAS_NUM_THREADS=1
build/bagpipe train --model gpt --out runs/gpt
build/bagpipe sample --ckpt runs/gpt --prompt "And God said" --length 300
