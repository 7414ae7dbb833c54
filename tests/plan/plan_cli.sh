#!/usr/bin/env bash
# `bagpipe plan`: bad options are one line and exit 2; the ranking's JSON holds what
# it says (sorted by time to the loss, that time is steps x factor x step, the fits
# fit the memory, every grid uses the world, the dropped counts match, the printed
# top is the JSON's head); the first printed command is accepted and run by `bagpipe
# train`; in --cluster mode, less
# bandwidth favours low precision and more latency favours decentralization. mlp
# alike, with only the configurations train takes for it (no tp, no more stages than
# blocks, no fused embedding sync) and the table's factors said to be gpt's.
source "$(dirname "$0")/lib.sh"
MLP=(--model mlp --hidden 32 --batch 16 --steps 20)

bad "option --dp: bagpipe plan chooses it; leave it out" --dp 2
bad "option --dp-algo: bagpipe plan chooses it" --dp-algo=bytegrad
bad "option --cluster: 'foo' is not key=value" --cluster foo
bad "option --cluster: nodes and per-node are needed" --cluster flops=1e12,mem-bw=1e11
bad "option --cluster: unknown key 'gpus'" --cluster gpus=8
bad "option --cluster: flops and mem-bw are needed" --cluster nodes=2,per-node=2
bad "option --cluster: gpu=tpu9 is not a GPU of a data sheet \(v100, a100, h100, h200\)" --cluster nodes=2,per-node=2,gpu=tpu9
bad "option --cluster: flops=fast is not a positive number" --cluster nodes=2,per-node=2,flops=fast
bad "option --cluster: intra" --cluster nodes=2,per-node=2,flops=1e12,mem-bw=1e11,intra-bw=fast,intra-lat=1us,inter-bw=1Gbit,inter-lat=1ms
bad "option --top" --top 0
bad "option --vocab: a vocabulary of tokens; this model reads none" --model mlp --vocab 50257
bad "option --trials: runs on the job's ranks, not with --cluster" --trials 10 --cluster nodes=2,per-node=1,flops=1e12,mem-bw=1e11,intra-bw=1Gbit,intra-lat=1us,inter-bw=1Gbit,inter-lat=1ms

# The JSON's invariants, and the printed top against it.
check_json() { # FILE STDOUT WORLD
  python3 - "$1" "$2" "$3" <<'PY' || fail "JSON invariants: $1"
import json, sys
d = json.load(open(sys.argv[1])); world = int(sys.argv[3])
assert d["format"] == "bagpipe-plan" and d["world"] == world, d["world"]
r = d["ranking"]; fits = [k for k in r if k["verdict"] == "fits"]
assert fits, "nothing fits"
assert r[:len(fits)] == fits, "a dropped configuration ranks above one that fits"
t = [k["time_to_loss_s"] for k in fits]
assert t == sorted(t), "not sorted by time to the loss"
for k in fits:
    assert abs(k["time_to_loss_s"] - d["steps"] * k["steps_factor"] * k["step_s"]) <= 1e-4 * k["time_to_loss_s"], k
    assert k["peak_MB"] <= d["mem_cap_MB"], k
    assert k["efficiency_source"], k
    assert " train " in k["command"] and k["args"] in k["command"], k
for k in r:
    assert k["dp"] * k["pp"] * k["tp"] == world, k
    assert "--dp %d --pp %d --tp %d " % (k["dp"], k["pp"], k["tp"]) in k["args"] + " ", k
drop = d["dropped"]
assert drop["refused"] == sum(k["verdict"] == "refused by train" for k in r)
assert drop["memory"] == sum(k["verdict"] == "over the memory" for k in r)
assert drop["diverges"] == sum(k["verdict"] == "averaging diverges" for k in r)
printed = [l.split(None, 5)[5].strip() for l in open(sys.argv[2]) if l[:4].strip().isdigit()]
assert printed == [k["args"] for k in fits[:len(printed)]] and 0 < len(printed) <= 10, printed
PY
}

# Measured: 2 ranks of this machine.
launch 2 "$BP" plan "${TINY[@]}" --json "$WORK/m.json" >"$WORK/m" 2>"$WORK/m.err" ||
  fail "measured plan exited $?: $(cat "$WORK/m.err")"
grep -q "^network: measured in .* over 1 pairs" "$WORK/m" || fail "network line: $(cat "$WORK/m")"
check_json "$WORK/m.json" "$WORK/m" 2
python3 -c "
import json; d = json.load(open('$WORK/m.json'))
p = d['network']['pairs']; assert len(p) == 1 and p[0]['lat_s'] > 0 and p[0]['bw_bps'] > 0, p" ||
  fail "pairs: $(head -c 600 "$WORK/m.json")"

# The first printed command, as printed, trains (a few steps, somewhere of its own).
first_trains() { # PLAN_STDOUT
  local cmd words
  cmd=$(awk '/^ +mpirun -np 2 /{print; exit}' "$1")
  [ -n "$cmd" ] || fail "no command printed: $(cat "$1")"
  read -ra words <<<"${cmd#*mpirun -np 2 }"
  launch 2 "${words[@]}" --steps 3 --eval-every 0 --progress none --overwrite --out "$WORK/run" \
    >"$WORK/run.out" 2>&1 || fail "train refused the printed command ($cmd): $(tail -3 "$WORK/run.out")"
  grep -q "^done: 3 steps" "$WORK/run.out" || fail "train: $(tail -3 "$WORK/run.out")"
}
first_trains "$WORK/m"
python3 - "$WORK/m.json" <<'PY' || fail "gpt's factors: $(head -c 600 "$WORK/m.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["model"] == "gpt", d["model"]
for k in d["ranking"]:
    assert k["efficiency_model"] in ("gpt", None), k
    assert "not measured on" not in k["efficiency_source"], k
PY

# mlp, measured on 2 ranks: its own header, only what train takes, every factor
# measured on mlp (docs/results/mlp_convergence), the first command trains.
launch 2 "$BP" plan "${MLP[@]}" --json "$WORK/mlp.json" >"$WORK/mlp" 2>"$WORK/mlp.err" ||
  fail "plan --model mlp exited $?: $(cat "$WORK/mlp.err")"
grep -q "^bagpipe plan: mlp (3 blocks" "$WORK/mlp" || fail "mlp header: $(head -1 "$WORK/mlp")"
if grep -q "not measured on" "$WORK/mlp"; then fail "mlp borrowed a factor: $(cat "$WORK/mlp")"; fi
check_json "$WORK/mlp.json" "$WORK/mlp" 2
# check_mlp FILE: what plan may choose for mlp (3 blocks, no tied tensor, no tp); a
# factor is mlp's own or says it is gpt's
check_mlp() {
  python3 - "$1" <<'PY' || fail "mlp ranking: $(head -c 800 "$1")"
import json, sys
d = json.load(open(sys.argv[1])); r = d["ranking"]
assert d["model"] == "mlp" and d["dropped"]["refused"] == 0, d["dropped"]
assert all(k["tp"] == 1 and k["pp"] <= 3 and not k["fe"] for k in r), r
assert {k["pp"] for k in r} >= {1, 2}, "no pipeline"
for k in r:
    if k["trialled"] or k["efficiency_model"] is None:
        continue
    own = k["efficiency_model"] == "mlp"
    assert own == k["efficiency_source"].startswith("docs/results/mlp_convergence"), k
    assert own or k["efficiency_source"].startswith("gpt's, not measured on mlp: "), k
PY
}
check_mlp "$WORK/mlp.json"
python3 - "$WORK/mlp.json" <<'PY' || fail "mlp's own factors: $(head -c 800 "$WORK/mlp.json")"
import json, sys
r = json.load(open(sys.argv[1]))["ranking"]
assert all(k["efficiency_model"] == "mlp" for k in r if k["dp"] > 1 or k["pipelines"]), r
PY
first_trains "$WORK/mlp"

# --trials: the leading kinds trained here, at most --trial-kinds, none of one replica
# alone; allreduce's factor is 1 by definition, the others' are their own steps to the
# loss over allreduce's.
LAUNCH_TIMEOUT=240 launch 2 "$BP" plan "${TINY[@]}" --trials 20 --trial-kinds 4 --json "$WORK/t.json" >"$WORK/t" 2>"$WORK/t.err" ||
  fail "plan --trials exited $?: $(cat "$WORK/t.err")"
grep -q "^statistical efficiency: --trials, 20 steps" "$WORK/t" || fail "trials line: $(cat "$WORK/t")"
check_json "$WORK/t.json" "$WORK/t" 2
python3 - "$WORK/t.json" <<'PY' || fail "trials: $(head -c 800 "$WORK/t.json")"
import json, sys
d = json.load(open(sys.argv[1])); r = d["ranking"]
assert d["efficiency"] == "trials"
ar = [k for k in r if k["trialled"] and k["algo"] == "allreduce" and k["dp"] == 2 and not k["sc"]]
assert ar and all(k["steps_factor"] == 1 for k in ar), ar
tried = {k["algo"] for k in r if k["trialled"]}
assert len(tried) >= 2, tried
kinds = {(k["algo"], k["dp"], k["pipelines"], k["sc"], k["cb"], k["fe"]) for k in r if k["trialled"]}
assert len(kinds) <= 4 and all(k[1] > 1 or k[2] or any(k[3:]) for k in kinds), kinds
assert all(k["efficiency_source"].startswith("trial of 20 steps") for k in r if k["trialled"])
assert all(not k["efficiency_source"].startswith("trial") for k in r if not k["trialled"])
PY

# Every kind trialled (--trial-kinds above their number): async, whose updates depend
# on when its thread's transfers land, three times, its factor their median; every
# other kind once.
LAUNCH_TIMEOUT=240 launch 2 "$BP" plan "${TINY[@]}" --trials 20 --trial-kinds 32 --json "$WORK/all.json" >"$WORK/all" 2>"$WORK/all.err" ||
  fail "plan --trials --trial-kinds 32 exited $?: $(cat "$WORK/all.err")"
python3 - "$WORK/all.json" <<'PY' || fail "timing-dependent trials: $(ls "$WORK/all.json.trials")"
import json, os, re, sys
path = sys.argv[1]; r = json.load(open(path))["ranking"]
kinds = sorted({k["efficiency_source"] for k in r if k["trialled"]})
asy = {k["efficiency_source"] for k in r if k["trialled"] and k["algo"] == "async"}
assert len(asy) == 1, asy
n = r"(\d+|inf)"
m = re.search(rf": {n} steps to loss .* \(the median of 3 trials, {n}, {n}, {n}: its updates depend on timing\)$", asy.pop())
assert m, kinds
each = sorted(float(x) for x in m.groups()[1:])
assert float(m.group(1)) == each[1], m.group(0)
others = [k for k in r if k["trialled"] and k["algo"] != "async"]
assert others and not any("median" in k["efficiency_source"] for k in others), others[:2]
dirs = os.listdir(path + ".trials")
repeats = sorted(d for d in dirs if "." in d)
assert len(repeats) == 2 and repeats[0].split(".")[0] == repeats[1].split(".")[0], dirs
PY

# --factors: those trials' factors, kind by kind (algorithm, replicas, AvgPipe's N,
# Optimus-CC's flags), in a plan of a described cluster of as many ranks; the file
# must be a ranking of the same model holding trialled factors.
"$BP" plan "${TINY[@]}" --factors "$WORK/t.json" --json "$WORK/f.json" \
  --cluster nodes=2,per-node=1,flops=1e12,mem-bw=1e11,intra-bw=1Gbit,intra-lat=1us,inter-bw=1Gbit,inter-lat=1ms \
  >"$WORK/f" || fail "plan --factors exited $?"
grep -q "^statistical efficiency: --factors $WORK/t.json, [0-9]* kinds an earlier --trials measured" "$WORK/f" ||
  fail "factors line: $(sed -n 4p "$WORK/f")"
check_json "$WORK/f.json" "$WORK/f" 2
python3 - "$WORK/t.json" "$WORK/f.json" <<'PY' || fail "factors: $(head -c 800 "$WORK/f.json")"
import json, sys
t, f = (json.load(open(p)) for p in sys.argv[1:])
kind = lambda k: (k["algo"], k["dp"], k["pipelines"], k["sc"], k["cb"], k["fe"])
tried = {kind(k): k["steps_factor"] for k in t["ranking"] if k["trialled"]}
assert f["efficiency"] == "factors"
for k in f["ranking"]:
    assert k["trialled"] == (kind(k) in tried), k
    if k["trialled"]:
        assert k["steps_factor"] == tried[kind(k)] and k["efficiency_source"].startswith(sys.argv[1] + ": trial of 20 steps"), k
assert sum(k["trialled"] for k in f["ranking"]) >= 2
PY
bad "option --factors: cannot open $WORK/none.json" --factors "$WORK/none.json"
bad "option --factors: $WORK/t is not JSON" --factors "$WORK/t"
bad "option --factors: $WORK/m.json holds no factor measured by --trials" --factors "$WORK/m.json"
bad "option --factors: $WORK/f.json planned another model" --model mlp --factors "$WORK/f.json"
bad "option --factors: takes an earlier --trials' factors; not with --trials" --factors "$WORK/t.json" --trials 5

# mlp with --trials: its own factors measured here, the untried ones still gpt's.
LAUNCH_TIMEOUT=240 launch 2 "$BP" plan "${MLP[@]}" --trials 20 --json "$WORK/mt.json" >"$WORK/mt" 2>"$WORK/mt.err" ||
  fail "plan --model mlp --trials exited $?: $(cat "$WORK/mt.err")"
check_json "$WORK/mt.json" "$WORK/mt" 2
check_mlp "$WORK/mt.json"
python3 - "$WORK/mt.json" <<'PY' || fail "mlp trials: $(head -c 800 "$WORK/mt.json")"
import json, sys
r = json.load(open(sys.argv[1]))["ranking"]
ar = [k for k in r if k["trialled"] and k["algo"] == "allreduce" and k["dp"] == 2]
assert ar and all(k["steps_factor"] == 1 for k in ar), ar
assert len({k["algo"] for k in r if k["trialled"]}) >= 2
assert all(k["efficiency_source"].startswith("trial of 20 steps") for k in r if k["trialled"])
PY

# mlp on 8 ranks of a described cluster: 2 stages with Optimus-CC's SC and CB (its
# activation gradients shrink at CB's rank) but no fused embedding sync, 3 stages at
# most, no tp; with AdamW, qadam, never measured on mlp, takes gpt's factor and says so.
"$BP" plan --model mlp --batch 256 --steps 100 --optim adamw \
  --cluster nodes=2,per-node=4,intra-bw=100Gbit,intra-lat=1us,inter-bw=1Gbit,inter-lat=1ms,flops=2e12,mem-bw=2e11 \
  --json "$WORK/mc.json" >"$WORK/mc" || fail "mlp --cluster exited $?"
check_json "$WORK/mc.json" "$WORK/mc" 8
check_mlp "$WORK/mc.json"
grep -qE "^statistical efficiency: .*; [0-9]+ configurations take gpt's factor, not measured on mlp" "$WORK/mc" ||
  fail "mlp cluster's efficiency line: $(sed -n 4p "$WORK/mc")"
python3 - "$WORK/mc.json" <<'PY' || fail "mlp cluster: $(head -c 800 "$WORK/mc.json")"
import json, sys
r = json.load(open(sys.argv[1]))["ranking"]
assert any(k["sc"] for k in r) and any(k["cb"] for k in r), "no Optimus-CC"
assert any(k["pipelines"] for k in r), "no AvgPipe"
qadam = [k for k in r if k["algo"] == "qadam"]
assert qadam and all(k["efficiency_model"] == "gpt" for k in qadam), qadam
assert all(k["efficiency_model"] == "mlp" for k in r if k["algo"] not in ("qadam",) and k["dp"] > 1), r
PY

# --cluster: one rank per node, so that every dp byte crosses the network; 2 nodes,
# as our Bagua study (docs/results/bagua_tradeoff) ran (with 8, the per-step agreement
# over all ranks, 2 (p - 1) latencies, weighs on every algorithm alike).
cluster() { # INTER_BW INTER_LAT OUT
  "$BP" plan "${TINY[@]}" --layers 4 --embd 128 --heads 4 --seq-len 64 --batch 64 \
    --cluster "nodes=2,per-node=1,intra-bw=100Gbit,intra-lat=1us,inter-bw=$1,inter-lat=$2,flops=2e12,mem-bw=2e11" \
    --json "$3.json" >"$3" || fail "cluster $1 $2 exited $?"
  check_json "$3.json" "$3" 2
}
# best FILE ALGOS...: the least time to the loss among data-parallel configurations
# (pp 1, tp 1, no Optimus-CC) of those algorithms
best() {
  python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); algos = sys.argv[2:]
print(min(k["time_to_loss_s"] for k in d["ranking"] if k["verdict"] == "fits" and k["algo"] in algos
          and k["pp"] == 1 and k["tp"] == 1 and not k["sc"]))
PY
}
cluster 10Gbit 10us "$WORK/fast"
cluster 100Mbit 10us "$WORK/thin"
cluster 10Gbit 5ms "$WORK/far"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
low_fast=$(ratio "$(best "$WORK/fast.json" allreduce)" "$(best "$WORK/fast.json" bytegrad qadam powersgd lp-decentralized)")
low_thin=$(ratio "$(best "$WORK/thin.json" allreduce)" "$(best "$WORK/thin.json" bytegrad qadam powersgd lp-decentralized)")
dec_fast=$(ratio "$(best "$WORK/fast.json" allreduce)" "$(best "$WORK/fast.json" decentralized lp-decentralized)")
dec_far=$(ratio "$(best "$WORK/far.json" allreduce)" "$(best "$WORK/far.json" decentralized lp-decentralized)")
awk -v a="$low_fast" -v b="$low_thin" 'BEGIN {exit !(b > a && b > 1)}' ||
  fail "low precision over allreduce: $low_fast at 10 Gbit, $low_thin at 100 Mbit"
awk -v a="$dec_fast" -v b="$dec_far" 'BEGIN {exit !(b > a && b > 1)}' ||
  fail "decentralized over allreduce: $dec_fast at 10 us, $dec_far at 5 ms"
first=$(awk '$1 == 1 {print; exit}' "$WORK/thin")
echo "$first" | grep -qE "bytegrad|qadam|powersgd|lp-decentralized|async|sc-stages|diloco" ||
  fail "first pick at 100 Mbit is not of low precision, asynchronous or DiLoCo's: $first"

# 1024 workers of a GPT-2-sized model.
"$BP" plan --layers 48 --embd 1600 --heads 25 --seq-len 1024 --vocab 50257 --batch 1024 \
  --cluster nodes=128,per-node=8,intra-bw=300Gbit,intra-lat=5us,inter-bw=100Gbit,inter-lat=10us,flops=125e12,mem-bw=900e9,mem=32GiB \
  --json "$WORK/big.json" >"$WORK/big" || fail "1024 workers exited $?"
check_json "$WORK/big.json" "$WORK/big" 1024
echo "plan_cli: ok"
