#!/usr/bin/env bash
# `--help` lists every option with its default, and every option it lists is
# accepted by the parser.
source "$(dirname "$0")/lib.sh"

"$BP" --help >"$WORK/help"
grep -q "usage: bagpipe <command>" "$WORK/help" || fail "bagpipe --help"
for cmd in train sample; do
  "$BP" $cmd --help >"$WORK/help"
  n=$(grep -c '^  --' "$WORK/help")
  [ "$n" -ge 5 ] || fail "$cmd --help lists only $n options"
  if grep '^  --' "$WORK/help" | grep -v '(default: '; then fail "$cmd: options without a default"; fi
  # Each listed flag is known: the parser reports a bad value, never an unknown option.
  for opt in $(grep -oE '^  --[a-z0-9-]+' "$WORK/help"); do
    rc=0
    "$BP" $cmd "$opt" x --help >/dev/null 2>"$WORK/err" || rc=$?
    if grep -q "unknown option" "$WORK/err"; then fail "$cmd lists $opt but rejects it"; fi
  done
done
echo "ok"
