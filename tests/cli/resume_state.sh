#!/usr/bin/env bash
# Resume is exact where the replicas differ or carry state of their own: a run
# resumed from its step-6 checkpoint logs bit-identical losses at steps 7..12 to
# the run that went on (lr > 0), with AvgPipe (--pipelines 1 and 2, on one rank,
# without flushes, on dp 2: every replica's weights and optimizer state, the
# elastic center), easgd, decentralized
# and lp-decentralized (each dp replica's own weights, the center, the ring's
# replicas), powersgd, --cb and --sc-stages (error feedback and warm-started Q),
# diloco with each outer codec and streaming-diloco (each replica's inner optimizer,
# the global weights, the outer momentum, the error feedback, and a fragment in
# flight: with H 8, 2 fragments and tau 3 the fragment synchronized after step 4
# is averaged during steps 5 to 7 and merges after step 7; with H 6 and tau 2 the
# checkpoint holds the pseudo-gradient taken after step 6, not yet averaged; by
# reduce-scatter on 4 ranks, the owners' error feedback too; top-k with the residual
# kept in the weights).
# On another --dp the consensus model resumes, said in one line; pruning removes
# checkpoints with replica files; a damaged or missing replica file, or one of
# another rank or run, ends the resume with one line naming it, exit 1.
source "$(dirname "$0")/lib.sh"

S=(--layers 2 --embd 32 --heads 2 --seq-len 32 --batch 8 --data "$TEXT" --progress none
  --eval-every 0 --log-every 1)

losses() { # metrics file, steps from..to: the loss of each step, as written
  values "$1" step loss | awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b'
}

# check NAME RANKS options...: 12 steps with a checkpoint at 6, and the same resumed
# from that checkpoint: steps 7..12 and the final consensus weights alike.
check() {
  local name=$1 w=$2
  shift 2
  launch "$w" "$BP" train "${S[@]}" "$@" --steps 12 --checkpoint-every 6 --keep-checkpoints 2 \
    --out "$WORK/$name" >/dev/null 2>"$WORK/err" || fail "$name: the run failed: $(cat "$WORK/err")"
  launch "$w" "$BP" train "${S[@]}" "$@" --steps 12 --checkpoint-every 6 \
    --resume "$WORK/$name/ckpt-00000006" --out "$WORK/$name-res" >/dev/null 2>"$WORK/err" ||
    fail "$name: the resume failed: $(cat "$WORK/err")"
  if grep -q "consensus model" "$WORK/err"; then fail "$name: resumed inexactly: $(cat "$WORK/err")"; fi
  [ "$(losses "$WORK/$name-res/metrics.jsonl" 1 12 | wc -l)" -eq 6 ] ||
    fail "$name: the resumed run did not run steps 7..12"
  diff <(losses "$WORK/$name/metrics.jsonl" 7 12) <(losses "$WORK/$name-res/metrics.jsonl" 7 12) ||
    fail "$name: resumed losses differ"
  cmp "$WORK/$name/ckpt-00000012/stage0-tp0.safetensors" \
    "$WORK/$name-res/ckpt-00000012/stage0-tp0.safetensors" || fail "$name: final weights differ"
  echo "$name: steps 7..12 bit-identical after the resume"
}

AVG=(--pp 2 --partition 2,2 --micro-batches 2 --ea-period 2)
check avgpipe-n1 2 "${AVG[@]}" --pipelines 1
check avgpipe-n2 2 "${AVG[@]}" --pipelines 2
check avgpipe-n2-one-rank 1 --pipelines 2 --micro-batches 2 --ea-period 2
check avgpipe-n2-no-flush 2 "${AVG[@]}" --pipelines 2 --ea-period 3 --avgpipe-flush average
check avgpipe-dp2 4 "${AVG[@]}" --pipelines 2 --dp 2
check easgd 2 --dp 2 --dp-algo easgd --ea-period 2
check decentralized 2 --dp 2 --dp-algo decentralized --peers shift_one
check lp-decentralized 2 --dp 2 --dp-algo lp-decentralized
check powersgd 2 --dp 2 --dp-algo powersgd --rank 2 --powersgd-warmup 2
check cb 2 --pp 2 --partition 2,2 --micro-batches 2 --cb --cb-rank 2
DL=(--dp 2 --inner-steps 4)
check diloco 2 "${DL[@]}" --dp-algo diloco
for codec in minmax8 minmax4 topk2 minmax2; do
  check "diloco-$codec" 2 "${DL[@]}" --dp-algo diloco --outer-compress $codec --outer-topk 0.05
done
check streaming-diloco 2 --dp 2 --inner-steps 8 --dp-algo streaming-diloco --outer-delay 3 \
  --outer-mix 0.3
check streaming-diloco-minmax4 2 --dp 2 --inner-steps 6 --dp-algo streaming-diloco \
  --outer-delay 2 --outer-compress minmax4
check streaming-diloco-topk2-keep 2 --dp 2 --inner-steps 8 --dp-algo streaming-diloco \
  --outer-delay 3 --outer-mix 0.3 --outer-compress topk2 --outer-topk 0.05 --outer-residual keep
check diloco-reduce-scatter 4 --dp 4 --inner-steps 4 --dp-algo diloco --outer-compress minmax4 \
  --outer-exchange reduce-scatter
check sc-stages 4 --dp 2 --pp 2 --partition 2,2 --micro-batches 2 --sc-stages 1 --sc-rank 2 \
  --fused-embedding-sync

# Another --dp: the consensus model, and one line saying what was not carried over.
launch 1 "$BP" train "${S[@]}" --dp-algo easgd --ea-period 2 --steps 12 \
  --resume "$WORK/easgd/ckpt-00000006" --out "$WORK/easgd-dp1" >/dev/null 2>"$WORK/err" ||
  fail "the easgd checkpoint of dp 2 did not resume on dp 1: $(cat "$WORK/err")"
[ "$(grep -c "consensus model" "$WORK/err")" -eq 1 ] ||
  fail "no (or more than one) line on the state left behind: $(cat "$WORK/err")"
echo "dp 2 -> 1: $(cat "$WORK/err")"

# Pruning removes checkpoints with replica files like the others.
launch 1 "$BP" train "${S[@]}" --pipelines 2 --micro-batches 2 --steps 3 --checkpoint-every 1 \
  --keep-checkpoints 1 --out "$WORK/prune" >/dev/null || fail "the pruned run failed"
[ "$(find "$WORK/prune" -name 'ckpt-*' | wc -l)" -eq 1 ] ||
  fail "pruning kept $(find "$WORK/prune" -name 'ckpt-*' | wc -l) checkpoints with replica files, not 1"

# A damaged or missing replica file: one line naming it, exit 1, nothing trained.
one=(--pipelines 2 --micro-batches 2 --ea-period 2 --steps 12)
ck="$WORK/avgpipe-n2-one-rank/ckpt-00000006"
cp -r "$ck" "$WORK/bad"
printf '\x01' | dd of="$WORK/bad/stage0-tp0-dp0.replica" bs=1 seek=100 conv=notrunc status=none
expect 1 "stage0-tp0-dp0.replica is damaged \(checksum mismatch\)" -- \
  "$BP" train "${S[@]}" "${one[@]}" --resume "$WORK/bad" --out "$WORK/bad-res"
rm "$WORK/bad/stage0-tp0-dp0.replica"
expect 1 "cannot open .*stage0-tp0-dp0.replica" -- \
  "$BP" train "${S[@]}" "${one[@]}" --resume "$WORK/bad" --out "$WORK/bad-res"
[ ! -e "$WORK/bad-res/ckpt-00000012" ] || fail "a refused resume trained"
echo "damaged and missing replica files refused"

# Files of the wrong rank or run (each intact): dp0 and dp1 swapped, dp1 replaced by
# a copy of dp0, dp1 taken from a run of another --seed. The manifest lists each
# file's owner and checksum, so the resume ends with a line naming the file (before:
# it resumed silently and inexactly).
E=(--dp 2 --dp-algo easgd --ea-period 2 --steps 12)
ck="$WORK/easgd/ckpt-00000006"
launch 2 "$BP" train "${S[@]}" "${E[@]}" --seed 7 --steps 6 --out "$WORK/seed7" >/dev/null ||
  fail "the run of another seed failed"
refused_2() { # PATTERN: resume $WORK/ids on 2 ranks; exit 1 with a line matching it
  local rc=0
  launch 2 "$BP" train "${S[@]}" "${E[@]}" --resume "$WORK/ids" --out "$WORK/ids-res" \
    >/dev/null 2>"$WORK/err" || rc=$?
  [ "$rc" -eq 1 ] || fail "resume from $1: exit $rc: $(cat "$WORK/err")"
  grep -qE "$1" "$WORK/err" || fail "resume said: $(grep '^bagpipe' "$WORK/err")"
  [ ! -e "$WORK/ids-res/ckpt-00000012" ] || fail "a refused resume trained"
  rm -rf "$WORK/ids" "$WORK/ids-res"
}
cp -r "$ck" "$WORK/ids"
mv "$WORK/ids/stage0-tp0-dp0.replica" "$WORK/x" && mv "$WORK/ids/stage0-tp0-dp1.replica" "$WORK/ids/stage0-tp0-dp0.replica"
mv "$WORK/x" "$WORK/ids/stage0-tp0-dp1.replica"
refused_2 "stage0-tp0-dp[01].replica holds what the manifest lists as stage0-tp0-dp[01].replica \(files swapped or copied\)"
cp -r "$ck" "$WORK/ids"
cp "$WORK/ids/stage0-tp0-dp0.replica" "$WORK/ids/stage0-tp0-dp1.replica"
refused_2 "stage0-tp0-dp1.replica holds what the manifest lists as stage0-tp0-dp0.replica"
cp -r "$ck" "$WORK/ids"
cp "$WORK/seed7/ckpt-00000006/stage0-tp0-dp1.replica" "$WORK/ids/"
refused_2 "stage0-tp0-dp1.replica is not the file this checkpoint wrote \(its checksum [0-9a-f]{8} is not the manifest's [0-9a-f]{8}: a file of another run\?\)"
echo "swapped, copied and foreign replica files refused"
echo "ok"
