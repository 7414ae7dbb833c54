# shellcheck shell=bash disable=SC2034
# Helpers of the pipeline script tests: run bagpipe in one process or under mpiexec
# ($BP_MPIEXEC with $BP_MPIEXEC_FLAGS, both set by ctest) and read its metrics log.
set -euo pipefail
: "${BAGPIPE_BIN:?set by ctest}"
: "${BP_MPIEXEC:?set by ctest}"
BP="$BAGPIPE_BIN"
WORK=$(mktemp -d /tmp/bp_pipe.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OPENBLAS_NUM_THREADS=1
TEXT=/usr/share/common-licenses/GPL-3
# A small gpt of 4 blocks (embedding, 2 layers, head) that takes about a millisecond
# per step, so every stage count up to 4 fits.
SMALL_GPT=(--layers 2 --embd 16 --heads 2 --seq-len 16 --batch 8 --data "$TEXT" --progress none
  --log-every 1)
# --batch 48 in 4 micro-batches: the 10000 test images end in a partial micro-batch.
SMALL_MLP=(--model mlp --hidden 32 --batch 48 --progress none --log-every 1)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# launch W command...: the command in one process (W = 1, no mpiexec) or on W ranks,
# bounded in time so that a hang fails the test with a message.
launch() {
  local w=$1
  shift
  if [ "$w" -eq 1 ]; then
    timeout -k 5 60 "$@"
  else
    local flags
    read -ra flags <<<"${BP_MPIEXEC_FLAGS:-}"
    timeout -k 5 60 "$BP_MPIEXEC" "${flags[@]}" -n "$w" "$@"
  fi
}

# values FILE TYPE KEY: "step value" of KEY in every record of TYPE (step, eval).
values() {
  grep "\"type\":\"$2\"" "$1" | sed -nE "s/.*\"step\":([0-9]+),.*\"$3\":([^,}]+).*/\1 \2/p"
}

# field FILE TYPE KEY: the value of KEY in the last record of TYPE, as written
# (a number, a "string" without its quotes, or an [array] without its brackets).
field() {
  grep "\"type\":\"$2\"" "$1" | tail -n 1 |
    sed -nE "s/.*\"$3\":(\[([^]]*)\]|\"([^\"]*)\"|([^,}]*)).*/\2\3\4/p"
}

# same NAME FILE_A FILE_B TYPE KEY LIMIT: both logs have records of TYPE for the
# same steps, and KEY differs by at most LIMIT relative at every one.
same() {
  local name=$1 a=$2 b=$3 type=$4 key=$5 limit=$6
  values "$a" "$type" "$key" >"$WORK/va"
  values "$b" "$type" "$key" >"$WORK/vb"
  [ -s "$WORK/va" ] || fail "$name: no $type $key in $a"
  [ "$(wc -l <"$WORK/va")" -eq "$(wc -l <"$WORK/vb")" ] ||
    fail "$name: $(wc -l <"$WORK/va") vs $(wc -l <"$WORK/vb") $type records with $key"
  local worst
  worst=$(paste "$WORK/va" "$WORK/vb" | awk -v limit="$limit" '
    $1 != $3 { print "steps out of order: " $1 " vs " $3; exit 1 }
    $2 !~ /^-?[0-9]/ || $4 !~ /^-?[0-9]/ { print "not a number at step " $1; exit 1 }
    { d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; r = m > 0 ? d / m : d;
      if (r >= worst) { worst = r; at = $1 } }
    END { printf "%.3g at step %d", worst, at; if (worst > limit) exit 1 }') ||
    fail "$name: relative difference of $type $key: $worst (limit $limit)"
  echo "$name: $type $key: largest relative difference $worst"
}
