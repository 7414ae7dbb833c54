#!/usr/bin/env bash
# The progress display of a job under mpirun: plain lines, no carriage-return
# frames, when the output goes to a file (Open MPI gives each rank a pseudo-terminal
# all the same), and the live bar when scripts/mpirun.sh runs on a terminal (MPICH
# gives each rank a pipe all the same). Both launchers are the one ctest gives
# (tests/lib.sh points scripts/mpirun.sh at it).
source "$(dirname "$0")/lib.sh"
MPIRUN="$(dirname "$0")/../../scripts/mpirun.sh"
ARGS=(train --layers 1 --embd 16 --heads 2 --seq-len 16 --batch 4 --eval-batches 2
  --data "$TEXT" --dp 2 --steps 6 --log-every 2 --eval-every 3 --overwrite)

no_cr() { # log what: the log has the last step's line and no carriage return
  grep -q "step 6/6" "$1" || fail "$2: no progress line in the log: $(cat "$1")"
  if grep -q $'\r' "$1"; then fail "$2: carriage returns in the log"; fi
}

timeout -k 5 60 "$MPIRUN" -np 2 "$BP" "${ARGS[@]}" --out "$WORK/a" >"$WORK/script.log" 2>&1 \
  || fail "scripts/mpirun.sh: $(cat "$WORK/script.log")"
no_cr "$WORK/script.log" "scripts/mpirun.sh > log"
read -ra flags <<<"${BP_MPIEXEC_FLAGS:-}"
timeout -k 5 60 "${BP_MPIEXEC:?set by ctest}" "${flags[@]}" -n 2 "$BP" "${ARGS[@]}" --out "$WORK/b" \
  >"$WORK/mpirun.log" 2>&1 || fail "mpirun: $(cat "$WORK/mpirun.log")"
no_cr "$WORK/mpirun.log" "mpirun > log"
# On a terminal (script(1) gives one) the bar is drawn in place.
timeout -k 5 60 script -qec "$(printf '%q ' "$MPIRUN" -np 2 "$BP" "${ARGS[@]}" --out "$WORK/c")" \
  /dev/null >"$WORK/tty.log" 2>&1 || fail "on a terminal: $(cat "$WORK/tty.log")"
grep -q $'\r\\[#' "$WORK/tty.log" || fail "on a terminal: no progress bar: $(cat "$WORK/tty.log")"
echo OK
