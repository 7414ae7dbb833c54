#!/usr/bin/env bash
# bench/torch_hooks: PyTorch's DDP hooks against bagpipe.torch's algorithms on 2
# hosts made of network namespaces (scripts/cluster.sh, cluster "py"), every link
# shaped by tbf, one rank per host: train.py for each algorithm at each rate, side
# by side (the algorithms of one rate one after another), then summarize.py.
# Root; needs build/python (scripts/build.sh).
#   bench/torch_hooks/run.sh [RATE...]        default: 1gbit 100mbit
# STEPS (default 24), BATCH (16), OUT (bench/results/torch_hooks) and ALGOS (all
# twelve of train.py) override.
set -euo pipefail
cd "$(dirname "$0")/../.."
export BP_CLUSTER=${BP_CLUSTER:-py}
out=${OUT:-bench/results/torch_hooks}
steps=${STEPS:-24}
batch=${BATCH:-16}
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(1gbit 100mbit)
[ -d build/python/bagpipe ] || { echo "run.sh: build/python is missing: run scripts/build.sh" >&2; exit 2; }
mkdir -p "$out"
trap 'scripts/cluster.sh down' EXIT
for rate in "${rates[@]}"; do
  scripts/cluster.sh up 2 --rate "$rate"
  for algo in ${ALGOS:-ddp fp16 torch-powersgd bytegrad powersgd decentralized allreduce qadam lp-decentralized async easgd local}; do
    echo "torch_hooks: $rate $algo"
    uptime >"$out/$rate-$algo.load"
    scripts/cluster.sh mpirun -np 2 --npernode 1 -x PYTHONPATH="$PWD/build/python" \
      -x MASTER_ADDR=10.250.14.1 -x GLOO_SOCKET_IFNAME=eth0 -x OMP_NUM_THREADS=1 \
      /usr/bin/python3 bench/torch_hooks/train.py --algo "$algo" --steps "$steps" --batch "$batch" \
      >"$out/$rate-$algo.jsonl" || echo "torch_hooks: $rate $algo failed (see above)" >&2
    uptime >>"$out/$rate-$algo.load"
  done
  scripts/cluster.sh down
done
/usr/bin/python3 bench/torch_hooks/summarize.py "$out" "${rates[@]}"
