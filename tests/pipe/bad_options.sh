#!/usr/bin/env bash
# Wrong pipeline options under mpiexec: every rank reaches the same verdict before
# any work, one error line names the option (rank 0's when there are several
# ranks), every rank exits with 2 (usage error) and nothing is trained. As in
# tests/dp/bad_options.sh, only lines that bagpipe prints (starting "bagpipe:") are
# counted, since mpirun adds its own banner about the non-zero exit code.
source "$(dirname "$0")/lib.sh"

# expect W OPTION -- options...: on W ranks, exit code 2 and exactly one line from
# bagpipe, an error naming OPTION (rank 0's when there are several ranks).
expect() {
  local w=$1 option=$2 rank0=""
  shift 3
  [ "$w" -gt 1 ] && rank0='\[rank 0\] '
  refused "$w" "^bagpipe: ${rank0}error: option $option: " -- "$@" --data "$TEXT" --progress none \
    --eval-every 0 --steps 2
}

# The small gpt has 4 blocks: embedding, 2 layers, head. A failing job takes mpirun
# about 1.5 s to end, so the cases are few; tests/pipe/test_schedule.c checks the
# parsing of --schedule and --partition in all its forms.
G=(--layers 2 --embd 16 --heads 2 --seq-len 16 --batch 8)
expect 4 --pp -- "${G[@]}" --pp 3
expect 1 --pp -- "${G[@]}" --pp 2
expect 3 --partition -- "${G[@]}" --pp 3 --partition 1,1
expect 2 --partition -- "${G[@]}" --pp 2 --partition 2,3
expect 2 --schedule -- "${G[@]}" --pp 2 --schedule zigzag
expect 1 --schedule -- "${G[@]}" --schedule afp:-1
expect 1 --schedule -- "${G[@]}" --schedule gpipe:2
expect 1 --micro-batches -- "${G[@]}" --micro-batches 0
# A gpt of 1 layer has 3 blocks.
expect 4 --pp -- --layers 1 --embd 16 --heads 2 --seq-len 16 --batch 8 --pp 4
expect 4 --batch -- "${G[@]}" --pp 2 --dp 2 --micro-batches 3
# Optimus-CC's compressed backpropagation needs stages; its modifiers need it.
expect 1 --cb -- "${G[@]}" --cb
expect 2 --no-lep -- "${G[@]}" --pp 2 --no-lep
expect 2 --cb-warmup -- "${G[@]}" --pp 2 --cb-warmup 10
# A rank whose factors outweigh the 128 x 16 gradient: (128 + 16) x 15 > 128 x 16.
expect 2 --cb-rank -- "${G[@]}" --pp 2 --cb --cb-rank 15
# An emulated network that would stall the job (or overflow to none at all).
expect 1 --net -- "${G[@]}" --net lat=1e300s
echo "ok"
