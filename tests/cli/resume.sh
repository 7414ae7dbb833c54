#!/usr/bin/env bash
# A run interrupted at step k and resumed gives bit-identical losses to a run that
# was never interrupted, for gpt (AdamW, cosine schedule) and mlp (SGD momentum).
source "$(dirname "$0")/lib.sh"

losses() { # metrics file, steps from..to: the loss of each step, as written
  grep '"type":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/' |
    awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b'
}

LAUNCH=() # prefix of the bagpipe command, e.g. mpiexec -n 2
check() { # name, options...
  local name=$1
  shift
  "${LAUNCH[@]}" "$BP" train "$@" --steps 12 --checkpoint-every 5 --keep-checkpoints 5 --out "$WORK/$name-full" >/dev/null
  # The interrupted run: it stops at step 5 (as if killed after its checkpoint) ...
  "${LAUNCH[@]}" "$BP" train "$@" --steps 12 --checkpoint-every 5 --keep-checkpoints 5 --out "$WORK/$name-cut" >/dev/null
  rm -rf "$WORK/$name-cut/ckpt-00000010" "$WORK/$name-cut/ckpt-00000012"
  echo "ckpt-00000005" >"$WORK/$name-cut/latest"
  # ... and is resumed from its output directory.
  "${LAUNCH[@]}" "$BP" train "$@" --steps 12 --checkpoint-every 5 --resume "$WORK/$name-cut" --out "$WORK/$name-res" >/dev/null
  diff <(losses "$WORK/$name-full/metrics.jsonl" 6 12) <(losses "$WORK/$name-res/metrics.jsonl" 6 12) \
    || fail "$name: resumed losses differ"
  [ "$(losses "$WORK/$name-res/metrics.jsonl" 1 12 | wc -l)" -eq 7 ] || fail "$name: resumed run did not run steps 6..12"
  cmp "$WORK/$name-full/ckpt-00000012/stage0-tp0.safetensors" "$WORK/$name-res/ckpt-00000012/stage0-tp0.safetensors" \
    || fail "$name: final weights differ"
}

check gpt "${TINY[@]}" --data "$TEXT" --lr-schedule cosine --warmup 3 --eval-every 0
check mlp --model mlp --hidden 32 --batch 32 --progress none --eval-every 0
# Data-parallel on 2 ranks: every rank's state is the same, so resuming is exact too.
read -ra LAUNCH <<<"$BP_MPIEXEC $BP_MPIEXEC_FLAGS -n 2"
check gpt-dp2 "${TINY[@]}" --data "$TEXT" --eval-every 0 --dp 2 --dp-algo allreduce

# A finished run has nothing to do: resuming it at its own --steps says so, and
# neither the metrics log nor `latest` change.
cp "$WORK/gpt-full/metrics.jsonl" "$WORK/metrics.before"
expect 2 "checkpoint .*ckpt-00000012 is at step 12: nothing to do with --steps 12" -- \
  "$BP" train "${TINY[@]}" --data "$TEXT" --eval-every 0 --steps 12 --resume "$WORK/gpt-full" --out "$WORK/gpt-full"
cmp "$WORK/gpt-full/metrics.jsonl" "$WORK/metrics.before" || fail "resuming a finished run changed its metrics log"
[ "$(cat "$WORK/gpt-full/latest")" = "ckpt-00000012" ] || fail "latest moved"
echo "ok"
