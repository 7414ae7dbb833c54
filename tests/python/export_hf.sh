#!/usr/bin/env bash
# `bagpipe export --format hf DIR` writes a gpt checkpoint that transformers'
# GPT2LMHeadModel.from_pretrained(DIR) loads, and greedy generation there gives the
# bytes `bagpipe sample --top-k 1` gives. transformers comes from PyPI into this
# test's own virtual environment ($BP_HF_VENV, under the build folder, made with
# --system-site-packages for Debian's torch); where it cannot be installed the
# test is skipped with the reason. Bad input: an mlp checkpoint, no DIR.
source "$(dirname "$0")/../cli/lib.sh"
here=$(dirname "$0")
source "$here/hf_venv.sh"

TINY=(--layers 2 --embd 32 --heads 2 --seq-len 32 --batch 4 --eval-batches 2 --progress none)
"$BP" train "${TINY[@]}" --data "$TEXT" --steps 300 --lr 3e-3 --out "$WORK/m" >/dev/null
prompt="GNU General"
n=$((32 - ${#prompt})) # the whole context: transformers has no positions past it
"$BP" sample --ckpt "$WORK/m" --prompt "$prompt" --length "$n" --top-k 1 >"$WORK/ours"
"$BP" export --format hf --ckpt "$WORK/m" "$WORK/hf"
[ -f "$WORK/hf/config.json" ] && [ -f "$WORK/hf/model.safetensors" ] || fail "files missing"
OMP_NUM_THREADS=1 "$venv/bin/python" "$here/export_hf.py" "$WORK/hf" "$prompt" "$n" \
  >"$WORK/theirs" 2>"$WORK/hf.log" || fail "transformers failed: $(tail -3 "$WORK/hf.log")"
cmp -s "$WORK/ours" "$WORK/theirs" ||
  fail "greedy bytes differ: bagpipe '$(cat "$WORK/ours")' transformers '$(cat "$WORK/theirs")'"
echo "ok: transformers generates '$(tr -d '\n' <"$WORK/theirs")' as bagpipe does"

"$BP" train --model mlp --steps 2 --hidden 8 --out "$WORK/mlp" --progress none --eval-every 0 >/dev/null
expect 2 "holds an mlp; --format hf exports a gpt" -- "$BP" export --format hf --ckpt "$WORK/mlp" "$WORK/x"
[ ! -e "$WORK/x" ] || fail "a refused export left $WORK/x"
expect 2 "export: give the output directory: bagpipe export --format hf DIR" -- \
  "$BP" export --format hf --ckpt "$WORK/m"
expect 2 "option --format: 'onnx' is not one of hf" -- "$BP" export --format onnx "$WORK/y"
echo "ok"
