#!/usr/bin/env bash
# `bagpipe simulate`: --measure writes a profile that --profile reads back to the
# same prediction, for gpt and for mlp; a device description predicts a model of billions of parameters
# without allocating it (in well under a second, in little memory); the bytes of
# an allreduce (of gpt's and of mlp's parameters) and of bytegrad as the runtime
# counts them; an emulated run's hand-overs follow its MPI's eager limit; bad input is one line
# naming the option, exit 2, and no half-written profile.
source "$(dirname "$0")/../lib.sh"
TINY=(--layers 2 --embd 32 --heads 2 --seq-len 16 --batch 8)

# key FILE KEY: the value after KEY (first field)
key() { awk -v k="$2" '$1 == k {print $2}' "$1"; }
# axis FILE KEY AXIS: the value of AXIS=... on the KEY line
axis() { awk -v k="$2" -v a="$3" '$1 == k {for (i = 2; i <= NF; i++) if (index($i, a "=") == 1) print substr($i, length(a) + 2)}' "$1"; }

"$BP" simulate "${TINY[@]}" --pp 2 --micro-batches 2 --measure "$WORK/prof.json" >"$WORK/m" ||
  fail "measure exited $?"
grep -q '"format":"bagpipe-simulate-profile"' "$WORK/prof.json" || fail "profile: $(cat "$WORK/prof.json")"
"$BP" simulate "${TINY[@]}" --pp 2 --micro-batches 2 --profile "$WORK/prof.json" >"$WORK/p" ||
  fail "profile exited $?"
[ "$(key "$WORK/m" step_ms)" = "$(key "$WORK/p" step_ms)" ] ||
  fail "measured $(key "$WORK/m" step_ms) ms, read back $(key "$WORK/p" step_ms) ms"
grep -q "^pipeline: 1f1b, partition [0-9],[0-9], 1 pipeline x 2 micro-batches of 4$" "$WORK/p" ||
  fail "header: $(cat "$WORK/p")"
# A wait's sleep between tests (--comm-poll-us) is in the profile: each hand-over of
# tp 2's blocking allreduces waits one, so a longer one lengthens the step; a profile
# from before the field reads back as blocking waits.
sed 's/"poll_sleep_s":[0-9.e+-]*/"poll_sleep_s":0.001/' "$WORK/prof.json" >"$WORK/slow_poll.json"
sed 's/,"poll_sleep_s":[0-9.e+-]*//' "$WORK/prof.json" >"$WORK/no_poll.json"
grep -q '"poll_sleep_s":0.001' "$WORK/slow_poll.json" && ! grep -q poll_sleep_s "$WORK/no_poll.json" ||
  fail "profile's poll_sleep_s: $(head -c 400 "$WORK/prof.json")"
"$BP" simulate "${TINY[@]}" --tp 2 --profile "$WORK/slow_poll.json" >"$WORK/sp" || fail "slow poll exited $?"
"$BP" simulate "${TINY[@]}" --tp 2 --profile "$WORK/no_poll.json" >"$WORK/np" || fail "no poll exited $?"
awk -v a="$(key "$WORK/np" step_ms)" -v b="$(key "$WORK/sp" step_ms)" 'BEGIN {exit !(b > a + 1)}' ||
  fail "tp 2 with 1 ms poll sleeps: step $(key "$WORK/sp" step_ms) ms, blocking $(key "$WORK/np" step_ms) ms"

# Twice the load, twice the step of one rank (every block, the optimizer).
"$BP" simulate "${TINY[@]}" --profile "$WORK/prof.json" --load 2 >"$WORK/l2"
"$BP" simulate "${TINY[@]}" --profile "$WORK/prof.json" --load 1 >"$WORK/l1"
awk -v a="$(key "$WORK/l1" step_ms)" -v b="$(key "$WORK/l2" step_ms)" \
  'BEGIN {exit !(b > 1.999 * a && b < 2.001 * a)}' || fail "--load 2: step $(key "$WORK/l2" step_ms) vs $(key "$WORK/l1" step_ms)"

# GPT-2 1.5B-sized (48 layers, 1600 channels) on 64 V100-like ranks: no allocation.
BIG=(--layers 48 --embd 1600 --heads 25 --seq-len 1024 --vocab 50257 --batch 512 --dp 16 --pp 4 --micro-batches 8
  --device-flops 125e12 --device-bw 900e9 --efficiency 0.4 --intra bw=300Gbit,lat=5us
  --inter bw=100Gbit,lat=10us --ranks-per-node 8)
/usr/bin/time -f "%e %M" -o "$WORK/time" "$BP" simulate "${BIG[@]}" >"$WORK/big" || fail "big exited $?"
grep -q "; 1558 M parameters)" "$WORK/big" || fail "parameters: $(head -1 "$WORK/big")"
read -r secs kb <"$WORK/time"
awk -v s="$secs" -v k="$kb" 'BEGIN {exit !(s < 5 && k < 200000)}' || fail "big took $secs s, $kb KB"
awk -v p="$(key "$WORK/big" peak_MB)" 'BEGIN {exit !(p > 1000)}' || fail "peak $(key "$WORK/big" peak_MB) MB"

# An allreduce of all P parameters over 4 ranks sends 2 (4-1)/4 x 4P bytes per rank;
# bytegrad a quarter of that plus its headers.
"$BP" simulate "${TINY[@]}" --dp 4 --device-flops 1e12 --device-bw 1e11 >"$WORK/ar"
"$BP" simulate "${TINY[@]}" --dp 4 --dp-algo bytegrad --device-flops 1e12 --device-bw 1e11 >"$WORK/bg"
P=$(( 256 * 32 + 16 * 32 + 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32 ))
awk -v b="$(axis "$WORK/ar" bytes_max dp)" -v p="$P" 'BEGIN {exit !(b == 2 * 3 / 4 * 4 * p)}' ||
  fail "allreduce bytes $(axis "$WORK/ar" bytes_max dp), P $P"
awk -v a="$(axis "$WORK/ar" bytes_total dp)" -v b="$(axis "$WORK/bg" bytes_total dp)" \
  'BEGIN {r = b / a; exit !(r > 0.25 && r < 0.26)}' || fail "bytegrad/allreduce bytes"

# Ranks that outnumber the cores and compute at once (dp, no pipeline) get a fair
# share of them at most: the profile's slowdown is at least ranks / cores.
CPUS=$(getconf _NPROCESSORS_ONLN)
if [ "$CPUS" -lt 60 ]; then
  "$BP" simulate "${TINY[@]}" --dp 4 --busy-threads $(( CPUS + 1 )) --measure "$WORK/share.json" \
    >/dev/null || fail "dp 4 measure exited $?"
  sed 's/.*"slowdown":\([0-9.e+-]*\).*/\1/' "$WORK/share.json" |
    awk -v f="$(( CPUS + 2 ))/$CPUS" '{split(f, q, "/"); exit !($1 >= q[1] / q[2])}' ||
    fail "slowdown with $(( CPUS + 2 )) threads on $CPUS CPUs: $(head -c 400 "$WORK/share.json")"
fi

# The mlp through its own layout: 784-32-32-10 on 2 dp ranks sends its P parameters
# 2 (2-1)/2 x 4P bytes per rank; its profile reads back to the same prediction.
MLP=(--model mlp --hidden 32 --batch 8 --dp 2)
"$BP" simulate "${MLP[@]}" --device-flops 1e12 --device-bw 1e11 >"$WORK/mlp" || fail "mlp exited $?"
grep -q "^bagpipe simulate: mlp (784 inputs, 2 hidden layers of 32, 10 classes" "$WORK/mlp" ||
  fail "mlp header: $(head -1 "$WORK/mlp")"
P=$(( 784 * 32 + 32 + 32 * 32 + 32 + 32 * 10 + 10 ))
awk -v b="$(axis "$WORK/mlp" bytes_max dp)" -v p="$P" 'BEGIN {exit !(b == 4 * p)}' ||
  fail "mlp allreduce bytes $(axis "$WORK/mlp" bytes_max dp), P $P"
"$BP" simulate "${MLP[@]}" --pp 2 --measure "$WORK/mlp.json" >"$WORK/mm" || fail "mlp measure exited $?"
grep -q '"model":"mlp","in_dim":784,"hidden":32,"n_hidden":2,"n_class":10' "$WORK/mlp.json" ||
  fail "mlp profile: $(head -c 300 "$WORK/mlp.json")"
"$BP" simulate "${MLP[@]}" --pp 2 --profile "$WORK/mlp.json" >"$WORK/mp" || fail "mlp profile exited $?"
[ "$(key "$WORK/mm" step_ms)" = "$(key "$WORK/mp" step_ms)" ] ||
  fail "mlp measured $(key "$WORK/mm" step_ms) ms, read back $(key "$WORK/mp" step_ms) ms"

# --help: train's options and simulate's own, each with its default.
"$BP" simulate --help >"$WORK/help"
for opt in measure profile device-flops device-bw efficiency intra inter ranks-per-node vocab dp-algo; do
  grep -qE "^  --$opt .*\(default: " "$WORK/help" || fail "--help: --$opt"
done
if grep '^  --' "$WORK/help" | grep -v '(default: '; then fail "options without a default"; fi

# Bad input: one line naming the option, exit 2.
bad() {
  local pattern=$1 rc=0
  shift
  "$BP" simulate "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "'$*' exited $rc: $(cat "$WORK/err")"
  [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "'$*' printed: $(cat "$WORK/err")"
  grep -qE -- "^bagpipe: error: $pattern" "$WORK/err" || fail "'$*' said: $(cat "$WORK/err")"
  [ ! -s "$WORK/out" ] || fail "'$*' printed on stdout"
}
bad "option --measure, --profile, --device-flops or --device emu:GPU: give exactly one source of computation costs \(0 given\)" "${TINY[@]}"
bad "option --measure, --profile, --device-flops or --device emu:GPU: give exactly one source .*\(2 given\)" \
  "${TINY[@]}" --profile "$WORK/prof.json" --device-flops 1e12 --device-bw 1e11
bad "option --measure, --profile, --device-flops or --device emu:GPU: give exactly one source .*\(2 given\)" \
  "${TINY[@]}" --device emu:h100 --device-flops 1e12 --device-bw 1e11
# An emulated GPU is a target: its data sheet, the rates an emulated run computes at.
"$BP" simulate "${TINY[@]}" --device emu:h100 >"$WORK/emu.txt" || fail "simulate --device emu:h100 failed"
grep -q "^computation: emulated H100-SXM5-80GB 494.5 TFLOP/s, 3350 GB/s at efficiency 0.50" "$WORK/emu.txt" ||
  fail "simulate on emu:h100: $(cat "$WORK/emu.txt")"
bad "option --device-bw: needed with --device-flops" "${TINY[@]}" --device-flops 1e12
bad "option --profile: .*/missing.json" "${TINY[@]}" --profile "$WORK/missing.json"
echo '{"format":"bagpipe-simulate-profile","vocab":256}' >"$WORK/broken.json"
bad "option --profile: .*broken.json is not a profile of bagpipe simulate --measure \(field 'layers' missing or invalid\)" \
  "${TINY[@]}" --profile "$WORK/broken.json"
echo 'not json' >"$WORK/text.json"
bad "option --profile: .*text.json is not JSON" "${TINY[@]}" --profile "$WORK/text.json"
bad "option --net: emulates one network for every link" "${TINY[@]}" --device-flops 1 --device-bw 1 \
  --net bw=1Gbit --intra bw=1Gbit
bad "option --intra: net: bad bw 'fast'" "${TINY[@]}" --device-flops 1 --device-bw 1 --intra bw=fast
echo '{"format":"bagpipe-simulate-profile","model":"rnn"}' >"$WORK/rnn.json"
bad "option --profile: .*rnn.json is not a profile of bagpipe simulate --measure \(field 'model' missing or invalid\)" \
  "${TINY[@]}" --profile "$WORK/rnn.json"
bad "option --qadam-warmup: must be at least 2" "${TINY[@]}" --device-flops 1 \
  --device-bw 1 --dp 2 --dp-algo qadam --qadam-warmup 1
bad "option --efficiency" "${TINY[@]}" --device-flops 1 --device-bw 1 --efficiency 2
# Every value in range, but --dp x --micro-batches beyond an int (was SIGFPE, exit
# 136), and a grid of more ranks than a job may have.
bad "option --batch: 1048576 is not divisible by --dp 65536 x --micro-batches 65536" \
  "${TINY[@]}" --device-flops 1 --device-bw 1 --dp 65536 --micro-batches 65536 --batch 1048576
bad "option --dp: 1048576 replicas x 65536 stages x 1 tp ranks are 68719476736 ranks, more than the 16777216 a job may have" \
  "${TINY[@]}" --device-flops 1 --device-bw 1 --dp 1048576 --pp 65536
# --measure times the CPU: a GPU is described by its rates, not silently ignored.
bad "option --device: simulate measures on the CPU only; for a GPU give its --device-flops and --device-bw" \
  "${TINY[@]}" --device cuda --measure "$WORK/cuda.json"
[ ! -e "$WORK/cuda.json" ] || fail "--device cuda measured"
# A profile that cannot be written (its folder is missing): refused before measuring,
# nothing left behind.
bad "option --measure: cannot write .*nodir/p.json: its folder .*nodir: No such file or directory" \
  "${TINY[@]}" --measure "$WORK/nodir/p.json"
[ ! -e "$WORK/nodir" ] || fail "half-written profile"
# --net with --hierarchical --node-size N: the runtime reduces within groups of N ranks
# first, every link alike, so the prediction is not plain allreduce's; the hierarchical
# one is what --intra and --inter with that network predict.
H=(--device emu:a100 --dp 4 --bucket-mb 4 --steps 12)
"$BP" simulate "${H[@]}" --net bw=10Gbit,lat=50us >"$WORK/flat" || fail "flat exited $?"
"$BP" simulate "${H[@]}" --net bw=10Gbit,lat=50us --hierarchical --node-size 2 >"$WORK/hier" || fail "hier exited $?"
"$BP" simulate "${H[@]}" --intra bw=10Gbit,lat=50us --inter bw=10Gbit,lat=50us --ranks-per-node 2 \
  --hierarchical --node-size 2 >"$WORK/levels" || fail "levels exited $?"
[ "$(key "$WORK/hier" step_ms)" != "$(key "$WORK/flat" step_ms)" ] || fail "hierarchical ignored with --net: $(key "$WORK/hier" step_ms) ms"
[ "$(key "$WORK/hier" step_ms)" = "$(key "$WORK/levels" step_ms)" ] ||
  fail "--net hierarchical $(key "$WORK/hier" step_ms) ms, levels $(key "$WORK/levels" step_ms) ms"
# --mpi-eager-bytes: tp 2's allreduces of 256 KiB of activations on an emulated device
# take one hand-over per message where the run's MPI sends them eagerly, a rendezvous's
# three at Open MPI's default 64 KiB limit (the emulated studies raise it).
E=(--device emu:a100 --layers 2 --embd 128 --heads 2 --seq-len 64 --batch 16 --tp 2 --steps 12)
"$BP" simulate "${E[@]}" >"$WORK/rndv" || fail "default eager limit exited $?"
"$BP" simulate "${E[@]}" --mpi-eager-bytes 33554432 >"$WORK/eager" || fail "--mpi-eager-bytes exited $?"
awk -v r="$(axis "$WORK/rndv" exposed_ms tp)" -v e="$(axis "$WORK/eager" exposed_ms tp)" \
  'BEGIN { exit !(e > 0 && e < r / 2) }' ||
  fail "tp exposed $(axis "$WORK/eager" exposed_ms tp) ms sent eagerly, $(axis "$WORK/rndv" exposed_ms tp) ms by rendezvous"
bad "option --mpi-eager-bytes: 0 is out of range" "${E[@]}" --mpi-eager-bytes 0
# decentralized's peer is in the other half of the ranks, so with 2 ranks per node the
# two of a node exchange at once over its link between nodes: the exposed exchange
# (step-first order) takes twice as long as with one rank per node at that rate.
D=(--device emu:v100 --layers 2 --embd 128 --heads 2 --seq-len 64 --batch 16 --dp 4 --steps 12
  --dp-algo decentralized --peers shift_one --decentralized-order step-first
  --intra bw=1000Gbit,lat=5us --inter bw=1Gbit,lat=5us)
"$BP" simulate "${D[@]}" --ranks-per-node 1 >"$WORK/peer1" || fail "peer, 1 per node exited $?"
"$BP" simulate "${D[@]}" --ranks-per-node 2 >"$WORK/peer2" || fail "peer, 2 per node exited $?"
awk -v a="$(axis "$WORK/peer1" exposed_ms dp)" -v b="$(axis "$WORK/peer2" exposed_ms dp)" \
  'BEGIN { exit !(a > 0 && b > 1.8 * a && b < 2.2 * a) }' ||
  fail "peer exchange exposed $(axis "$WORK/peer1" exposed_ms dp) ms at 1 rank per node, $(axis "$WORK/peer2" exposed_ms dp) ms at 2"

echo "simulate_cli: ok"

