#!/usr/bin/env bash
# scripts/cluster.sh's link options: --rate R --dilation K shapes both ends of every
# link to R / K (an emulated device's dilation, docs/manual/devices.md), says so, and
# bad values are refused with one line (exit 2) before anything is made.
source "$(dirname "$0")/lib.sh"

cluster_up 2 --rate 1gbit --dilation 32
grep -q "links 31250000bit (1gbit dilated by 32)" "$WORK/up" || fail "up did not state the dilated rate: $(cat "$WORK/up")"
for end in "-n $BP_CLUSTER-h1 qdisc show dev eth0" "-n $BP_CLUSTER-sw qdisc show dev h1"; do
  # shellcheck disable=SC2086 # the words of the command
  tc $end | grep -q "rate 31250Kbit" || fail "tc $end: not 1 Gbit / 32: $(tc $end)"
done
st=$("$CLUSTER" status)
[[ $st == *"links 31250000bit (1gbit dilated by 32)"* ]] || fail "status: $st"

# refused MESSAGE OPTIONS...: up 2 OPTIONS exits 2 with that one line.
refused_up() {
  local want=$1 out rc=0
  shift
  out=$("$CLUSTER" up 2 "$@" 2>&1) || rc=$?
  [ "$rc" -eq 2 ] || fail "up 2 $*: exit $rc, not 2: $out"
  [ "$out" = "cluster: error: $want" ] || fail "up 2 $*: $out"
}
refused_up "up: --dilation expects an integer >= 1, got '0'" --dilation 0
refused_up "up: --dilation expects an integer >= 1, got '2.5'" --dilation 2.5
refused_up "bad --latency '5' (expected e.g. 50us or 2ms)" --latency 5
refused_up "up: --rate needs a value" --rate

# The hosts share this machine's cores: no rank is bound to one of them (every
# host's daemon bound its first rank to core 0, so all ranks ran on one core).
cluster_up 2
want=$(sed -n 's/^Cpus_allowed_list:\s*//p' /proc/self/status)
got=$("$CLUSTER" mpirun -np 2 sh -c "sed -n 's/^Cpus_allowed_list:\s*//p' /proc/self/status" 2>&1)
[ "$(echo "$got" | sort -u)" = "$want" ] || fail "ranks bound to cores '$got', expected all of '$want' on each"
echo "PASS: cluster.sh links dilated"
