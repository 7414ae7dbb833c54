#!/usr/bin/env bash
# Default gpt (L=4, C=128, 4 heads, T=64, B=16, AdamW 1e-3, betas 0.9/0.95, seed
# 1234) on the King James Bible reaches validation loss <= 1.85 nats/byte by step
# 1000, as the same architecture and settings do in PyTorch.
source "$(dirname "$0")/../cli/lib.sh"

"$BP" train --model gpt --data kjv --cache-dir "$WORK/cache" --out "$WORK/gpt" --progress lines \
  --log-every 100 | tee "$WORK/log"
val=$(grep '"type":"eval","step":1000,' "$WORK/gpt/metrics.jsonl" | sed -E 's/.*"val_loss":([^,}]+).*/\1/')
[ -n "$val" ] || fail "no evaluation at step 1000"
awk -v v="$val" 'BEGIN { exit !(v <= 1.85) }' || fail "validation loss $val > 1.85 at step 1000"
echo "ok: validation loss $val at step 1000"
