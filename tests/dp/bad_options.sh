#!/usr/bin/env bash
# Wrong data-parallel options under mpiexec: every rank reaches the same verdict
# before any work, rank 0 alone prints one error line naming the option, every rank
# exits with 2 (usage error) and nothing is trained.
#
# The exit code of the launcher: Open MPI 4.1's mpirun returns the exit code of the
# first rank that ended with a non-zero one, here 2 (every rank returns 2), after
# printing its own banner ("Primary job terminated normally, but 1 process
# returned a non-zero exit code...") on stderr. So the test asserts 2 and counts
# only the lines that bagpipe prints (they start with "bagpipe:"), and checks that
# no rank ended the job with MPI_Abort, which is for runtime failures.
source "$(dirname "$0")/lib.sh"

# expect W OPTION -- options...: on W ranks, exit code 2 and exactly one line from
# bagpipe, rank 0's error naming OPTION.
expect() {
  local w=$1 option=$2
  shift 3
  refused "$w" "^bagpipe: \[rank 0\] error: option $option: " -- "${TINY_GPT[@]}" --steps 2 "$@"
}

expect 2 --dp -- --dp 3
expect 2 --batch -- --batch 15
expect 3 --peers -- --dp-algo decentralized --peers shift_one --batch 12
expect 2 --qadam-warmup -- --dp-algo qadam --qadam-warmup 0
expect 2 --qadam-warmup -- --dp-algo qadam --qadam-warmup 1
expect 2 --net -- --net bw=fast
expect 2 --bucket-mb -- --bucket-mb fast
expect 2 --optim -- --dp-algo qadam --optim sgd
expect 2 --fragments -- --dp-algo streaming-diloco --inner-steps 2 --fragments 3
expect 2 --outer-delay -- --dp-algo streaming-diloco --inner-steps 4 --outer-delay 5
expect 2 --outer-compress -- --dp-algo diloco --outer-compress int3
expect 2 --outer-exchange -- --dp-algo diloco --outer-exchange reduce-scatter
expect 2 --outer-residual -- --dp-algo diloco --outer-residual keep
echo "ok"
