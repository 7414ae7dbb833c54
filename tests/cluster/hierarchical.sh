#!/usr/bin/env bash
# --hierarchical finds the nodes itself: with 2 hosts of 2 ranks, bagpipe's node
# split (the ranks that share memory, as Open MPI decides from its launch daemons,
# one per host) puts the two ranks of each host together, and training with it
# sends across the links what an explicit --node-size 2 sends, not what one rank
# per node (--node-size 1, the flat algorithm) sends.
source "$(dirname "$0")/lib.sh"
: "${BP_NODE_GROUPS:?set by ctest}"
cluster_up 2

on_cluster 4 --npernode 2 -- "$BP_NODE_GROUPS" >"$WORK/groups" 2>&1 || fail "node_groups failed: $(cat "$WORK/groups")"
cat "$WORK/groups"
[ "$(wc -l <"$WORK/groups")" -eq 4 ] || fail "expected 4 lines from 4 ranks"
# Ranks 0 and 1 on the first host, 2 and 3 on the second; each node of 2 ranks, 2 nodes.
awk -v ns="$BP_CLUSTER" '{ want = ns "-h" int($1 / 2); if ($2 != want || $3 != 2 || $4 != 2) { print "rank " $1 ": " $0 " (want host " want ", 2 ranks per node, 2 nodes)"; bad = 1 } }
  END { exit bad }' "$WORK/groups" || fail "ranks not grouped by host"

opts=("${TINY_GPT[@]}" --steps 20 --dp 4 --hierarchical)
for size in 0 2 1; do
  before=$(link_tx)
  on_cluster 4 --npernode 2 -- "$BP" train "${opts[@]}" --node-size $size --out "$WORK/n$size" >"$WORK/out" 2>&1 ||
    fail "--node-size $size failed: $(cat "$WORK/out")"
  echo $(($(link_tx) - before)) >"$WORK/moved$size"
  echo "--hierarchical --node-size $size: links carried $(cat "$WORK/moved$size") bytes"
done
identical "found nodes vs --node-size 2" "$WORK/n2/metrics.jsonl" "$WORK/n0/metrics.jsonl"
awk -v a="$(cat "$WORK/moved0")" -v b="$(cat "$WORK/moved2")" 'BEGIN { d = a - b; exit !(d < 0.02 * b && -d < 0.02 * b) }' ||
  fail "found nodes moved $(cat "$WORK/moved0") bytes, --node-size 2 $(cat "$WORK/moved2")"
# The byte count tells groupings apart: one rank per node crosses the links more.
awk -v a="$(cat "$WORK/moved1")" -v b="$(cat "$WORK/moved2")" 'BEGIN { exit !(a > 1.2 * b) }' ||
  fail "--node-size 1 moved $(cat "$WORK/moved1") bytes, not more than --node-size 2's $(cat "$WORK/moved2")"
echo "ok"
