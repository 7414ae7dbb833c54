# shellcheck shell=bash
# Helpers of the cluster tests: hosts made of network namespaces by
# scripts/cluster.sh, bagpipe run across them over TCP, and the same run on the
# loopback to compare with (tests/dp/lib.sh has the models and the comparisons).
# Where namespaces cannot be made (no root, no iproute2, a kernel without them) or
# mpirun is not Open MPI, a test exits 77, which ctest reports as skipped.
source "$(dirname "${BASH_SOURCE[0]}")/../dp/lib.sh"
CLUSTER="${BP_SOURCE_DIR:?set by ctest}/scripts/cluster.sh"
SKIP=77

skip() {
  echo "SKIPPED: $*"
  exit $SKIP
}
$BP_MPIEXEC --version 2>&1 | grep -qE "Open MPI|OpenRTE" || skip "cluster.sh drives Open MPI's launcher; mpirun is not Open MPI"

# One cluster per test process, named after it, so that tests may run at once;
# it goes away when the test ends however it ends (a signal included). Clusters
# of test processes that no longer exist (killed with SIGKILL) are removed first.
export BP_CLUSTER="t$$"
for stale in $(ip netns list 2>/dev/null | sed -nE 's/^t([0-9]+)-sw.*/\1/p'); do
  kill -0 "$stale" 2>/dev/null || BP_CLUSTER="t$stale" "$CLUSTER" down || true
done
trap '"$CLUSTER" down >/dev/null 2>&1 || echo "FAIL: cluster $BP_CLUSTER not removed" >&2; rm -rf "$WORK"' EXIT
trap 'exit 143' TERM INT

# cluster_up N [--rate R]: N hosts, or skip where namespaces cannot be made.
cluster_up() {
  local rc=0
  "$CLUSTER" up "$@" >"$WORK/up" 2>&1 || rc=$?
  [ "$rc" -ne 3 ] || skip "$(cat "$WORK/up")"
  [ "$rc" -eq 0 ] || fail "cluster.sh up $* exited $rc: $(cat "$WORK/up")"
}

# on_cluster W [mpirun options] -- command...: the command on W ranks across the
# hosts (one per host unless the options say otherwise), bounded in time.
on_cluster() {
  local w=$1
  shift
  local opts=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  timeout -k 5 60 "$CLUSTER" mpirun -np "$w" "${opts[@]}" "$@"
}

# link_tx: bytes sent on all hosts' links together.
link_tx() { "$CLUSTER" bytes | awk '{ s += $3 } END { print s }'; }

# bytes_sent FILE: bagpipe's own count over all steps of a metrics log.
bytes_sent() {
  grep '"type":"step"' "$1" | sed -E 's/.*"bytes_sent":([0-9.e+]+).*/\1/' | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# identical NAME FILE_A FILE_B: the same loss, bit for bit, at every step.
identical() { same "$1" "$2" "$3" step loss 0; }
