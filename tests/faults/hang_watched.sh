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
echo "ok"
