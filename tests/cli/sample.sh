#!/usr/bin/env bash
# `bagpipe sample` continues a prompt from a trained checkpoint: the prompt comes
# back first, the requested number of bytes follows, and a seed fixes the output.
source "$(dirname "$0")/lib.sh"

"$BP" train "${TINY[@]}" --data "$TEXT" --steps 20 --out "$WORK/m" >/dev/null
"$BP" sample --ckpt "$WORK/m" --prompt "GNU General" --length 100 --seed 3 >"$WORK/a"
"$BP" sample --ckpt "$WORK/m/ckpt-00000020" --prompt "GNU General" --length 100 --seed 3 >"$WORK/b"
"$BP" sample --ckpt "$WORK/m" --prompt "GNU General" --length 100 --seed 4 --top-k 0 >"$WORK/c"
head -c 11 "$WORK/a" | grep -qx "GNU General" || fail "prompt not echoed"
[ "$(wc -c <"$WORK/a")" -eq 112 ] || fail "expected prompt + 100 bytes + newline, got $(wc -c <"$WORK/a")"
cmp -s "$WORK/a" "$WORK/b" || fail "same seed, different text"
! cmp -s "$WORK/a" "$WORK/c" || fail "different seeds gave the same text"
"$BP" train --model mlp --steps 2 --hidden 8 --out "$WORK/mlp" --progress none --eval-every 0 >/dev/null
expect 2 "holds an mlp; sampling needs a model that reads tokens \(gpt\)" -- "$BP" sample --ckpt "$WORK/mlp"
# '' is no checkpoint (before: /manifest.json, at the root, was read).
expect 2 "checkpoint : an empty path; give a checkpoint directory" -- "$BP" sample --ckpt ''
expect 2 "checkpoint : an empty path; give a checkpoint directory" -- "$BP" export --format hf --ckpt '' "$WORK/hf"
echo "ok"
