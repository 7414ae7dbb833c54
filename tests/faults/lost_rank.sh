#!/usr/bin/env bash
# A rank that dies (kill -9) or hangs ends the whole job in bounded time with a
# line naming the lost rank; the last complete checkpoint verifies and resumes.
source "$(dirname "$0")/lib.sh"

for n in 2 4; do
  lost=$((n - 1))
  # Killed: Open MPI and MPICH end every rank when one dies and say so; Open MPI's
  # line names the rank, MPICH's (Hydra) its process id.
  run_np "$n" 60 "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 50 --checkpoint-every 4 \
    --out "$WORK/kill$n" --fault-kill-rank "$lost" --fault-at-step 10
  [ "$rc" -ne 0 ] || fail "job with a killed rank exited 0"
  if $BP_MPIEXEC --version 2>&1 | grep -q HYDRA; then
    grep -q "BAD TERMINATION" "$WORK/out" && grep -q "Killed (signal 9)" "$WORK/out" ||
      fail "no line tells that a process was killed: $(cat "$WORK/out")"
  else
    grep -qE "rank $lost .*(signal 9|Killed|KILLED)" "$WORK/out" || fail "no line names lost rank $lost: $(cat "$WORK/out")"
  fi
  [ "$(cat "$WORK/kill$n/latest")" = "ckpt-00000008" ] || fail "latest is $(cat "$WORK/kill$n/latest")"
  run_np "$n" 60 "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 12 --resume "$WORK/kill$n" --out "$WORK/kill$n"
  [ "$rc" -eq 0 ] || fail "resume after a lost rank failed: $(cat "$WORK/out")"

  # Hung: the others' watchdog ends the job, naming the rank they wait for.
  run_np "$n" 60 "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 50 --checkpoint-every 4 \
    --out "$WORK/hang$n" --fault-hang-rank "$lost" --fault-at-step 10 --comm-timeout 2
  [ "$rc" -ne 0 ] || fail "job with a hung rank exited 0"
  [ "$took" -lt 30 ] || fail "hung rank noticed only after ${took}s"
  grep -qE "bagpipe: watchdog: .* has not finished after 2.0 s waiting for world rank [0-9]+; aborting the job" "$WORK/out" \
    || fail "no watchdog line: $(cat "$WORK/out")"
  if [ "$n" -eq 2 ]; then # with two ranks the waiting one waits for the lost one itself
    grep -q "waiting for world rank $lost;" "$WORK/out" || fail "watchdog does not name rank $lost"
  fi
  run_np "$n" 60 "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 12 --resume "$WORK/hang$n" --out "$WORK/hang$n"
  [ "$rc" -eq 0 ] || fail "resume after a hung rank failed: $(cat "$WORK/out")"
done
no_partial_files "$WORK"
echo "ok"
