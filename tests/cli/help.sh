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

# train --help lists each feature's options under the feature's heading.
"$BP" train --help >"$WORK/help"
heading_of() { awk -v o="$1" '/^[^ ].*:$/ {h = $0} $1 == o {print h; exit}' "$WORK/help"; }
for pair in "--layers|model:" "--lr|optimizer:" "--qadam-warmup|--dp-algo qadam:" \
  "--ea-alpha|--dp-algo easgd:" "--pipelines|AvgPipe:" "--cb|Optimus-CC:" \
  "--bucket-mb|communication:" "--denormals|device:"; do
  opt=${pair%%|*} want=${pair#*|}
  got=$(heading_of "$opt")
  [ "$got" = "$want" ] || fail "train --help lists $opt under '$got', expected '$want'"
done
[ "$(heading_of --steps)" = "options:" ] || fail "train --help: the run's own options have a heading"
"$BP" simulate --help >"$WORK/help"
[ "$(heading_of --measure)" = "simulate:" ] || fail "simulate --help: its own options are not under 'simulate:'"
echo "ok"
