#!/usr/bin/env bash
# `bagpipe plan --device emu:GPU --cluster ...`: a plan for an emulated cluster ranks
# from the emulated device's costs, the ones `bagpipe simulate --device emu:GPU` predicts
# such a run with (the data sheet's rates in the run's dtype, each message's fixed cost,
# the waiting ranks' polls, MPI's eager limit), so every configuration's step is simulate's on the same
# links; the refusals (an unknown GPU, the data sheet's keys given again, an emulated
# device without --cluster, bf16 on a GPU without it) are one line and exit 2.
source "$(dirname "$0")/lib.sh"
NET=bw=1Gbit,lat=1ms
CL=nodes=4,per-node=1,intra-bw=1Gbit,intra-lat=1ms,inter-bw=1Gbit,inter-lat=1ms
M=(--layers 2 --embd 64 --heads 2 --seq-len 32 --batch 32 --steps 1000)

bad "option --device: no data sheet of a GPU called 'k80'" --device emu:k80 --cluster "$CL"
bad "option --cluster: gpu comes from --device emu:v100's data sheet; leave it out" \
  --device emu:v100 --cluster "$CL,gpu=v100"
bad "option --cluster: flops comes from --device emu:a100's data sheet" --device emu:a100 --cluster "$CL,flops=1e12"
bad "option --device emu:v100: plan an emulated device with --cluster" --device emu:v100
bad "option --dtype bf16: the V100-SXM2-32GB computes no bf16" --device emu:v100 --dtype bf16 --cluster "$CL"

# the second also with the runs' MPI eager limit raised, which both must honour, on
# links fast enough that a message's hand-overs, not the wire, set its time
for dev in "emu:v100" "emu:a100 --dtype bf16 --mpi-eager-bytes 33554432"; do
  case $dev in
  *eager*) NET=bw=100Gbit,lat=5us CL=nodes=4,per-node=1,intra-bw=100Gbit,intra-lat=5us,inter-bw=100Gbit,inter-lat=5us ;;
  esac
  # shellcheck disable=SC2086 # the device and its dtype
  "$BP" plan --device $dev --dilation 16 --cluster "$CL" "${M[@]}" --json "$WORK/p.json" >"$WORK/p" ||
    fail "plan --device $dev exited $?"
  grep -qi "^computation: emulated ${dev:4:4}-" "$WORK/p" ||
    fail "plan --device $dev: computation line: $(sed -n 3p "$WORK/p")"
  # simulate's step of each of a few configurations, plan's step of the same
  python3 - "$WORK/p.json" >"$WORK/cands" <<'PY'
import json, sys
fits = [k for k in json.load(open(sys.argv[1]))["ranking"] if k["verdict"] == "fits"]
# steady-state configurations (simulate predicts after a warm-up; plan the run's mean)
pick = [k for k in fits if k["algo"] not in ("qadam",) and "--sc-stages" not in k["args"]]
kinds = {}
for k in pick:
    kinds.setdefault((k["algo"], k["pp"] > 1), k)
for k in list(kinds.values())[:6]:
    print(k["step_s"] * 1e3, k["args"])
PY
  [ "$(wc -l <"$WORK/cands")" -ge 4 ] || fail "plan --device $dev: too few configurations: $(cat "$WORK/cands")"
  while read -r ms args; do
    # shellcheck disable=SC2086 # the configuration's options
    sim=$("$BP" simulate --device $dev --dilation 16 "${M[@]}" $args --intra "$NET" --inter "$NET" \
      --ranks-per-node 1 | awk '$1 == "step_ms" {print $2}') || fail "simulate $args exited $?"
    awk -v a="$ms" -v b="$sim" 'BEGIN {exit !(b > 0 && (a - b) / b < 1e-4 && (b - a) / b < 1e-4)}' ||
      fail "plan --device $dev: $args: plan's step $ms ms, simulate's $sim ms"
  done <"$WORK/cands"
done
echo ok
