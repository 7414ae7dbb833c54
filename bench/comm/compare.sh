#!/usr/bin/env bash
# Our allreduce against MPI_Allreduce in two builds of bench_comm, alternating run by
# run so that both see the same machine:
#   bench/comm/compare.sh BEFORE_BUILD AFTER_BUILD [rounds] [np]
# (e.g. a build of an earlier commit and one of this). Prints every run's bench_comm
# `ratio` (MPI's time / ours) at 4 KB and 4 MB, then the median of each build's: on a
# shared machine single runs vary several-fold, the ratio of two sides timed
# alternately much less.
set -eu
before=$1 after=$2 rounds=${3:-5} np=${4:-2}
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  for b in before after; do
    dir=$before
    [ "$b" = after ] && dir=$after
    scripts/mpirun.sh -np "$np" "$dir/bench/comm/bench_comm" 4 allreduce 2>/dev/null |
      awk -v r="$r" -v b="$b" '($1 == 4096 || $1 == 4194304) && NF == 6 { print r, b, $1, $2, $3, $6 }'
  done
done | tee "$out"
echo "median ratio (MPI time / ours), $np ranks, $rounds runs each:"
for b in before after; do
  for bytes in 4096 4194304; do
    awk -v b="$b" -v n="$bytes" '$2 == b && $3 == n { print $6 }' "$out" | sort -g |
      awk -v b="$b" -v n="$bytes" '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "  %-6s %8s bytes: %.2f\n", b, n, m }'
  done
done
