# shellcheck shell=bash disable=SC2034
# Helpers of the Optimus-CC script tests: run `bagpipe train` under mpiexec
# ($BP_MPIEXEC with $BP_MPIEXEC_FLAGS, both set by ctest) and read its metrics log
# and checkpoint shards.
set -euo pipefail
: "${BAGPIPE_BIN:?set by ctest}"
: "${BP_MPIEXEC:?set by ctest}"
BP="$BAGPIPE_BIN"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SHARDS=(python3 "$HERE/shards.py")
WORK=$(mktemp -d /tmp/bp_occ.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OPENBLAS_NUM_THREADS=1
TEXT=/usr/share/common-licenses/GPL-3
# A small gpt (embedding, 2 layers, head: 4 blocks) of about a millisecond a step.
SMALL_GPT=(--layers 2 --embd 16 --heads 2 --seq-len 16 --batch 8 --data "$TEXT" --progress none
  --log-every 1)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

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

# values FILE TYPE KEY: "step value" of a top-level KEY in every record of TYPE.
values() {
  grep "\"type\":\"$2\"" "$1" | sed -nE "s/.*\"step\":([0-9]+),.*\"$3\":([^,}]+).*/\1 \2/p"
}

# axis FILE AXIS: "step bytes" of AXIS (dp, pp, tp, embed) in every step record.
axis() {
  grep '"type":"step"' "$1" |
    sed -nE "s/.*\"step\":([0-9]+),.*\"axis_bytes\":\{[^}]*\"$2\":([0-9.e+]+).*/\1 \2/p"
}

# field FILE TYPE KEY: KEY in the last record of TYPE, as written (a number, a
# "string" without quotes, an [array] without brackets).
field() {
  grep "\"type\":\"$2\"" "$1" | tail -n 1 |
    sed -nE "s/.*\"$3\":(\[([^]]*)\]|\"([^\"]*)\"|([^,}]*)).*/\2\3\4/p"
}

# same NAME FILE_A FILE_B TYPE KEY LIMIT: KEY of every TYPE record agrees within
# LIMIT relative, step by step.
same() {
  local name=$1 type=$4 key=$5 limit=$6 worst
  values "$2" "$type" "$key" >"$WORK/va"
  values "$3" "$type" "$key" >"$WORK/vb"
  [ -s "$WORK/va" ] || fail "$name: no $type $key in $2"
  [ "$(wc -l <"$WORK/va")" -eq "$(wc -l <"$WORK/vb")" ] || fail "$name: not as many $type records"
  worst=$(paste "$WORK/va" "$WORK/vb" | awk -v limit="$limit" '
    $1 != $3 || $2 !~ /^-?[0-9]/ || $4 !~ /^-?[0-9]/ { print "bad records at step " $1; exit 1 }
    { d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; r = m > 0 ? d / m : d
      if (r >= worst) { worst = r; at = $1 } }
    END { printf "%.3g at step %d", worst, at; if (worst > limit) exit 1 }') ||
    fail "$name: relative difference of $type $key: $worst (limit $limit)"
  echo "$name: $type $key: largest relative difference $worst"
}
