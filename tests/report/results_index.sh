#!/usr/bin/env bash
# experiments/results_index.py: docs/RESULTS.md carries each study's first table, a
# Markdown one or the fenced block a study prints its table in (AvgPipe's), and
# says which studies have not run.
source "$(dirname "$0")/../lib.sh"
mkdir -p "$WORK/experiments" "$WORK/docs/results/avgpipe" "$WORK/docs/results/bagua_convergence"
cp "$(dirname "$0")/../../experiments/results_index.py" "$WORK/experiments/"
cat >"$WORK/docs/results/avgpipe/README.md" <<'PAGE'
# AvgPipe study

- command: `experiments/avgpipe.sh`

Some words.

```
  config        samples/s
  avgpipe2          189.6
```

_Ran for 4 min; load 1.0._
PAGE
cat >"$WORK/docs/results/bagua_convergence/README.md" <<'PAGE'
# Bagua study

- command: `experiments/bagua_convergence.sh`

| algorithm | loss |
|:--|--:|
| allreduce | 1.79 |

Later words.
PAGE
python3 "$WORK/experiments/results_index.py"
out="$WORK/docs/RESULTS.md"
grep -q "^  avgpipe2          189.6$" "$out" || fail "AvgPipe's fenced table is missing: $(cat "$out")"
[ "$(grep -c '^```$' "$out")" -eq 2 ] || fail "AvgPipe's block is not fenced: $(cat "$out")"
grep -q "^| allreduce | 1.79 |$" "$out" || fail "the Markdown table is missing"
if grep -q "Later words\|Some words" "$out"; then fail "text beyond the table was copied"; fi
grep -q "Not run yet: \`experiments/occ_ablation.sh\`" "$out" || fail "a study not run is not named"
echo OK
