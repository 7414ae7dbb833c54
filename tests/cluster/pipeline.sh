#!/usr/bin/env bash
# A 2-stage pipeline across 2 hosts: the activations and their gradients cross the
# link between the stages, and the losses are those of the same pipeline on the
# loopback, bit for bit; what crossed the links is what bagpipe counted (the
# pipeline's sends and the tied embedding's sync between the stages), within 10%.
source "$(dirname "$0")/lib.sh"
cluster_up 2

opts=("${TINY_GPT[@]}" --layers 2 --steps 20 --pp 2 --micro-batches 2)
launch 2 "$BP" train "${opts[@]}" --out "$WORK/lo" >/dev/null || fail "the loopback pipeline failed"
before=$(link_tx)
on_cluster 2 -- "$BP" train "${opts[@]}" --out "$WORK/pp" >"$WORK/out" 2>&1 ||
  fail "the pipeline across 2 hosts failed: $(cat "$WORK/out")"
moved=$(($(link_tx) - before))
grep -q '"world":2,' "$WORK/pp/metrics.jsonl" || fail "not a 2-rank run"
identical "pipeline: 2 hosts vs loopback" "$WORK/lo/metrics.jsonl" "$WORK/pp/metrics.jsonl"
grep -q '"pp":[1-9]' "$WORK/pp/metrics.jsonl" || fail "no bytes on the pipeline axis"
sent=$(bytes_sent "$WORK/pp/metrics.jsonl")
awk -v l="$moved" -v s="$sent" 'BEGIN { exit !(s > 0 && l >= 0.9 * s && l <= 1.1 * s) }' ||
  fail "the links carried $moved bytes, bagpipe says it sent $sent"
echo "pipeline: links carried $moved bytes, bagpipe sent $sent"
echo "ok"
