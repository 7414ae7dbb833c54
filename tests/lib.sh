# shellcheck shell=bash disable=SC2034
# What every script test shares, sourced by the helpers of each area (tests/*/lib.sh):
# strict mode, the binary (BAGPIPE_BIN, set by ctest), a scratch folder named after
# the area and removed at exit, one BLAS thread, a text every Debian system has, and
# the helpers that run bagpipe (in one process or under $BP_MPIEXEC with
# $BP_MPIEXEC_FLAGS, both set by ctest) and read its metrics log.
set -euo pipefail
: "${BAGPIPE_BIN:?set by ctest}"
BP="$BAGPIPE_BIN"
WORK=$(mktemp -d "/tmp/bp_$(basename "$(dirname "$0")").XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export OPENBLAS_NUM_THREADS=1
# scripts/mpirun.sh launches with $MPIEXEC (plain mpirun without it): the launcher
# ctest gives, of the MPI the binary was built with. Plain mpirun may be another
# MPI's, whose ranks would each start as a job of one.
if [ -n "${BP_MPIEXEC:-}" ]; then export MPIEXEC="$BP_MPIEXEC"; fi
TEXT=/usr/share/common-licenses/GPL-3

fail() { echo "FAIL: $*" >&2; exit 1; }

# launch W command...: the command in one process (W = 1, no mpiexec) or on W ranks,
# bounded in time so that a hang fails the test with a message: LAUNCH_TIMEOUT
# seconds (60 unless the caller sets it for a command that is long by design).
launch() {
  local w=$1 limit=${LAUNCH_TIMEOUT:-60}
  shift
  if [ "$w" -eq 1 ]; then
    timeout -k 5 "$limit" "$@"
  else
    local flags
    read -ra flags <<<"${BP_MPIEXEC_FLAGS:-}"
    timeout -k 5 "$limit" "${BP_MPIEXEC:?set by ctest}" "${flags[@]}" -n "$w" "$@"
  fi
}

# refused W PATTERN -- train options...: `bagpipe train` on W ranks exits with 2
# (usage error), printing exactly one line of its own, which matches the extended
# regular expression PATTERN; it neither aborts the job (MPI_Abort is for runtime
# failures), nor prints on stdout, nor starts training. Only lines starting
# "bagpipe:" are counted: mpirun adds its own banner about the non-zero exit code.
refused() {
  local w=$1 pattern=$2
  shift 3
  local rc=0
  launch "$w" "$BP" train "$@" --out "$WORK/refused" >"$WORK/stdout" 2>"$WORK/stderr" || rc=$?
  local what="'$*' on $w ranks"
  [ "$rc" -eq 2 ] || fail "$what exited $rc, expected 2; stderr: $(cat "$WORK/stderr")"
  local lines
  lines=$(grep -c '^bagpipe:' "$WORK/stderr" || true)
  [ "$lines" -eq 1 ] || fail "$what printed $lines bagpipe lines, expected 1: $(cat "$WORK/stderr")"
  grep -qE -- "$pattern" "$WORK/stderr" ||
    fail "$what said '$(grep '^bagpipe:' "$WORK/stderr")', expected /$pattern/"
  if grep -q 'MPI_ABORT' "$WORK/stderr"; then fail "$what aborted the job: $(cat "$WORK/stderr")"; fi
  [ ! -s "$WORK/stdout" ] || fail "$what printed on stdout: $(cat "$WORK/stdout")"
  [ ! -e "$WORK/refused/metrics.jsonl" ] || fail "$what started training"
  echo "$what: $(grep '^bagpipe:' "$WORK/stderr")"
  rm -rf "$WORK/refused"
}

# term_rank OUT [SECONDS]: once the training run writing to OUT has logged a step,
# and SECONDS more (default 1) have passed, SIGTERM one of its rank processes.
term_rank() {
  local out=$1 victim
  for _ in $(seq 100); do [ -s "$out/metrics.jsonl" ] && break; sleep 0.1; done
  sleep "${2:-1}"
  victim=$(pgrep -f "$BP train .*--out $out" | tail -n 1)
  [ -n "$victim" ] || fail "no rank process found"
  kill -TERM "$victim"
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
