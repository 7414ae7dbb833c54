#!/usr/bin/env bash
# Launches that bagpipe must refuse with one line rather than go wrong: a process
# started as torchrun starts it (WORLD_SIZE and RANK set, no mpirun), which MPI
# would make a world of its own that trains alone; and init() after finalize(),
# which Open MPI would abort.
set -u
export PYTHONPATH="$BP_PYTHON_PATH"
"$BP_PYTHON" -c "import torch" 2>/dev/null || {
  echo "skipped: no torch for $BP_PYTHON"; exit 77; }

# refused WHAT LINE CODE: CODE run alone must exit 1 with LINE (a regex) in its output.
refused() {
  local out rc
  out=$(timeout 60 "$BP_PYTHON" -c "$3" 2>&1)
  rc=$?
  if [ "$rc" -ne 1 ] || ! grep -q "$2" <<<"$out"; then
    echo "FAIL: $1: exit $rc, no line '$2'"; echo "$out"; exit 1
  fi
  echo "ok: $1 refused"
}

export WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511
refused "a torchrun-style launch" \
  "^bagpipe.Error: bagpipe: WORLD_SIZE is 2 but MPI started 1 rank(s): .*launch with mpirun -np 2 " \
  "import bagpipe.torch as bpt; bpt.init_process_group(); print('trained alone')"
unset WORLD_SIZE RANK MASTER_ADDR MASTER_PORT
refused "init after finalize" \
  "^bagpipe.Error: bagpipe: init after finalize: MPI cannot start twice in one process$" \
  "import bagpipe; bagpipe.init(); bagpipe.finalize(); bagpipe.init()"
