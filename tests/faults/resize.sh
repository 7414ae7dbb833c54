#!/usr/bin/env bash
# A checkpoint written by 2 data-parallel ranks resumes on 1 and on 4: the global
# batch and its data stream are the same, so with allreduce the losses go on as if
# nothing changed (to float rounding); with decentralized (replicas averaged when
# saved) the loss goes on without a jump, and the validation loss of the replicas,
# which differ, is the loss of their average: of the checkpoint.
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

run_np 2 60 "${opts[@]}" --dp-algo decentralized --interval 4 --steps 20 --checkpoint-every 10 --keep-checkpoints 5 \
  --eval-every 10 --out "$WORK/dec"
run_np 1 60 "${opts[@]}" --steps 12 --resume "$WORK/dec/ckpt-00000010" --out "$WORK/dec1"
grep -q "written by 2 averaged replicas" "$WORK/out" || fail "decentralized replicas were not averaged"
before=$(losses "$WORK/dec/metrics.jsonl" | awk '$1 == 10 { print $2 }')
after=$(losses "$WORK/dec1/metrics.jsonl" | awk '$1 == 11 { print $2 }')
awk -v a="$before" -v b="$after" 'BEGIN { exit !(b < a * 1.1) }' || fail "loss jumped from $before to $after"

# Replicas that differ are evaluated as their average, the model the checkpoint holds:
# the 2-rank run's validation loss at step 10 is what one process measures for the
# checkpoint (after one step at learning rate 0, which leaves the weights as they are).
val_at() { grep '"type":"eval"' "$1" | sed -E 's/.*"step":([0-9]+),.*"val_loss":([^,}]+).*/\1 \2/' | awk -v s="$2" '$1 == s { print $2 }'; }
run_np 1 60 "${opts[@]}" --steps 11 --lr 0 --eval-every 11 --resume "$WORK/dec/ckpt-00000010" --out "$WORK/dec0"
[ "$rc" -eq 0 ] || fail "evaluating the checkpoint failed: $(cat "$WORK/out")"
v2=$(val_at "$WORK/dec/metrics.jsonl" 10)
v1=$(val_at "$WORK/dec0/metrics.jsonl" 11)
awk -v a="$v2" -v b="$v1" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5 * a) }' ||
  fail "validation loss of the 2 replicas '$v2' is not the checkpoint's '$v1'"
echo "ok: validation loss $v2 (2 replicas) vs $v1 (checkpoint)"
