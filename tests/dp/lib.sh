# shellcheck shell=bash disable=SC2034
# Helpers of the data-parallel script tests: run bagpipe in one process or under
# mpiexec ($BP_MPIEXEC with $BP_MPIEXEC_FLAGS, both set by ctest), read metrics.
set -euo pipefail
: "${BAGPIPE_BIN:?set by ctest}"
: "${BP_MPIEXEC:?set by ctest}"
BP="$BAGPIPE_BIN"
WORK=$(mktemp -d /tmp/bp_dp.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OPENBLAS_NUM_THREADS=1
TEXT=/usr/share/common-licenses/GPL-3
# A tiny gpt (7664 parameters) that takes a few milliseconds per step.
TINY_GPT=(--layers 1 --embd 16 --heads 2 --seq-len 16 --batch 8 --data "$TEXT" --eval-every 0
  --progress none)
SMALL_MLP=(--model mlp --hidden 32 --batch 32 --eval-every 0 --progress none)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# launch W command...: the command in one process (W = 1, no mpiexec) or on W ranks.
# Every run is bounded, so that a hang fails the test with a message.
launch() {
  local w=$1
  shift
  if [ "$w" -eq 1 ]; then
    timeout 60 "$@"
  else
    local flags
    read -ra flags <<<"${BP_MPIEXEC_FLAGS:-}"
    timeout 60 "$BP_MPIEXEC" "${flags[@]}" -n "$w" "$@"
  fi
}

# losses FILE: "step loss" for every step record of a metrics log.
losses() {
  grep '"type":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,}]+).*/\1 \2/'
}
