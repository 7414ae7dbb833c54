# shellcheck shell=bash disable=SC2034
# Helpers of the data-parallel script tests (tests/lib.sh has the shared ones).
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${BP_MPIEXEC:?set by ctest}"
# A tiny gpt (7664 parameters) that takes a few milliseconds per step.
TINY_GPT=(--layers 1 --embd 16 --heads 2 --seq-len 16 --batch 8 --data "$TEXT" --eval-every 0
  --progress none)
SMALL_MLP=(--model mlp --hidden 32 --batch 32 --eval-every 0 --progress none)

# losses FILE: "step loss" for every step record of a metrics log.
losses() {
  grep '"type":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,}]+).*/\1 \2/'
}
