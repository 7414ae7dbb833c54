#!/usr/bin/env bash
# --dtype bf16 on the CPU (nn/bf16.h's rules by software rounding) against fp32 on a
# small gpt over 200 steps: the first loss (same weights, one forward) within 1%,
# the mean of the last 20 losses and the validation loss within 3%, and not the
# same numbers (the rounding took place). What it does not run is refused.
source "$(dirname "$0")/lib.sh"

SMALL=(--layers 2 --embd 32 --heads 2 --seq-len 32 --batch 8 --eval-batches 4 --progress none
  --data "$TEXT" --steps 200 --eval-every 200 --seed 5)
for dt in fp32 bf16; do
  "$BP" train "${SMALL[@]}" --dtype "$dt" --out "$WORK/$dt" >"$WORK/$dt.out" 2>&1 \
    || fail "--dtype $dt must train: $(cat "$WORK/$dt.out")"
done
grep -q "bf16 on the CPU: .* software rounding" "$WORK/bf16.out" || fail "no bf16 header line"
python3 - "$WORK/fp32/metrics.jsonl" "$WORK/bf16/metrics.jsonl" <<'PY' || fail "bf16 against fp32"
import json, sys
def read(path):
    recs = [json.loads(l) for l in open(path)]
    steps = [r["loss"] for r in recs if r.get("type") == "step"]
    evals = [r["val_loss"] for r in recs if r.get("type") == "eval"]
    return steps, evals[-1]
(f, fv), (b, bv) = read(sys.argv[1]), read(sys.argv[2])
tail = lambda x: sum(x[-20:]) / 20
print(f"first {f[0]:.5f} / {b[0]:.5f}, last 20 {tail(f):.5f} / {tail(b):.5f}, val {fv:.5f} / {bv:.5f}")
assert len(f) == len(b) == 200
assert abs(b[0] - f[0]) <= 0.01 * f[0]
assert abs(tail(b) - tail(f)) <= 0.03 * tail(f)
assert abs(bv - fv) <= 0.03 * fv
assert f != b, "bf16 gave fp32's losses: nothing was rounded"
PY

expect 2 "option --dtype bf16: trains gpt only" -- "$BP" train --model mlp --dtype bf16 --steps 1
expect 2 "option --dtype bf16: runs on --device cpu or cuda" -- \
  "$BP" train "${TINY[@]}" --data "$TEXT" --device check --dtype bf16
