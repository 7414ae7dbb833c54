#!/usr/bin/env bash
# The checking backend (--device check: the cpu's kernels on memory the host cannot
# touch outside the backend's calls) gives the cpu's bits on the equivalence
# configurations of scripts/compare-losses.sh: dp with every synchronous algorithm
# (diloco and streaming-diloco with their outer codecs among them),
# every schedule, tp, AvgPipe, each Optimus-CC flag, mlp across stages; and a run
# resumed on it from a checkpoint continues bit for bit. A host access to device
# memory anywhere in the step would crash these runs (tests/core/test_backend.c
# shows that such an access faults); sample on it writes the cpu's bytes.
source "$(dirname "$0")/lib.sh"
export OPENBLAS_NUM_THREADS=1
CL="$BP_SOURCE_DIR/scripts/compare-losses.sh"
# async averages on a timer (compare-losses checks it converges): its thread reads
# and writes the weights through the table under its lock.
export ONLY='^(async|diloco|diloco-minmax4-rs|streaming-diloco|allreduce-buckets|bytegrad|qadam|decentralized-all|lp-decentralized|powersgd|easgd|hierarchical|1f1b|afp1|tp2|avgpipe-dp2|cb|cb-no-lep|sc-stages|fused-embedding-sync|clip-accum|mlp-pp2)$'
"$CL" record "$BP" "$WORK/cpu" >"$WORK/cpu.txt" 2>&1 || fail "recording on the cpu: $(cat "$WORK/cpu.txt")"
EXTRA="--device check" "$CL" record "$BP" "$WORK/check" >"$WORK/check.txt" 2>&1 ||
  fail "recording on check: $(cat "$WORK/check.txt")"
# A run that failed on either side shows as MISSING: its log's end says why.
failed_runs() { sed -nE 's/^.*: FAILED \(see (.*)\)$/\1/p' "$WORK/cpu.txt" "$WORK/check.txt" | while read -r l; do
  echo "--- $l"; tail -5 "$l"; done; }
"$CL" compare "$WORK/cpu" "$WORK/check" >"$WORK/cmp.txt" 2>&1 ||
  fail "check differs from cpu: $(cat "$WORK/cmp.txt") $(failed_runs)"
[ "$(grep -cE '^(SAME|RUNS)' "$WORK/cmp.txt")" -eq 22 ] || fail "not every configuration compared: $(cat "$WORK/cmp.txt")"

losses() { grep '"type":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
# Resumed on check from a checkpoint the cpu wrote, against the cpu's whole run.
R=(train "${TINY[@]}" --data "$TEXT" --steps 8 --checkpoint-every 4 --eval-every 4 --keep-checkpoints 3)
"$BP" "${R[@]}" --out "$WORK/full" >/dev/null || fail "cpu run failed"
"$BP" "${R[@]}" --out "$WORK/cut" >/dev/null || fail "cpu run failed"
rm -rf "$WORK/cut/ckpt-00000008"
echo "ckpt-00000004" >"$WORK/cut/latest"
"$BP" "${R[@]}" --device check --resume "$WORK/cut" --out "$WORK/res" >/dev/null || fail "resume on check failed"
diff <(losses "$WORK/full/metrics.jsonl" | awk '$1 > 4') <(losses "$WORK/res/metrics.jsonl") ||
  fail "resumed on check: losses differ"
cmp "$WORK/full/ckpt-00000008/stage0-tp0.safetensors" "$WORK/res/ckpt-00000008/stage0-tp0.safetensors" ||
  fail "resumed on check: final weights differ"

# Replica state (the elastic center, each pipeline's weights) resumed on check from a
# checkpoint the cpu wrote: steps 7..12 and the final weights as the cpu's run.
S=(train --layers 2 --embd 32 --heads 2 --seq-len 32 --batch 8 --data "$TEXT" --progress none
  --eval-every 0 --log-every 1 --steps 12 --checkpoint-every 6 --keep-checkpoints 2)
state_resume() { # name ranks options...
  local name=$1 w=$2
  shift 2
  launch "$w" "$BP" "${S[@]}" "$@" --out "$WORK/$name" >/dev/null 2>&1 || fail "$name: cpu run failed"
  launch "$w" "$BP" "${S[@]}" "$@" --device check --resume "$WORK/$name/ckpt-00000006" \
    --out "$WORK/$name-res" >/dev/null 2>"$WORK/err" || fail "$name: resume on check failed: $(cat "$WORK/err")"
  diff <(losses "$WORK/$name/metrics.jsonl" | awk '$1 > 6') <(losses "$WORK/$name-res/metrics.jsonl") ||
    fail "$name: losses resumed on check differ"
  cmp "$WORK/$name/ckpt-00000012/stage0-tp0.safetensors" "$WORK/$name-res/ckpt-00000012/stage0-tp0.safetensors" ||
    fail "$name: final weights resumed on check differ"
}
state_resume easgd 2 --dp-algo easgd --ea-period 2
state_resume avgpipe 1 --pipelines 2 --micro-batches 2
# DiLoCo's global weights, outer momentum, error feedback of both exchanges and, for
# streaming, the fragment in flight at step 6 (synchronized after step 5, tau 2).
state_resume diloco 3 --batch 12 --dp-algo diloco --inner-steps 4 --outer-compress minmax2 \
  --outer-exchange reduce-scatter
state_resume streaming-diloco 2 --dp-algo streaming-diloco --inner-steps 4 --outer-delay 2 \
  --outer-compress minmax8

# sample's model on the check backend (its logits copied through the table) writes the
# cpu's bytes.
"$BP" sample --ckpt "$WORK/full" --length 40 --top-k 1 >"$WORK/sample-cpu" || fail "sample on cpu failed"
"$BP" sample --ckpt "$WORK/full" --length 40 --top-k 1 --device check >"$WORK/sample-check" ||
  fail "sample on check failed"
cmp "$WORK/sample-cpu" "$WORK/sample-check" || fail "sample on check differs from the cpu's"
