#!/usr/bin/env bash
# The network path between hosts: two network namespaces joined by a veth
# pair stand for two nodes, and fmrun starts the ranks in them with
# 'ip netns exec'. Ranks of one namespace use shared memory, the others UDP
# over the veth link. Creates everything it needs and removes it after.
#   netns_test.sh FMRUN CONFORMANCE
set -u
FMRUN=$1
CONF=$2
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: needs ip (iproute2)"; exit 77; }

a=fmA$$ b=fmB$$ va=fmva$$ vb=fmvb$$
net=10.$((200 + $$ % 50)).$(($$ % 250)).0
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT
ip netns add "$a" && ip netns add "$b" &&
  ip link add "$va" type veth peer name "$vb" &&
  ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" &&
  ip -n "$a" addr add "${net%.0}.1/24" dev "$va" && ip -n "$b" addr add "${net%.0}.2/24" dev "$vb" &&
  ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up &&
  ip -n "$a" link set lo up && ip -n "$b" link set lo up ||
  { echo "SKIP: cannot create network namespaces here"; exit 77; }

export FM_RAILS="$net/24" FMT_TIMEOUT=120
launch=(--hosts "$a,$b" --launcher "ip netns exec {host}")
fails=0
check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then echo "ok: $name"; else echo "FAIL: $name" >&2; fails=$((fails + 1)); fi
}

check "4 ranks on 2 hosts: many senders, one receiver" "$FMRUN" "${launch[@]}" -n 4 "$CONF" order_many
check "4 ranks on 2 hosts: every pair" "$FMRUN" "${launch[@]}" -n 4 "$CONF" pingpong
check "partial sends and wrap-around across hosts" \
  env FM_NET_RING_SIZE=16K "$FMRUN" "${launch[@]}" -n 2 "$CONF" partial_wrap
check "zero-copy sends across hosts" "$FMRUN" "${launch[@]}" -n 2 "$CONF" prepare
for fault in drop=0.05 dup=0.05 reorder=0.05 corrupt=0.01 drop=0.02,dup=0.02,reorder=0.02,corrupt=0.005; do
  check "exactly once, in order, with FM_FAULT=$fault" \
    env FM_FAULT="$fault,seed=$$" FM_LOG=error "$FMRUN" "${launch[@]}" -n 2 "$CONF" partial_wrap
done

# A rank killed on the other host: its host answers with ICMP at once.
# (FM_TRANSPORTS=udp tells the case that the victim's unsent tail may die.)
check "a killed rank on another host" \
  env FM_TRANSPORTS=udp bash "$(dirname "$0")/mp_test.sh" --expect-killed 2 "$FMRUN" \
  --keep-going "${launch[@]}" -n 3 "$CONF" kill

# The link goes down in the middle of a stream: FM_EPEERLOST on both sides.
FM_NET_TIMEOUT_MS=1000 "$FMRUN" --keep-going "${launch[@]}" -n 2 "$CONF" linkdown &
job=$!
sleep 1
ip -n "$a" link set "$va" down
wait $job
check "link set down: FM_EPEERLOST within FM_NET_TIMEOUT_MS" [ $? -eq 0 ]

exit $((fails > 0))
