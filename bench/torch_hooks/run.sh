#!/usr/bin/env bash
# bench/torch_hooks: PyTorch's DDP hooks against bagpipe.torch's algorithms on 2
# hosts made of network namespaces (scripts/cluster.sh, cluster $BP_CLUSTER, default
# "py"), every link shaped by tbf, one rank per host: train.py for each model,
# algorithm and repeat at each rate (the runs of one rate one after another,
# repeat by repeat, so that the load falls alike on every algorithm), then
# summarize.py. Root; needs build/python (scripts/build.sh).
#   bench/torch_hooks/run.sh [RATE...]        default: 1gbit 100mbit
# MODELS (default: cnn gpt; mlp too), REPEATS (3), STEPS (12), OUT
# (bench/results/torch_hooks) and ALGOS (all twelve of train.py) override; the
# batch is 32 images (cnn), 16 (mlp) or 8 windows of 64 bytes (gpt).
set -euo pipefail
cd "$(dirname "$0")/../.."
export BP_CLUSTER=${BP_CLUSTER:-py}
out=${OUT:-bench/results/torch_hooks}
steps=${STEPS:-12}
repeats=${REPEATS:-3}
models=(${MODELS:-cnn gpt})
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(1gbit 100mbit)
[ -d build/python/bagpipe ] || { echo "run.sh: build/python is missing: run scripts/build.sh" >&2; exit 2; }
mkdir -p "$out"
text=$(realpath "$out")/kjv.txt
[ -s "$text" ] || bible "Gen1:1-Rev22:21" >"$text"
declare -A batch=([mlp]=16 [cnn]=32 [gpt]=8)
trap 'scripts/cluster.sh down' EXIT
for rate in "${rates[@]}"; do
  scripts/cluster.sh up 2 --rate "$rate"
  for rep in $(seq 1 "$repeats"); do
    for model in "${models[@]}"; do
      for algo in ${ALGOS:-ddp fp16 torch-powersgd bytegrad powersgd decentralized allreduce qadam lp-decentralized async easgd local}; do
        f="$out/$rate-$model-$algo.$rep"
        echo "torch_hooks: $rate $model $algo repeat $rep"
        uptime >"$f.load"
        scripts/cluster.sh mpirun -np 2 --npernode 1 -x PYTHONPATH="$PWD/build/python" \
          -x MASTER_ADDR=10.250.14.1 -x GLOO_SOCKET_IFNAME=eth0 -x OMP_NUM_THREADS=1 \
          /usr/bin/python3 bench/torch_hooks/train.py --algo "$algo" --model "$model" \
          --text "$text" --steps "$steps" --batch "${batch[$model]}" \
          >"$f.jsonl" || echo "torch_hooks: $rate $model $algo failed (see above)" >&2
        uptime >>"$f.load"
      done
    done
  done
  scripts/cluster.sh down
done
/usr/bin/python3 bench/torch_hooks/summarize.py "$out" "${rates[@]}"
