#!/usr/bin/env bash
# The --net emulator held against the kernel, on 2 hosts of scripts/cluster.sh
# whose links tbf shapes to RATE (both directions, real TCP) and on the loopback
# with --net bw=RATE:
#  1. the network alone: median time of an allreduce of 256 KB .. 4 MB
#     (bench_cluster_link), kernel-shaped with Open MPI's defaults, kernel-shaped
#     with its TCP eager limit raised to 512 KB (no rendezvous handshake for our
#     256 KB ring segments), emulated without and with eager=64K (Open MPI's TCP
#     rendezvous threshold), and the emulator's plain model;
#  2. training: each configuration's median step time and median exposed
#     communication, kernel-shaped and emulated without (before) and with (after)
#     eager=64K, and the emulator's error (emulated / kernel - 1) of both.
# Usage: bench/cluster/compare.sh [RATE...] (default: 100mbit 1gbit)
# STEPS (default 14; the first 4 are left out of the medians) and CONFIGS (names
# below) in the environment narrow a run. Needs root (network namespaces).
set -euo pipefail
cd "$(dirname "$0")/../.."
BP=build/bagpipe
LINK=build/bench/cluster/bench_cluster_link
[ -x "$LINK" ] || cmake --build build --target bench_cluster_link >/dev/null
EAGER=(--mca btl_tcp_eager_limit 524288 --mca btl_tcp_rndv_eager_limit 524288 --mca btl_tcp_max_send_size 524288)
STEPS=${STEPS:-14}
SKIP_FIRST=4
RATES=("$@")
[ ${#RATES[@]} -gt 0 ] || RATES=(100mbit 1gbit)
export BP_CLUSTER=bench OPENBLAS_NUM_THREADS=1
WORK=$(mktemp -d /tmp/bp_cluster_bench.XXXXXX)
trap 'scripts/cluster.sh down >/dev/null 2>&1; rm -rf "$WORK"' EXIT
trap 'exit 143' TERM INT

# The default gpt (4 layers, 128 channels, 0.83 M parameters: 3.3 MB of gradients).
MODEL=(--data kjv --eval-every 0 --progress none --steps "$STEPS")
declare -A CONFIG=(
  [allreduce]="--dp 2 --dp-algo allreduce"
  [bytegrad]="--dp 2 --dp-algo bytegrad"
  [powersgd]="--dp 2 --dp-algo powersgd --rank 4"
  [decentralized]="--dp 2 --dp-algo decentralized"
  [pipeline]="--pp 2 --micro-batches 4"
)
# <name>+eager: the kernel-shaped run with Open MPI's TCP eager limit at 512 KB.
read -ra NAMES <<<"${CONFIGS:-allreduce allreduce+eager bytegrad powersgd decentralized pipeline}"

# median FILE KEY: median of KEY over the step records after the first SKIP_FIRST.
median() {
  grep '"type":"step"' "$1" | tail -n +$((SKIP_FIRST + 1)) | sed -nE "s/.*\"$2\":([0-9.e+-]+).*/\1/p" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "allreduce of one message on 2 ranks, median of 9 (ms)"
printf '%-8s %9s %8s %12s %9s %11s %7s %6s\n' rate bytes kernel kernel_eager emulated emul_eager model load
for rate in "${RATES[@]}"; do
  scripts/cluster.sh up 2 --rate "$rate" >/dev/null
  load=$(cut -d' ' -f1 /proc/loadavg)
  scripts/cluster.sh mpirun -np 2 "$LINK" >"$WORK/k"
  scripts/cluster.sh mpirun "${EAGER[@]}" -np 2 "$LINK" >"$WORK/ke"
  scripts/mpirun.sh -np 2 "$LINK" "bw=$rate" >"$WORK/e"
  scripts/mpirun.sh -np 2 "$LINK" "bw=$rate,eager=64K" >"$WORK/ee"
  paste "$WORK/k" "$WORK/ke" "$WORK/e" "$WORK/ee" | awk -v r="$rate" -v l="$load" '$1 >= 262144 {
    printf "%-8s %9d %8.1f %12.1f %9.1f %11.1f %7.1f %6s\n", r, $1, $2, $5, $8, $11, $9, l }'
done

echo
echo "training, default gpt, medians of steps $((SKIP_FIRST + 1))..$STEPS (ms)"
printf '%-8s %-15s %7s %7s %6s %7s %6s | %7s %7s %6s %7s %6s | %5s\n' rate config kern_ms \
  emul_ms err eager err kern_x emul_x err eager err load
for rate in "${RATES[@]}"; do
  scripts/cluster.sh up 2 --rate "$rate" >/dev/null
  for name in "${NAMES[@]}"; do
    read -ra opts <<<"${CONFIG[${name%+eager}]}"
    mpi=()
    [ "$name" = "${name%+eager}" ] || mpi=("${EAGER[@]}")
    load=$(cut -d' ' -f1 /proc/loadavg)
    run="$WORK/$rate-$name"
    scripts/cluster.sh mpirun "${mpi[@]}" -np 2 "$BP" train "${MODEL[@]}" "${opts[@]}" --out "$run-k" >"$WORK/out" 2>&1 ||
      { echo "kernel run $rate $name failed: $(tail -3 "$WORK/out")" >&2; continue; }
    for net in "bw=$rate" "bw=$rate,eager=64K"; do
      scripts/mpirun.sh -np 2 "$BP" train "${MODEL[@]}" "${opts[@]}" --net "$net" --out "$run-$net" >"$WORK/out" 2>&1 ||
        { echo "emulated run $rate $name $net failed: $(tail -3 "$WORK/out")" >&2; continue 2; }
    done
    row=()
    for key in step_ms comm_exposed_ms; do
      row+=("$(median "$run-k/metrics.jsonl" $key)" "$(median "$run-bw=$rate/metrics.jsonl" $key)"
        "$(median "$run-bw=$rate,eager=64K/metrics.jsonl" $key)")
    done
    echo "${row[@]}" | awk -v r="$rate" -v n="$name" -v l="$load" '
      function err(e, k) { return k > 0 ? (e / k - 1) * 100 : 0 }
      { printf "%-8s %-15s %7.1f %7.1f %+5.0f%% %7.1f %+5.0f%% | %7.1f %7.1f %+5.0f%% %7.1f %+5.0f%% | %5s\n",
          r, n, $1, $2, err($2, $1), $3, err($3, $1), $4, $5, err($5, $4), $6, err($6, $4), l }'
  done
done
