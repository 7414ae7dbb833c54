#!/usr/bin/env bash
# A cluster of N hosts on this one machine, each a Linux network namespace with its
# own address, hostname and a link to one switch, so that `mpirun --hostfile` starts
# ranks on those hosts as it would over ssh and every byte between hosts crosses a
# real TCP connection through the kernel, shaped to a link rate by tbf.
#
#   scripts/cluster.sh up N [--rate R] [--latency L] [--dilation K]
#                                         N hosts (N >= 1), every link shaped to R
#                                         in both directions (tc rate, e.g. 100mbit,
#                                         1gbit; default: not shaped), and L of
#                                         one-way latency between hosts (50us, 2ms;
#                                         a netem delay where each host sends);
#                                         --dilation K (an integer, the emulated
#                                         device's --dilation): the links K times
#                                         slower, rate / K and latency x K, so that
#                                         they keep their ratio to the device's
#                                         dilated time (docs/manual/devices.md)
#   scripts/cluster.sh mpirun ARGS...     mpirun with the hostfile, the launcher and
#                                         the interface flags filled in; ARGS are
#                                         mpirun's (-np W [--npernode K] CMD...)
#   scripts/cluster.sh exec H CMD...      CMD inside host H (0..N-1)
#   scripts/cluster.sh bytes              bytes each host sent and received on its link
#   scripts/cluster.sh link H up|down     cut or restore host H's link
#   scripts/cluster.sh status             the hosts, addresses, shaping
#   scripts/cluster.sh down               remove everything `up` made
#
# Layout: namespace <name>-sw holds a bridge (the switch) with one port h<i> per
# host; namespace <name>-h<i> holds eth0 (10.250.14.<i+1>/24, the other end of that
# port) and lo. Shaping is a tbf on the egress of both ends of each link: eth0 shapes
# what the host sends, the switch port what it receives. mpirun itself runs inside
# host 0, so nothing is added to this machine's own network, and the addresses exist
# only inside these namespaces. Each process started in a host gets its own UTS
# namespace with hostname <name>-h<i>, so Open MPI and anything that asks for the
# host name see N different hosts.
#
# BP_CLUSTER=<name> (default bpc, at most 8 characters) names one cluster, so that
# several can exist at once; everything of it is under /tmp/bp-cluster-<name>/ and
# in namespaces called <name>-*. Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); where
# namespaces cannot be made, `up` says so and exits 3 (tests then report skipped).
# shellcheck disable=SC2015,SC2016,SC2054 # a && b || die; sh -c scripts; mpirun flags with commas
set -euo pipefail

NAME=${BP_CLUSTER:-bpc}
[[ $NAME =~ ^[a-z][a-z0-9]{0,7}$ ]] || { echo "cluster: error: BP_CLUSTER='$NAME' must be 1-8 lowercase letters or digits" >&2; exit 2; }
STATE=/tmp/bp-cluster-$NAME
SUBNET=10.250.14
SW=$NAME-sw
MAX_HOSTS=32

die() { echo "cluster: error: $1" >&2; exit "${2:-1}"; }
host_ns() { echo "$NAME-h$1"; }
host_addr() { echo "$SUBNET.$(($1 + 1))"; }
hosts() { cat "$STATE/hosts" 2>/dev/null || echo 0; }
need_up() { [ -f "$STATE/hosts" ] || die "no cluster '$NAME' (run: scripts/cluster.sh up N)"; }

# Every namespace of this cluster, whether or not `up` finished.
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NAME-(sw|h[0-9]+)$" || true; }

down() {
  local ns pid
  for ns in $(our_namespaces); do
    # Processes left inside a host (a job that outlived its mpirun) go first: a
    # namespace is only gone once no process holds it.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  done
  for ns in $(our_namespaces); do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$STATE"
  [ -z "$(our_namespaces)" ] || die "could not remove namespaces: $(our_namespaces | tr '\n' ' ')"
}

# tbf on the egress of one end of a link. The bucket holds 2 ms of traffic (at
# least 16 KiB, so that a 64 KiB TSO segment is split rather than dropped) and the
# queue 20 ms, about what a switch port buffers.
shape() {
  local ns=$1 dev=$2 rate=$3 bps
  bps=$(rate_bps "$rate")
  local burst=$((bps / 8 / 500))
  [ "$burst" -ge 16384 ] || burst=16384
  tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 20ms
}

# What a host sends: tbf at the rate, or netem with the delay (and the rate) where
# there is a latency. netem's queue holds about 20 ms at the rate, as tbf's does.
shape_host() {
  local ns=$1 bps=$2 lat_us=$3
  if [ "$lat_us" -eq 0 ]; then
    shape "$ns" eth0 "${bps}bit"
    return
  fi
  local rate_args=() limit=1000
  if [ "$bps" -gt 0 ]; then
    rate_args=(rate "${bps}bit")
    limit=$((bps / 8 / 50 / 1500 + 100))
  fi
  tc -n "$ns" qdisc replace dev eth0 root netem delay "${lat_us}us" "${rate_args[@]}" limit "$limit"
}

# A latency (number with us or ms) in microseconds.
latency_us() {
  local l=${1,,}
  [[ $l =~ ^([0-9]+)(us|ms)$ ]] || die "bad --latency '$1' (expected e.g. 50us or 2ms)" 2
  if [ "${BASH_REMATCH[2]}" = ms ]; then echo $((BASH_REMATCH[1] * 1000)); else echo "${BASH_REMATCH[1]}"; fi
}

# tc's rate syntax (number with kbit, mbit, gbit or bit) in bits per second.
rate_bps() {
  local r=${1,,}
  [[ $r =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || die "bad --rate '$1' (expected e.g. 100mbit or 1gbit)" 2
  local n=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[2]} in
    bit) echo "$n" ;; kbit) echo $((n * 1000)) ;; mbit) echo $((n * 1000000)) ;; gbit) echo $((n * 1000000000)) ;;
  esac
}

write_agent() {
  # Open MPI's rsh launcher calls `agent HOST COMMAND...` where ssh would be: the
  # agent runs COMMAND (the orted and its environment) inside HOST's namespace.
  cat >"$STATE/agent" <<EOF
#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2016,SC2054 # a && b || die; sh -c scripts; mpirun flags with commas
set -euo pipefail
host=\$1
shift
case \$host in
$(for ((i = 0; i < $1; i++)); do echo "  $(host_ns $i)|$(host_addr $i)) ns=$(host_ns $i) ;;"; done)
  *) echo "cluster agent: unknown host '\$host'" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "\$ns" "\$*"
EOF
  chmod +x "$STATE/agent"
}

up() {
  local n=${1:-} rate="" lat="" k=1
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le $MAX_HOSTS ] || die "up: expected a number of hosts 1..$MAX_HOSTS, got '${1:-}'" 2
  shift
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || die "up: $1 needs a value" 2
    case $1 in
      --rate) rate=$2; rate_bps "$rate" >/dev/null ;;
      --latency) lat=$2; latency_us "$lat" >/dev/null ;;
      --dilation) k=$2; [[ $k =~ ^[1-9][0-9]*$ ]] || die "up: --dilation expects an integer >= 1, got '$k'" 2 ;;
      *) die "up: unknown option '$1'" 2 ;;
    esac
    shift 2
  done
  # Dilated: bits per second / K (at least 1), microseconds x K.
  local bps=0 lat_us=0
  [ -z "$rate" ] || bps=$(($(rate_bps "$rate") / k))
  [ -n "$rate" ] && [ "$bps" -lt 1 ] && bps=1
  [ -z "$lat" ] || lat_us=$(($(latency_us "$lat") * k))
  local links="unshaped"
  [ -z "$rate" ] || links="${bps}bit"
  [ -z "$lat" ] || links="$links, ${lat_us}us one way"
  [ "$k" -eq 1 ] || links="$links (${rate:-unshaped} ${lat:+$lat }dilated by $k)"
  [ "$(id -u)" -eq 0 ] || die "up: network namespaces need root" 3
  command -v ip >/dev/null && command -v tc >/dev/null || die "up: needs iproute2 (ip, tc)" 3
  down
  mkdir -p "$STATE"
  trap 'echo "cluster: error: up failed; removing what it made" >&2; down' ERR
  local err
  err=$(ip netns add "$SW" 2>&1) || { rm -rf "$STATE"; die "up: cannot create a network namespace: $err" 3; }
  ip -n "$SW" link add br0 type bridge 2>/dev/null || { down; die "up: the kernel cannot make a bridge" 3; }
  ip -n "$SW" link set br0 up
  for ((i = 0; i < n; i++)); do
    local ns
    ns=$(host_ns $i)
    ip netns add "$ns"
    ip -n "$SW" link add "h$i" type veth peer name eth0 netns "$ns"
    ip -n "$SW" link set "h$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(host_addr $i)/24" dev eth0
    ip -n "$ns" link set eth0 up
    # A peer that stops answering is given up after about 12 s of retransmissions
    # and a connection attempt after 15 s (Linux waits 15 minutes and 2 minutes):
    # mpirun's abort message to a daemon behind a cut link, and its attempts to
    # reconnect, otherwise keep the job alive that long. Not lower: a SYN dropped
    # by a full tbf queue must get through on a retry (with 1 retry, connections
    # between busy hosts failed at start-up).
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=5 net.ipv4.tcp_syn_retries=3
    if [ -n "$rate" ] || [ -n "$lat" ]; then
      shape_host "$ns" "$bps" "$lat_us" || { down; die "up: tc cannot shape links to $links (a latency needs the kernel's netem)" 3; }
    fi
    [ -z "$rate" ] || shape "$SW" "h$i" "${bps}bit"
  done
  for ((i = 0; i < n; i++)); do echo "$(host_ns $i) slots=1"; done >"$STATE/hostfile"
  write_agent "$n"
  echo "$links" >"$STATE/rate"
  echo "$n" >"$STATE/hosts" # last: the cluster exists once this file does
  trap - ERR
  # The hosts answer each other before anyone starts a job on them.
  local last
  last=$(host_addr $((n - 1)))
  for ((t = 0; t < 50; t++)); do
    ip netns exec "$(host_ns 0)" ping -c 1 -W 1 "$last" >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "cluster '$NAME': $n hosts $(host_addr 0)..$last, links $links; hostfile $STATE/hostfile"
}

# The flags that make mpirun use these hosts; the command runs in host 0.
run_mpirun() {
  need_up
  local flags=(--hostfile "$STATE/hostfile" --mca plm_rsh_agent "$STATE/agent"
    --mca btl_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_if_include "$SUBNET.0/24"
    --mca btl self,vader,tcp -x OPENBLAS_NUM_THREADS=1
    # A daemon behind a dead link is noticed within about 5 s of silence, and not
    # called again.
    --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3
    --mca oob_tcp_peer_retries 0)
  if mpirun --version 2>&1 | grep -q "Open MPI"; then
    # Every host's daemon would bind its first rank to core 0, and the hosts share
    # this machine's cores: all ranks of a job on one core (each computed at half
    # its speed on 2 cores). Unbound, they spread as the kernel schedules them.
    flags+=(--oversubscribe --mca mpi_yield_when_idle 1 --bind-to none)
    [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
  else
    die "mpirun: this script drives Open MPI's launcher; for MPICH see README 'Running on a cluster'" 2
  fi
  export OPENBLAS_NUM_THREADS=1
  in_host 0 mpirun "${flags[@]}" "$@"
}

# in_host H CMD...: CMD inside host H, with H's hostname.
in_host() {
  local h=$1
  shift
  [[ $h =~ ^[0-9]+$ ]] && [ "$h" -lt "$(hosts)" ] || die "no host '$h' (hosts: 0..$(($(hosts) - 1)))" 2
  local ns
  ns=$(host_ns "$h")
  exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
}

# Bytes sent and received by each host on its link (its eth0's counters).
bytes() {
  need_up
  for ((i = 0; i < $(hosts); i++)); do
    local s
    s=$(ip -n "$(host_ns $i)" -s -j link show eth0 2>/dev/null || true)
    echo "$(host_ns $i) tx_bytes $(echo "$s" | sed -nE 's/.*"tx":\{"bytes":([0-9]+).*/\1/p') rx_bytes $(echo "$s" | sed -nE 's/.*"rx":\{"bytes":([0-9]+).*/\1/p')"
  done
}

link() {
  need_up
  [[ ${1:-} =~ ^[0-9]+$ ]] && [ "$1" -lt "$(hosts)" ] || die "link: no host '${1:-}'" 2
  [[ ${2:-} =~ ^(up|down)$ ]] || die "link: expected up or down, got '${2:-}'" 2
  ip -n "$SW" link set "h$1" "$2"
}

status() {
  if [ ! -f "$STATE/hosts" ]; then
    echo "cluster '$NAME': down"
    return
  fi
  echo "cluster '$NAME': $(hosts) hosts, links $(cat "$STATE/rate"), hostfile $STATE/hostfile"
  for ((i = 0; i < $(hosts); i++)); do
    local state
    state=$(ip -n "$SW" -br link show "h$i" 2>/dev/null | awk '{print $2}')
    echo "  $(host_ns $i) $(host_addr $i) link ${state:-missing}"
  done
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case $cmd in
  up) up "$@" ;;
  down) down ;;
  mpirun) run_mpirun "$@" ;;
  exec) need_up; in_host "$@" ;;
  bytes) bytes ;;
  link) link "$@" ;;
  status) status ;;
  *) die "usage: scripts/cluster.sh up N [--rate R] [--latency L] [--dilation K] | mpirun ARGS... | exec H CMD... | bytes | link H up|down | status | down" 2 ;;
esac
