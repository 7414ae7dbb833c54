#!/usr/bin/env bash
# Launches that bagpipe must refuse with one line rather than go wrong: a process
# started as torchrun starts it (WORLD_SIZE and RANK set, no mpirun), which MPI
# would make a world of its own that trains alone; and init() after finalize(),
# which Open MPI would abort.
set -u
export PYTHONPATH="$BP_PYTHON_PATH"
"$BP_PYTHON" -c "import torch" 2>/dev/null || {
  echo "skipped: no torch for $BP_PYTHON"; exit 77; }
fail() { echo "FAIL: $*"; echo "--- output (exit $rc):"; echo "$out"; exit 1; }

out=$(WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 timeout 60 "$BP_PYTHON" -c \
  "import bagpipe.torch as bpt; bpt.init_process_group(); print('trained alone')" 2>&1)
rc=$?
[ "$rc" -ne 0 ] || fail "a torchrun-style launch went on"
grep -q "^bagpipe.Error: bagpipe: WORLD_SIZE is 2 but MPI started 1 rank(s): .*launch with mpirun -np 2 " \
  <<<"$out" || fail "no line saying how to launch"
echo "ok: torchrun-style launch refused"

out=$(timeout 60 "$BP_PYTHON" -c \
  "import bagpipe; bagpipe.init(); bagpipe.finalize(); bagpipe.init()" 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "init after finalize: exit $rc"
grep -q "^bagpipe.Error: bagpipe: init after finalize: MPI cannot start twice in one process$" \
  <<<"$out" || fail "no line for init after finalize"
echo "ok: init after finalize raises"
