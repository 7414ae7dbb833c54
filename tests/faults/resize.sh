#!/usr/bin/env bash
# A checkpoint written by 2 data-parallel ranks resumes on 1 and on 4: the global
# batch and its data stream are the same, so with allreduce the losses go on as if
# nothing changed (to float rounding); with decentralized (replicas averaged when
# saved) the loss goes on without a jump.
source "$(dirname "$0")/lib.sh"

opts=("${TINY[@]}" --data "$TEXT" --eval-every 0 --log-every 1 --progress lines)
run_np 2 60 "${opts[@]}" --steps 20 --checkpoint-every 10 --keep-checkpoints 5 --out "$WORK/dp2"
[ "$rc" -eq 0 ] || fail "dp 2 run failed: $(cat "$WORK/out")"
for n in 1 4; do
  run_np "$n" 60 "${opts[@]}" --steps 20 --resume "$WORK/dp2/ckpt-00000010" --out "$WORK/dp$n"
  [ "$rc" -eq 0 ] || fail "resume on $n ranks failed: $(cat "$WORK/out")"
  grep -q "written by 2 identical replicas" "$WORK/out" || fail "no resume note"
  paste <(losses "$WORK/dp2/metrics.jsonl" | tail -n 10) <(losses "$WORK/dp$n/metrics.jsonl") |
    awk '{ d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-4 * $2) { print; exit 1 } }' \
    || fail "losses on $n ranks differ from the 2-rank run"
done

run_np 2 60 "${opts[@]}" --dp-algo decentralized --steps 20 --checkpoint-every 10 --keep-checkpoints 5 --out "$WORK/dec"
run_np 1 60 "${opts[@]}" --steps 12 --resume "$WORK/dec/ckpt-00000010" --out "$WORK/dec1"
grep -q "written by 2 averaged replicas" "$WORK/out" || fail "decentralized replicas were not averaged"
before=$(losses "$WORK/dec/metrics.jsonl" | awk '$1 == 10 { print $2 }')
after=$(losses "$WORK/dec1/metrics.jsonl" | awk '$1 == 11 { print $2 }')
awk -v a="$before" -v b="$after" 'BEGIN { exit !(b < a * 1.1) }' || fail "loss jumped from $before to $after"
echo "ok"
