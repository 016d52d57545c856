#!/usr/bin/env bash
# Peers by name between programs that no launcher joined (tests/names.c):
# the server writes its endpoint's name to a file, clients read it.
#   names_test.sh local NAMES FMRUN   on this host
#   names_test.sh netns NAMES FMRUN   server and clients in two network
#                                     namespaces, over one rail and two, with FM_FAULT
set -u
mode=$1
NAMES=$2
FMRUN=$3
tmp=$(mktemp -d)
fails=0
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  [ "$mode" = netns ] && { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
  rm -rf "$tmp"
}
trap cleanup EXIT
export FMT_TIMEOUT=60 FM_LOG=warn
check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then echo "ok: $name"; else echo "FAIL: $name" >&2; fails=$((fails + 1)); fi
}
on_a=() on_b=()
if [ "$mode" = netns ]; then
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
  a=fmnA$$ b=fmnB$$
  ip netns add "$a" && ip netns add "$b" &&
    ip link add fmn1a$$ type veth peer name fmn1b$$ &&
    ip link add fmn2a$$ type veth peer name fmn2b$$ &&
    ip link set fmn1a$$ netns "$a" && ip link set fmn1b$$ netns "$b" &&
    ip link set fmn2a$$ netns "$a" && ip link set fmn2b$$ netns "$b" &&
    ip -n "$a" addr add 10.71.0.1/24 dev fmn1a$$ && ip -n "$b" addr add 10.71.0.2/24 dev fmn1b$$ &&
    ip -n "$a" addr add 10.72.0.1/24 dev fmn2a$$ && ip -n "$b" addr add 10.72.0.2/24 dev fmn2b$$ &&
    for l in lo fmn1a$$ fmn2a$$; do ip -n "$a" link set "$l" up; done &&
    for l in lo fmn1b$$ fmn2b$$; do ip -n "$b" link set "$l" up; done ||
    { echo "SKIP: cannot create network namespaces here"; exit 77; }
  on_a=(ip netns exec "$a") on_b=(ip netns exec "$b")
  export FM_RAILS=10.71.0.0/24
fi

# serve NCLIENTS [env...]: starts the server in the background; its name
# lands in $tmp/name.
serve() {
  local n=$1
  shift
  rm -f "$tmp/name"
  env "$@" "${on_a[@]}" "$NAMES" serve "$tmp/name" "$n" 2>"$tmp/server.err" &
  server=$!
  pids+=("$server")
}
client() { env "$@" "${on_b[@]}" "$NAMES" client "$tmp/name" "${id:-1}"; }
served() { wait "$server"; }

export FM_KEY=names-test-$$
check "bad names and bad calls get FM_EINVAL" "${on_a[@]}" "$NAMES" invalid -

serve 1
check "a client reaches a server by its name, byte-exact both ways" client
check "the server saw it through" served

serve 2
id=1 client && sleep 0.3 && id=2 check "a third program joins later" client
check "the server answered both" served

serve 2
check "the ranks of a launcher job reach a process outside it by name" \
  "${on_b[@]}" "$FMRUN" -n 2 "$NAMES" client "$tmp/name" 1
check "the server answered both ranks" served

if [ "$mode" = local ]; then
  if unshare -rn true 2>/dev/null; then
    check "no network at all: a process still starts and names itself" \
      unshare -rn "$NAMES" invalid -
  fi
  serve 1
  env FM_STATS=1 "$NAMES" client "$tmp/name" 1 2>"$tmp/client.err"
  check "on one node, by name over shared memory (no datagram)" \
    grep -q "net: tx_packets=0 " "$tmp/client.err"
  check "the server saw it through" served
  serve 3 FM_SHM_PEERS=1
  for id in 1 2 3; do
    env FM_STATS=1 "$NAMES" client "$tmp/name" "$id" 2>"$tmp/client$id.err" || break
    sleep 0.5 # the server learns of the exit from the client's pidfd
  done
  check "one sender slot (FM_SHM_PEERS=1), given back as each client exits: the third" \
    grep -q "net: tx_packets=0 " "$tmp/client3.err"
  check "the server answered all three" served
  serve 1 FM_TRANSPORTS=udp
  check "on one node, by name over the network link (FM_TRANSPORTS=udp)" \
    client FM_TRANSPORTS=udp
  check "the server saw it through" served
  home=$tmp/home
  mkdir -p "$home"
  serve 1 -u FM_KEY HOME="$home"
  check "no FM_KEY: a key file made on first use" client -u FM_KEY HOME="$home"
  check "the server saw it through" served
  check "the key file is 0600" test "$(stat -c %a "$home/.fastmsg/key")" = 600
  chmod 644 "$home/.fastmsg/key"
  env -u FM_KEY HOME="$home" "$NAMES" invalid - 2>"$tmp/key.err"
  check "a key file others may read is refused, saying what to do" grep -q "chmod 600" "$tmp/key.err"
  echo zz >"$home/.fastmsg/key" && chmod 600 "$home/.fastmsg/key"
  env -u FM_KEY HOME="$home" "$NAMES" invalid - 2>"$tmp/key.err"
  check "a corrupt key file is refused, saying what to do" grep -q "remove it" "$tmp/key.err"
fi

serve 1 FM_KEY=one
env FM_KEY=two FM_NET_TIMEOUT_MS=1000 "${on_b[@]}" "$NAMES" client "$tmp/name" 1 2>/dev/null
rc=$?
check "another domain key is refused: FM_EPEERLOST, not a hang" test "$rc" -eq 3
check "the server says what to do" grep -q "another domain key" "$tmp/server.err"
kill -9 "$server" 2>/dev/null
wait "$server" 2>/dev/null

serve 1
env FM_NET_TIMEOUT_MS=1000 "${on_b[@]}" "$NAMES" lost "$tmp/name" &
lost=$!
pids+=("$lost")
sleep 1
kill -9 "$server"
wait "$server" 2>/dev/null
check "a server killed with SIGKILL turns into FM_EPEERLOST" wait "$lost"

if [ "$mode" = netns ]; then
  export FM_RAILS=10.71.0.0/24,10.72.0.0/24
  serve 1
  check "two rails" client
  check "the server saw it through" served
  serve 1 FM_FAULT=drop=0.02,dup=0.02,reorder=0.02,corrupt=0.005,seed=$$
  check "two rails, with FM_FAULT on both sides" \
    client FM_FAULT=drop=0.02,dup=0.02,reorder=0.02,corrupt=0.005,seed=$((1 + $$))
  check "the server saw it through" served
fi

[ "$fails" -eq 0 ] && echo "all names tests passed" || echo "$fails names test(s) failed"
exit $((fails > 0))
