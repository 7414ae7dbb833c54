#!/usr/bin/env bash
# A link cut in the middle of a run (`ip link set ... down` on host 1's switch
# port: no reset, no error, the peer just goes silent) ends the job in bounded time:
# the --comm-timeout watchdog of the rank on host 0 names world rank 1 as the one it
# waits for and aborts; mpirun gives up on the daemon behind the cut link within
# seconds (cluster.sh's TCP and keepalive settings). The last checkpoint then
# resumes on the loopback with nothing lost: every step after it logs the loss of
# an uninterrupted loopback run, bit for bit.
source "$(dirname "$0")/lib.sh"
cluster_up 2

opts=("${TINY_GPT[@]}" --dp 2 --checkpoint-every 20)
on_cluster 2 -- "$BP" train "${opts[@]}" --steps 100000 --comm-timeout 2 --out "$WORK/cut" >"$WORK/out" 2>&1 &
job=$!
for ((i = 0; i < 300; i++)); do
  [ ! -e "$WORK/cut/latest" ] || break
  kill -0 $job 2>/dev/null || fail "the run ended before its first checkpoint: $(cat "$WORK/out")"
  sleep 0.1
done
[ -e "$WORK/cut/latest" ] || fail "no checkpoint after 30 s: $(cat "$WORK/out")"
sleep 0.3
"$CLUSTER" link 1 down
t0=$SECONDS
rc=0
wait $job || rc=$?
took=$((SECONDS - t0))
[ "$rc" -ne 0 ] || fail "the job survived the cut"
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "the job did not end after the cut (killed after 60 s)"
[ "$took" -le 30 ] || fail "the job ended ${took}s after the cut (limit 30 s)"
grep -qE "^bagpipe: watchdog: .* has not finished after 2.0 s waiting for world rank 1; aborting the job" "$WORK/out" ||
  fail "no line names unreachable rank 1: $(cat "$WORK/out")"
echo "cut: the job ended ${took}s after the cut (exit $rc): $(grep '^bagpipe: watchdog' "$WORK/out")"

ck=$(cat "$WORK/cut/latest")
at=$((10#${ck#ckpt-}))
[ "$at" -ge 20 ] || fail "latest checkpoint is $ck"
end=$((at + 20))
launch 2 "$BP" train "${opts[@]}" --steps $end --resume "$WORK/cut" --out "$WORK/resumed" \
  --metrics "$WORK/resumed.jsonl" >/dev/null || fail "resuming $ck on the loopback failed"
launch 2 "$BP" train "${opts[@]}" --steps $end --out "$WORK/ref" >/dev/null || fail "the reference run failed"
# Steps up to the checkpoint: the cut run's own log; after it: the resumed run's.
awk -v at="$at" '/"type":"step"/ { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0; if (s <= at && !seen[s]++) print }' \
  "$WORK/cut/metrics.jsonl" >"$WORK/joined.jsonl"
grep '"type":"step"' "$WORK/resumed.jsonl" >>"$WORK/joined.jsonl"
identical "cut at $ck, resumed on loopback, vs uninterrupted" "$WORK/ref/metrics.jsonl" "$WORK/joined.jsonl"
echo "ok"
