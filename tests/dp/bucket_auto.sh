#!/usr/bin/env bash
# --bucket-mb auto on 2 ranks: the first steps measure the sizes whose buckets
# differ (for this ~0.93 MB gpt: 0.25, 0.5 and 1 MB; 2, 4 and 10 MB give the one
# bucket of 1 MB and are not measured again), in turn for 6 rounds, then every rank takes
# the size rank 0 found fastest from the times of all ranks. The metrics log has
# one bucket_tune record saying so, the config record says bucket_mb=auto, rank 0
# alone says which size it kept, and the losses are those of a fixed bucket size
# (on 2 ranks, any grouping of the gradients gives the same average). A resume
# takes the size from the checkpoint instead of measuring again.
source "$(dirname "$0")/lib.sh"

MODEL=(--layers 1 --embd 128 --heads 4 --seq-len 16 --batch 8 --data "$TEXT" --eval-every 0
  --progress none --steps 22)
launch 2 "$BP" train "${MODEL[@]}" --bucket-mb auto --out "$WORK/auto" >/dev/null 2>"$WORK/err" ||
  fail "the auto run failed: $(cat "$WORK/err")"
launch 2 "$BP" train "${MODEL[@]}" --bucket-mb 10 --out "$WORK/fixed" >/dev/null ||
  fail "the fixed run failed"
log="$WORK/auto/metrics.jsonl"
[ "$(grep -c '"type":"bucket_tune"' "$log")" -eq 1 ] || fail "not one bucket_tune record: $(cat "$log")"
[ "$(field "$log" bucket_tune step)" = 18 ] || fail "chosen after step $(field "$log" bucket_tune step), not 18"
[ "$(field "$log" bucket_tune size_mb)" = "0.25,0.5,1,2,4,10" ] || fail "sizes $(field "$log" bucket_tune size_mb)"
ms=$(field "$log" bucket_tune step_ms)
chosen=$(field "$log" bucket_tune chosen_mb)
echo "step_ms $ms, chosen $chosen MB"
echo "$ms" | grep -qE '^[0-9.e+-]+,[0-9.e+-]+,[0-9.e+-]+,null,null,null$' ||
  fail "measured sizes: $ms (expected 3 times, then 3 sizes not measured)"
best=$(echo "$ms" | awk -F, '{ b = 1; for (i = 2; i <= 3; i++) if ($i < $b) b = i;
  split("0.25,0.5,1", s, ","); print s[b] }')
[ "$chosen" = "$best" ] || fail "chose $chosen MB, the fastest was $best MB ($ms)"
field "$log" config dp_algo | grep -q 'bucket_mb=auto' || fail "config: $(field "$log" config dp_algo)"
[ "$(grep -c "bucket-mb auto: $chosen MB" "$WORK/err")" -eq 1 ] || fail "stderr: $(cat "$WORK/err")"
same "auto vs fixed" "$log" "$WORK/fixed/metrics.jsonl" step loss 0

# The checkpoint keeps the size; a resume on the same grid uses it without
# measuring again (18 more steps would measure it all over), and so does its own
# checkpoint.
grep -q "\"bucket_mb\":$chosen," "$WORK/auto/ckpt-00000022/manifest.json" ||
  fail "manifest: $(cat "$WORK/auto/ckpt-00000022/manifest.json")"
launch 2 "$BP" train "${MODEL[@]}" --steps 40 --bucket-mb auto --resume "$WORK/auto" \
  --out "$WORK/auto" >/dev/null 2>"$WORK/err" || fail "the resumed auto run failed: $(cat "$WORK/err")"
[ "$(grep -c '"type":"bucket_tune"' "$log")" -eq 1 ] || fail "measured again after the resume"
[ "$(grep -c "bucket-mb auto: $chosen MB, as measured before checkpoint .*ckpt-00000022" "$WORK/err")" -eq 1 ] ||
  fail "resume stderr: $(cat "$WORK/err")"
grep -q "\"bucket_mb\":$chosen," "$WORK/auto/ckpt-00000040/manifest.json" ||
  fail "the resumed run's manifest lost the size"
echo "ok"
