# Helpers for fault tests: launch under mpiexec, bounded in time.
source "$(dirname "$0")/../cli/lib.sh"

# run_np N LIMIT args...: bagpipe train on N ranks, killed after LIMIT seconds;
# stdout+stderr in $WORK/out, exit code in $rc, seconds taken in $took.
run_np() {
  local n=$1 limit=$2
  shift 2
  local t0=$SECONDS
  rc=0
  # shellcheck disable=SC2086
  timeout -k 5 "$limit" $BP_MPIEXEC $BP_MPIEXEC_FLAGS -n "$n" "$BP" train "$@" >"$WORK/out" 2>&1 || rc=$?
  took=$((SECONDS - t0))
  [ "$took" -lt "$limit" ] || fail "hung: '$*' on $n ranks did not end in ${limit}s"
}

losses() { # metrics file: "step loss" per line
  grep '"type":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'
}
