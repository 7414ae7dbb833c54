#!/usr/bin/env bash
# Every study of experiments/, one after the other (each regenerates its page under
# docs/results/ and docs/RESULTS.md); about two hours and a quarter with 2 cores to
# itself (the last three, on emulated GPUs, need network namespaces: root). A study that
# fails stops the rest and leaves the pages of the earlier ones in place.
set -euo pipefail
cd "$(dirname "$0")"
for study in bagua_convergence mlp_convergence bagua_tradeoff avgpipe occ_ablation occ_slow_network sim_validation plan_validation plan_cluster diloco \
  avgpipe_emu occ_emu bagua_emu; do
  "./$study.sh"
done
../bench/simulate/scale.sh >/dev/null
