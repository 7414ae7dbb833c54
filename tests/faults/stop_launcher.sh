#!/usr/bin/env bash
# SIGTERM or SIGINT sent to the launcher, not to a rank (and SIGHUP to
# scripts/mpirun.sh, as a closed terminal sends, and SIGQUIT, as Ctrl-\ sends): every rank stops after the same
# step with a checkpoint of it, no rank is left running and the --out lock is
# free. Through scripts/mpirun.sh the job exits 3 as documented; Open MPI's mpirun called directly exits 1 whatever the ranks return
# (docs/manual/errors.md's table says so), MPICH's mpiexec 3 or 0: Hydra 4.0, signalled
# itself, now and then exits 0 although every rank exited 3 (seen in about 1 run of
# 8 with ranks that are plain shells trapping SIGTERM with "exit 3", so it is the
# launcher's, not ours). Everything else (the stop line, the checkpoint, no rank
# left, the lock) is checked as for Open MPI.
source "$(dirname "$0")/lib.sh"
set -m # background jobs get their own process group and do not ignore SIGINT

opts=("${TINY[@]}" --data "$TEXT" --eval-every 0 --log-every 1 --steps 100000000)
read -ra flags <<<"${BP_MPIEXEC_FLAGS:-}"
openmpi=0
if "$BP_MPIEXEC" --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then openmpi=1; fi

# stop NAME SIGNAL EXPECTED_RC launcher...: start the launcher, send SIGNAL to it
# once training runs, check the exit code (EXPECTED_RC: one code, or codes joined
# by |), the stop line and the checkpoint.
stop() {
  local name=$1 sig=$2 want=$3
  shift 3
  local out="$WORK/$name"
  timeout -k 5 60 "$@" -n 2 "$BP" train "${opts[@]}" --out "$out" >"$WORK/out" 2>&1 &
  local job=$!
  for _ in $(seq 100); do [ -s "$out/metrics.jsonl" ] && break; sleep 0.1; done
  sleep 1
  local launcher
  launcher=$(pgrep -P "$job" | head -n 1 || true)
  [ -n "$launcher" ] || fail "$name: no launcher process"
  kill -"$sig" "$launcher"
  local rc=0
  wait "$job" || rc=$?
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "$name: hung after SIG$sig: $(cat "$WORK/out")"
  # Ranks that outlive the launcher are orphans: killed here, and a failure.
  local left=""
  for _ in $(seq 50); do
    left=$(pgrep -f -- "--out $out" || true)
    [ -z "$left" ] && break
    sleep 0.2
  done
  if [ -n "$left" ]; then
    kill -KILL $left 2>/dev/null || true
    fail "$name: ranks still running 10 s after SIG$sig to the launcher (exit $rc)"
  fi
  flock -n "$out" true || fail "$name: the --out lock is still held after SIG$sig"
  [[ $rc =~ ^($want)$ ]] || fail "$name: exit code $rc after SIG$sig, expected $want: $(cat "$WORK/out")"
  grep -q "stopped by a signal after step" "$WORK/out" || fail "$name: no stop message: $(cat "$WORK/out")"
  local step
  step=$(sed -E 's/ckpt-0*//' "$out/latest")
  [ "$(losses "$out/metrics.jsonl" | tail -n 1 | cut -d' ' -f1)" = "$step" ] ||
    fail "$name: checkpoint is not at the last step"
  echo "$name: SIG$sig -> exit $rc, checkpoint at step $step"
}

for sig in TERM INT; do
  MPIEXEC="$BP_MPIEXEC" stop "script-$sig" "$sig" 3 "$BP_SOURCE_DIR/scripts/mpirun.sh"
  stop "direct-$sig" "$sig" "$([ "$openmpi" -eq 1 ] && echo 1 || echo '3|0')" "$BP_MPIEXEC" "${flags[@]}"
done
MPIEXEC="$BP_MPIEXEC" stop script-HUP HUP 3 "$BP_SOURCE_DIR/scripts/mpirun.sh"
# SIGQUIT (Ctrl-\) to the script: as SIGTERM (before: the job went on).
MPIEXEC="$BP_MPIEXEC" stop script-QUIT QUIT 3 "$BP_SOURCE_DIR/scripts/mpirun.sh"
echo "ok"
