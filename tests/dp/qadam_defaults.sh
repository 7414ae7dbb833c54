#!/usr/bin/env bash
# QAdam's second-moment decay defaults to Bagua's 0.999 (the moment is frozen
# after the warm-up, so it matters), other algorithms keep 0.95, and an explicit
# --beta2 wins: the default run's losses are bit-identical to --beta2 0.999's and
# differ from --beta2 0.95's.
source "$(dirname "$0")/lib.sh"
Q=(train "${TINY_GPT[@]}" --dp-algo qadam --qadam-warmup 2 --steps 6 --log-every 1)
run() { # name options...
  local name=$1
  shift
  launch 2 "$BP" "$@" --out "$WORK/$name" >/dev/null || fail "$name did not train"
  losses "$WORK/$name/metrics.jsonl" >"$WORK/$name.loss"
}
run default "${Q[@]}"
run explicit "${Q[@]}" --beta2 0.999
run adamw_beta "${Q[@]}" --beta2 0.95
cmp -s "$WORK/default.loss" "$WORK/explicit.loss" ||
  fail "qadam's default is not --beta2 0.999: $(paste "$WORK/default.loss" "$WORK/explicit.loss")"
if cmp -s "$WORK/default.loss" "$WORK/adamw_beta.loss"; then
  fail "--beta2 0.95 did not change qadam's losses"
fi
# allreduce keeps AdamW's 0.95.
A=(train "${TINY_GPT[@]}" --steps 4 --log-every 1)
run ar_default "${A[@]}"
run ar_explicit "${A[@]}" --beta2 0.95
cmp -s "$WORK/ar_default.loss" "$WORK/ar_explicit.loss" || fail "allreduce's default is not --beta2 0.95"
help=$("$BP" train --help)
grep -q -- "--beta2 X.*0.999 with --dp-algo qadam" <<<"$help" || fail "--help does not give qadam's --beta2"
echo OK
