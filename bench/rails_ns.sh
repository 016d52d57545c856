# Two hosts made of network namespaces with a management bridge (for the
# launcher's PMI) and three veth data rails, for bench/rails.sh and
# tests/rails_test.sh. Sourced:
#   rails_ns_up     creates them (sets A, B, MGMT and rail_net I)
#   rails_shape I RATE   tbf on both ends of rail I
#   rails_ns_down   removes everything
A=fmrA$$ B=fmrB$$
RAILS_BR=fmrbr$$
MGMT=10.$((100 + $$ % 50)).$(($$ % 250))
rail_net() { echo "172.$((16 + $1)).$(($$ % 250))"; } # rail_net I -> its /24 prefix
rail_dev() { echo "r$1$$$2"; }                         # rail_dev I a|b

rails_ns_down() {
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  ip link del "$RAILS_BR" 2>/dev/null
}

rails_ns_up() {
  ip netns add "$A" && ip netns add "$B" &&
    ip link add "$RAILS_BR" type bridge && ip addr add "$MGMT.254/24" dev "$RAILS_BR" &&
    ip link set "$RAILS_BR" up &&
    ip link add "fmrma$$" type veth peer name mgmt netns "$A" &&
    ip link add "fmrmb$$" type veth peer name mgmt netns "$B" &&
    ip link set "fmrma$$" master "$RAILS_BR" up && ip link set "fmrmb$$" master "$RAILS_BR" up &&
    ip -n "$A" addr add "$MGMT.1/24" dev mgmt && ip -n "$B" addr add "$MGMT.2/24" dev mgmt &&
    ip -n "$A" link set mgmt up && ip -n "$B" link set mgmt up &&
    ip -n "$A" link set lo up && ip -n "$B" link set lo up || return 1
  # A connection per message (seed 002: 100,000 of each size) leaves the
  # side that closes first in TIME_WAIT. Between namespaces, unlike over
  # loopback, the kernel does not reuse such ports for new connections by
  # default, and the 28,000 ephemeral ports ran out within the run
  # (connect: EADDRNOTAVAIL).
  ip netns exec "$A" sysctl -qw net.ipv4.tcp_tw_reuse=1
  ip netns exec "$B" sysctl -qw net.ipv4.tcp_tw_reuse=1
  local i n
  for i in 0 1 2; do
    n=$(rail_net $i)
    ip link add "$(rail_dev $i a)" type veth peer name "$(rail_dev $i b)" &&
      ip link set "$(rail_dev $i a)" netns "$A" && ip link set "$(rail_dev $i b)" netns "$B" &&
      ip -n "$A" addr add "$n.1/24" dev "$(rail_dev $i a)" &&
      ip -n "$B" addr add "$n.2/24" dev "$(rail_dev $i b)" &&
      ip -n "$A" link set "$(rail_dev $i a)" up && ip -n "$B" link set "$(rail_dev $i b)" up ||
      return 1
  done
}

rails_shape() {
  tc -n "$A" qdisc replace dev "$(rail_dev "$1" a)" root tbf rate "$2" burst 256kb limit 8mb &&
    tc -n "$B" qdisc replace dev "$(rail_dev "$1" b)" root tbf rate "$2" burst 256kb limit 8mb
}

rails_spec() { # rails_spec I... -> the FM_RAILS value
  local v="" i
  for i in "$@"; do v="$v${v:+,}$(rail_net "$i").0/24"; done
  echo "$v"
}

# report_exit RC LIMIT WHAT: a run between the hosts that left no figure says so,
# and why (a pipeline's status is its last command's, so callers pass
# ${PIPESTATUS[0]}; LIMIT is the seconds given to `timeout`). Uses the
# caller's log; returns RC's success or failure.
report_exit() {
  case $1 in
  0) return 0 ;;
  124) log "$3: no result, timed out after $2 s" ;;
  *) log "$3: no result, exit status $1" ;;
  esac
  return 1
}
