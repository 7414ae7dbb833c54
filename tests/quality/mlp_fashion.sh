#!/usr/bin/env bash
# Default mlp (784-256-256-10, SGD momentum 0.9, lr 0.05, batch 64) reaches test
# accuracy >= 0.84 on Fashion-MNIST after one epoch.
source "$(dirname "$0")/../cli/lib.sh"

"$BP" train --model mlp --out "$WORK/mlp" --progress lines --log-every 100 | tee "$WORK/log"
acc=$(grep '"type":"eval"' "$WORK/mlp/metrics.jsonl" | tail -n 1 | sed -E 's/.*"val_acc":([^,}]+).*/\1/')
[ -n "$acc" ] || fail "no evaluation after the epoch"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.84) }' || fail "test accuracy $acc < 0.84 after one epoch"
echo "ok: test accuracy $acc after one epoch"
