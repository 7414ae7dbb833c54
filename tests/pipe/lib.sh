# shellcheck shell=bash disable=SC2034
# Helpers of the pipeline script tests (tests/lib.sh has the shared ones).
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${BP_MPIEXEC:?set by ctest}"
# A small gpt of 4 blocks (embedding, 2 layers, head) that takes about a millisecond
# per step, so every stage count up to 4 fits.
SMALL_GPT=(--layers 2 --embd 16 --heads 2 --seq-len 16 --batch 8 --data "$TEXT" --progress none
  --log-every 1)
# --batch 48 in 4 micro-batches: the 10000 test images end in a partial micro-batch.
SMALL_MLP=(--model mlp --hidden 32 --batch 48 --progress none --log-every 1)
