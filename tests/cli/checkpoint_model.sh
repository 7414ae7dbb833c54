#!/usr/bin/env bash
# A checkpoint whose metadata names a model this build does not know (written by a
# newer build, say) is refused, not read as another model: sample, export and a
# resume each stop with one line that names the weights file and the name, exit 1.
# The checkpoint is consistent otherwise: its checksums are rewritten to match.
source "$(dirname "$0")/lib.sh"

"$BP" train --model mlp --steps 2 --hidden 8 --out "$WORK/mlp" --progress none --eval-every 0 \
  >/dev/null || fail "training the mlp failed"
CK="$WORK/mlp/ckpt-00000002"

# Rename the model in the weights' metadata, then fix the weights' checksum in the
# state file and the state file's own trailing checksum.
python3 - "$CK" <<'PY' || fail "could not rewrite the checkpoint"
import struct, sys, zlib
d = sys.argv[1]
weights = open(d + "/stage0-tp0.safetensors", "rb").read()
renamed = weights.replace(b'"bagpipe.model":"mlp"', b'"bagpipe.model":"rnn"', 1)
assert renamed != weights, "no bagpipe.model in the metadata"
state = open(d + "/stage0-tp0.state", "rb").read()[:-4]
old, new = (struct.pack("<I", zlib.crc32(w)) for w in (weights, renamed))
assert state.count(old) == 1, "the weights' checksum is not in the state file once"
state = state.replace(old, new)
open(d + "/stage0-tp0.safetensors", "wb").write(renamed)
open(d + "/stage0-tp0.state", "wb").write(state + struct.pack("<I", zlib.crc32(state)))
PY

WHY="checkpoint $CK/stage0-tp0.safetensors: metadata bagpipe.model: unknown model 'rnn' \(known: gpt\|mlp\)"
expect 1 "$WHY" -- "$BP" sample --ckpt "$WORK/mlp"
expect 1 "$WHY" -- "$BP" export --format hf --ckpt "$WORK/mlp" "$WORK/hf"
[ ! -e "$WORK/hf" ] || fail "a refused export left $WORK/hf"
expect 1 "$WHY" -- "$BP" train --model mlp --steps 4 --hidden 8 --resume "$CK" --out "$WORK/res" \
  --progress none --eval-every 0
echo "ok"
