#!/usr/bin/env bash
# `bagpipe import --format hf DIR --out RUN` is the inverse of export: a folder that
# export wrote comes back as a checkpoint whose export is the same bytes, which
# `train --resume` continues, and which samples what the model it came from does;
# a folder that transformers itself saved (save_pretrained) is imported to the
# same weights, bit for bit, generates greedily what transformers generates, and
# computes its logits (sample --logits) within float32's rounding of transformers'. transformers comes from
# PyPI into this test's own venv ($BP_HF_VENV, shared with export_hf.sh). Bad input:
# another vocabulary, a missing tensor, a run that exists, no --out.
source "$(dirname "$0")/../cli/lib.sh"
here=$(dirname "$0")
source "$here/hf_venv.sh"

SMALL=(--layers 2 --embd 32 --heads 2 --seq-len 32 --batch 4 --eval-batches 2 --progress none)
"$BP" train "${SMALL[@]}" --data "$TEXT" --steps 300 --lr 3e-3 --out "$WORK/m" >/dev/null
"$BP" export --format hf --ckpt "$WORK/m" "$WORK/hf"
"$BP" import --format hf "$WORK/hf" --out "$WORK/run" || fail "import failed"
[ "$(cat "$WORK/run/latest")" = ckpt-00000000 ] || fail "no step-0 checkpoint: $(ls "$WORK/run")"
"$BP" export --format hf --ckpt "$WORK/run" "$WORK/hf2"
cmp -s "$WORK/hf/model.safetensors" "$WORK/hf2/model.safetensors" || fail "round trip: weights differ"
cmp -s "$WORK/hf/config.json" "$WORK/hf2/config.json" || fail "round trip: config.json differs"
echo "ok: export, import, export: the same bytes"

prompt="GNU General"
"$BP" sample --ckpt "$WORK/m" --prompt "$prompt" --length 20 --top-k 1 >"$WORK/a"
"$BP" sample --ckpt "$WORK/run" --prompt "$prompt" --length 20 --top-k 1 >"$WORK/b"
cmp -s "$WORK/a" "$WORK/b" || fail "imported model samples '$(cat "$WORK/b")', not '$(cat "$WORK/a")'"
"$BP" train "${SMALL[@]}" --data "$TEXT" --steps 5 --resume "$WORK/run" --out "$WORK/run" \
  >"$WORK/resume.log" 2>&1 || fail "train --resume from the import: $(tail -2 "$WORK/resume.log")"
[ "$(cat "$WORK/run/latest")" = ckpt-00000005 ] || fail "the resumed run saved no step 5"
echo "ok: sampled as the original, and train --resume continues it"

OMP_NUM_THREADS=1 "$venv/bin/python" "$here/import_hf.py" "$WORK/hf" "$WORK/saved" 2>"$WORK/hf.log" ||
  fail "transformers could not save: $(tail -3 "$WORK/hf.log")"
"$BP" import --format hf "$WORK/saved" --out "$WORK/run3" || fail "import of transformers' folder"
"$BP" export --format hf --ckpt "$WORK/run3" "$WORK/hf3"
cmp -s "$WORK/hf/model.safetensors" "$WORK/hf3/model.safetensors" ||
  fail "transformers' folder imported to other weights than it holds"
n=$((32 - ${#prompt}))
"$BP" sample --ckpt "$WORK/run3" --prompt "$prompt" --length "$n" --top-k 1 >"$WORK/ours"
OMP_NUM_THREADS=1 "$venv/bin/python" "$here/export_hf.py" "$WORK/saved" "$prompt" "$n" \
  >"$WORK/theirs" 2>"$WORK/hf.log" || fail "transformers failed: $(tail -3 "$WORK/hf.log")"
cmp -s "$WORK/ours" "$WORK/theirs" ||
  fail "greedy bytes differ: bagpipe '$(cat "$WORK/ours")' transformers '$(cat "$WORK/theirs")'"
echo "ok: transformers' own folder imported: both generate '$(tr -d '\n' <"$WORK/theirs")'"

# The logits themselves, at every position of a prompt as long as the context.
long="In the beginning God created the"
"$BP" sample --ckpt "$WORK/run3" --prompt "$long" --logits "$WORK/logits" >"$WORK/out" ||
  fail "sample --logits failed"
[ ! -s "$WORK/out" ] || fail "sample --logits also generated: $(cat "$WORK/out")"
OMP_NUM_THREADS=1 "$venv/bin/python" "$here/logits_hf.py" "$WORK/saved" "$long" "$WORK/logits" \
  2>"$WORK/hf.log" || fail "logits: $(tail -1 "$WORK/hf.log")"
expect 2 "sample --logits: the prompt must have 1 to 32 bytes \\(the model's seq_len\\), not 33" -- \
  "$BP" sample --ckpt "$WORK/run3" --prompt "${long}m" --logits "$WORK/l2"
expect 2 "sample --logits: the prompt must have 1 to 32 bytes" -- \
  "$BP" sample --ckpt "$WORK/run3" --prompt "" --logits "$WORK/l2"
[ ! -e "$WORK/l2" ] || fail "a refused --logits left a file"
expect 1 "$WORK/none/l" -- "$BP" sample --ckpt "$WORK/run3" --prompt "$long" --logits "$WORK/none/l"

expect 2 "already holds a run; give a new --out" -- \
  "$BP" import --format hf "$WORK/hf" --out "$WORK/run"
sed 's/"vocab_size": 256/"vocab_size": 50257/' "$WORK/hf/config.json" >"$WORK/cfg"
mkdir -p "$WORK/v" && cp "$WORK/cfg" "$WORK/v/config.json" && cp "$WORK/hf/model.safetensors" "$WORK/v/"
expect 2 "vocab_size is 50257; bagpipe's gpt reads bytes \(256\)" -- \
  "$BP" import --format hf "$WORK/v" --out "$WORK/x"
sed 's/"n_layer": 2/"n_layer": 3/' "$WORK/hf/config.json" >"$WORK/v/config.json"
expect 1 "model.safetensors has no transformer.h.2" -- \
  "$BP" import --format hf "$WORK/v" --out "$WORK/x"
[ ! -e "$WORK/x/latest" ] || fail "a refused import left a run"
expect 2 "import: give the folder and the run" -- "$BP" import --format hf "$WORK/hf"
echo "ok: bad input refused"
