# shellcheck shell=bash disable=SC2034
# Helpers of the Optimus-CC script tests (tests/lib.sh has the shared ones): run
# `bagpipe train` under mpiexec and read its metrics log and checkpoint shards.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
: "${BP_MPIEXEC:?set by ctest}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SHARDS=(python3 "$HERE/shards.py")
# A small gpt (embedding, 2 layers, head: 4 blocks) of about a millisecond a step.
SMALL_GPT=(--layers 2 --embd 16 --heads 2 --seq-len 16 --batch 8 --data "$TEXT" --progress none
  --log-every 1)

# train NAME W OPTIONS...: `bagpipe train OPTIONS --out $WORK/NAME` on W ranks,
# bounded in time so that a hang fails with a message. Sets F to its metrics log.
train() {
  local name=$1 w=$2 flags
  shift 2
  read -ra flags <<<"${BP_MPIEXEC_FLAGS:-}"
  timeout -k 5 90 "$BP_MPIEXEC" "${flags[@]}" -n "$w" "$BP" train "$@" --out "$WORK/$name" \
    >"$WORK/$name.out" 2>&1 || fail "$name: the run on $w ranks failed: $(tail -n 5 "$WORK/$name.out")"
  F="$WORK/$name/metrics.jsonl"
  [ -s "$F" ] || fail "$name: no metrics log"
}

# axis FILE AXIS: "step bytes" of AXIS (dp, pp, tp, embed) in every step record.
axis() {
  grep '"type":"step"' "$1" |
    sed -nE "s/.*\"step\":([0-9]+),.*\"axis_bytes\":\{[^}]*\"$2\":([0-9.e+]+).*/\1 \2/p"
}
