#!/usr/bin/env bash
# Tensor parallelism (Megatron-style gpt shards) gives the losses of one process, on its
# own and combined with pipeline and data parallelism; its checkpoints hold one shard per
# (stage, tp rank) that reassemble into the whole model; bad --tp values are refused.
source "$(dirname "$0")/../pipe/lib.sh"

GPT=("${SMALL_GPT[@]}" --heads 4 --steps 30 --eval-every 30 --clip 0.5)
launch 1 "$BP" train "${GPT[@]}" --out "$WORK/one" >/dev/null || fail "one process failed"

check() { # name ranks options...
  local name=$1 w=$2
  shift 2
  launch "$w" "$BP" train "${GPT[@]}" "$@" --out "$WORK/$name" >"$WORK/$name.log" 2>&1 ||
    fail "$name: $(cat "$WORK/$name.log")"
  same "$name" "$WORK/one/metrics.jsonl" "$WORK/$name/metrics.jsonl" step loss 1e-4
  same "$name" "$WORK/one/metrics.jsonl" "$WORK/$name/metrics.jsonl" step grad_norm 1e-4
  same "$name" "$WORK/one/metrics.jsonl" "$WORK/$name/metrics.jsonl" eval val_loss 1e-4
}

check tp2 2 --tp 2
check tp4 4 --tp 4
check pp2xtp2 4 --pp 2 --tp 2 --micro-batches 2
check dp2xtp2 4 --dp 2 --tp 2

# The tp axis carried the traffic of the split products.
grep '"type":"step"' "$WORK/tp2/metrics.jsonl" | tail -n 1 | grep -qE '"tp":[1-9]' ||
  fail "no bytes counted on the tp axis"

# One shard per (stage, tp rank); together they are the whole model.
ls "$WORK/pp2xtp2/ckpt-00000030" | grep -c 'stage[01]-tp[01].safetensors' | grep -qx 4 ||
  fail "pp 2 x tp 2 checkpoint lacks shards: $(ls "$WORK/pp2xtp2/ckpt-00000030")"
"$BP" sample --ckpt "$WORK/one" --length 60 --seed 5 >"$WORK/a"
"$BP" sample --ckpt "$WORK/pp2xtp2" --length 60 --seed 5 >"$WORK/b"
cmp -s "$WORK/a" "$WORK/b" || fail "the reassembled pp 2 x tp 2 model samples differently"

# Resume on the same grid continues; another --tp is refused with one line.
launch 2 "$BP" train "${GPT[@]}" --tp 2 --steps 32 --resume "$WORK/tp2" --out "$WORK/tp2r" \
  >/dev/null 2>&1 || fail "resume on tp 2 failed"
rc=0
launch 4 "$BP" train "${GPT[@]}" --tp 4 --steps 32 --resume "$WORK/tp2" --out "$WORK/bad" \
  >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 2 ] || fail "resuming tp 2 on tp 4 exited $rc"
grep -c '^bagpipe:' "$WORK/err" | grep -qx 1 || fail "expected one error line: $(cat "$WORK/err")"
grep -q "written with --tp 2 but this run has --tp 4" "$WORK/err" || fail "$(cat "$WORK/err")"

for bad in "--tp 3" "--model mlp --tp 2"; do
  rc=0
  # shellcheck disable=SC2086
  launch 1 "$BP" train "${GPT[@]}" $bad --out "$WORK/bad" >/dev/null 2>"$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "'$bad' exited $rc"
  grep -q "option --tp" "$WORK/err" || fail "'$bad': $(cat "$WORK/err")"
done
echo "ok"
