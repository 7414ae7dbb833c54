#!/usr/bin/env bash
# Every communication is watched: with the weight algorithms that communicate only
# every few steps, the first thing a rank waits for after its peer hangs is the
# per-step agreement on the side communicator, which the watchdog must time out too.
source "$(dirname "$0")/lib.sh"

for algo in "easgd --ea-period 8" "decentralized --interval 8"; do
  read -ra a <<<"$algo"
  run_np 2 60 "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 50 --dp-algo "${a[@]}" \
    --out "$WORK/hang" --fault-hang-rank 1 --fault-at-step 10 --comm-timeout 2
  [ "$rc" -ne 0 ] || fail "$algo: job with a hung rank exited 0"
  [ "$took" -lt 30 ] || fail "$algo: hung rank noticed only after ${took}s"
  grep -qE "bagpipe: watchdog: rank 0 of group '[a-z]+' .* has not finished after 2.0 s waiting for world rank 1; aborting the job" "$WORK/out" ||
    fail "$algo: no watchdog line naming rank 1: $(cat "$WORK/out")"
  echo "$algo: $(grep 'watchdog' "$WORK/out")"
done

# Under pp and tp the ranks wait for each other in chains: the ranks whose waits
# time out together all say whom they wait for, so the hung rank is among those named.
for hung in 0 1 2 3; do
  run_np 4 60 "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 50 --pp 2 --tp 2 --batch 8 \
    --out "$WORK/hang3d" --fault-hang-rank "$hung" --fault-at-step 5 --comm-timeout 2
  [ "$rc" -ne 0 ] || fail "pp x tp: job with hung rank $hung exited 0"
  grep -q "waiting for world rank $hung;" "$WORK/out" ||
    fail "pp x tp: no watchdog line names hung rank $hung: $(grep watchdog "$WORK/out")"
  echo "pp x tp, rank $hung hung: $(grep -c 'bagpipe: watchdog' "$WORK/out") watchdog lines"
done
# Four stages, the first hung: the chain is stage 3 -> 2 -> 1 -> 0.
run_np 4 60 "${TINY[@]}" --layers 2 --data "$TEXT" --eval-every 0 --steps 50 --pp 4 --batch 8 \
  --out "$WORK/hang4" --fault-hang-rank 0 --fault-at-step 5 --comm-timeout 2
grep -q "waiting for world rank 0;" "$WORK/out" ||
  fail "pp 4: no watchdog line names hung rank 0: $(grep watchdog "$WORK/out")"
echo "ok"
