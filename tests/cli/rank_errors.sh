#!/usr/bin/env bash
# A configuration or input error that only one non-zero rank sees (a file missing
# on its node, an option given to one rank of an MPMD launch) ends every rank in
# bounded time: the ranks agree before any collective set-up, and the rank that saw
# it prints the one line, naming its rank.
source "$(dirname "$0")/lib.sh"

read -ra flags <<<"${BP_MPIEXEC_FLAGS:-}"
mkdir -p "$WORK/a" "$WORK/b"
cp "$TEXT" "$WORK/a/d.txt"
opts=("${TINY[@]}" --steps 3 --eval-every 0 --data d.txt)

# mpmd CODE PATTERN -- RANK0_ARGS... -- RANK1_ARGS...: rank 0 runs in a/, rank 1 in
# b/; the job exits CODE within 60 s with one bagpipe line matching PATTERN.
mpmd() {
  local code=$1 pattern=$2
  shift 3
  local r0=() r1=()
  while [ "$1" != "--" ]; do r0+=("$1"); shift; done
  shift
  r1=("$@")
  local rc=0
  timeout -k 5 60 "$BP_MPIEXEC" "${flags[@]}" -n 1 -wdir "$WORK/a" "$BP" train "${r0[@]}" \
    : -n 1 -wdir "$WORK/b" "$BP" train "${r1[@]}" >"$WORK/stdout" 2>"$WORK/stderr" || rc=$?
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "hung: $pattern: $(cat "$WORK/stderr")"
  [ "$rc" -eq "$code" ] || fail "exit $rc, expected $code: $(cat "$WORK/stderr")"
  local lines
  lines=$(grep -c '^bagpipe:' "$WORK/stderr" || true)
  [ "$lines" -eq 1 ] || fail "$lines bagpipe lines, expected 1: $(cat "$WORK/stderr")"
  grep -qE -- "$pattern" "$WORK/stderr" || fail "said '$(grep '^bagpipe:' "$WORK/stderr")', expected /$pattern/"
  echo "$(grep '^bagpipe:' "$WORK/stderr")"
}

# d.txt exists only in a/ (rank 0's directory).
mpmd 2 "^bagpipe: \[rank 1\] error: option --data: d.txt does not exist" -- \
  "${opts[@]}" --out "$WORK/a/run" -- "${opts[@]}" --out "$WORK/b/run"
# An option only rank 1 was given.
cp "$TEXT" "$WORK/b/d.txt"
mpmd 2 "^bagpipe: \[rank 1\] error: unknown option '--bogus'" -- \
  "${opts[@]}" --out "$WORK/a/run" -- "${opts[@]}" --out "$WORK/b/run" --bogus
# Ranks given different options (here a model of another size) end at once, before
# any collective of the model's size, naming the option and both values; their own
# --out apart, since a path names a place on each rank's node.
mpmd 2 "^bagpipe: \[rank 1\] error: the ranks were given different options: --embd 32 on rank 1 but --embd 16 on rank 0\$" -- \
  "${opts[@]}" --out "$WORK/a/run" -- "${opts[@]}" --out "$WORK/b/run" --embd 32
# An input error found while loading, on rank 1 alone: its d.txt is empty.
: >"$WORK/b/d.txt"
mpmd 1 "^bagpipe: \[rank 1\] error: .*d.txt.*empty" -- \
  "${opts[@]}" --out "$WORK/a/run" -- "${opts[@]}" --out "$WORK/b/run"
# The same error on every rank is printed once, by rank 0.
rm "$WORK/b/d.txt" && mv "$WORK/a/d.txt" "$WORK/a/gone.txt"
mpmd 2 "^bagpipe: \[rank 0\] error: option --data: d.txt does not exist" -- \
  "${opts[@]}" --out "$WORK/a/run" -- "${opts[@]}" --out "$WORK/b/run"
echo "ok"
