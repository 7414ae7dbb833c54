#!/usr/bin/env bash
# Every #include of src/ and include/ points down the layers of docs/ARCHITECTURE.md#layers
# and the planner above the trainer:
#   cli > plan > train > formats > parallel > {comm, nn, data};  comm > compress > core;
#   nn, data > core
# A file of src/<layer>/ (or a subfolder of it) may include its own layer and those
# below; the public headers include/bagpipe/<x>.h belong to the layer they expose
# (status.h: core, compress.h: compress, comm.h and comm_mpi.h: comm, bagpipe.h: all).
# Prints each include that points up or sideways and exits 1; exits 0 when none.
# Usage: scripts/check-layers.sh [ROOT]   (ROOT: the repository, by default this one)
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root"

# The layers each layer may include.
declare -A allowed=(
  [core]="core"
  [compress]="compress core"
  [comm]="comm compress core"
  [nn]="nn core"
  [data]="data core"
  [parallel]="parallel comm compress nn data core"
  [formats]="formats parallel comm compress nn data core"
  [train]="train formats parallel comm compress nn data core"
  [plan]="plan train formats parallel comm compress nn data core"
  [cli]="cli plan train formats parallel comm compress nn data core"
  [api]="api comm compress core"
)

# The layer of an included path ("core/buf.h", "bagpipe/comm.h", "parallel/dp/algo.h").
layer_of() {
  case $1 in
  bagpipe/status.h) echo core ;;
  bagpipe/compress.h) echo compress ;;
  bagpipe/comm.h | bagpipe/comm_mpi.h) echo comm ;;
  bagpipe/*) echo api ;;
  */*) echo "${1%%/*}" ;;
  *) echo local ;; # a header next to the file: its own layer
  esac
}

# The C files: git's (tracked and new) in a checkout, else every one.
sources() {
  if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard src include | grep -E '\.(c|h)$'
  else
    find src include -name '*.[ch]' | sort
  fi
}

bad=0
while IFS= read -r file; do
  case $file in
  include/*) from=$(layer_of "${file#include/}") ;;
  src/*) from=${file#src/} from=${from%%/*} ;;
  esac
  [ -n "${allowed[$from]:-}" ] || { echo "$file: layer '$from' is not in the list" >&2; bad=1; continue; }
  while IFS=: read -r line inc; do
    to=$(layer_of "$inc")
    [ "$to" = local ] && continue
    if [[ " ${allowed[$from]} " != *" $to "* ]]; then
      echo "$file:$line: $from includes \"$inc\" ($to is not below $from)"
      bad=1
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$file" |
    sed -E 's/^([0-9]+):[^"]*"([^"]+)".*/\1:\2/')
done < <(sources)
exit $bad
