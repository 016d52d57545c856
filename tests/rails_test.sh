#!/usr/bin/env bash
# Several rails between two hosts made of network namespaces: a management
# bridge for the launcher and three veth pairs as data rails, each shaped
# with tc tbf. A 2-rank stream (conformance 'stream': every byte once and
# in order) runs over two and three rails, over rails of different speeds,
# while a rail is set down and back up, while a rail silently drops
# everything, and with FM_FAULT on top; FM_STATS tells which rails carried
# it and how often a rail failed over. A peer killed under a send over two
# rails. Creates everything and removes it.
#   rails_test.sh FMRUN CONFORMANCE
set -u
FMRUN=$1
CONF=$2
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "SKIP: needs ip and tc"; exit 77; }

HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../bench/rails_ns.sh" # A, B, MGMT, rail_net, rail_dev, rails_ns_up, ...
tmp=$(mktemp -d)
cleanup() {
  rails_ns_down
  rm -rf "$tmp"
}
trap cleanup EXIT
rails_ns_up || { echo "SKIP: cannot create network namespaces here"; exit 77; }

launch=(--hosts "$A,$B" --launcher "ip netns exec {host}" --pmi-addr "$MGMT.254")
export FM_STATS=1 FMT_TIMEOUT=120 FM_LOG=warn
fails=0
pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1" >&2; sed 's/^/    /' "$tmp/err" >&2; fails=$((fails + 1)); }
# stat NAME RANK: a counter of FM_STATS's line for RANK from the last run.
stat() { sed -n "s/^fastmsg\[$2\] net:.* $1=\([0-9]*\).*/\1/p" "$tmp/err"; }
run_stream() { # run_stream BYTES [env...]: a stream from rank 0 (host A) to rank 1 (host B)
  local bytes=$1
  shift
  env FMT_STREAM_BYTES="$bytes" "$@" "$FMRUN" "${launch[@]}" -n 2 "$CONF" stream 2>"$tmp/err"
}

# One rail through a port with a shallow buffer (a tbf of 64 KB, as a
# switch port's share might be): the congestion window keeps the stream
# from overflowing it at every round trip. Without it, 77 % of the packets
# sent were retransmissions; with it, 12-29 % while the first round went on
# until what it sent was acknowledged, and 3-4 % since it is cut with its
# 64th loss.
tc -n "$A" qdisc replace dev "$(rail_dev 0 a)" root tbf rate 200mbit burst 32kb limit 64kb
if run_stream $((32 << 20)) FM_RAILS="$(rails_spec 0)"; then
  sent=$(stat tx_packets 0) fast=$(stat retransmits_fast 0) rto=$(stat retransmits_timeout 0)
  cuts=$(stat cwnd_cuts 0)
  if [ "${cuts:-0}" -ge 1 ] && [ $((4 * (${fast:-0} + ${rto:-0}))) -lt "${sent:-0}" ]; then
    pass "a port with a 64 KB buffer: exactly once, in order, $((fast + rto)) of $sent \
packets resent"
  else
    fail "a port with a 64 KB buffer: $fast + $rto of $sent packets resent, $cuts window cuts"
  fi
else
  fail "a port with a 64 KB buffer: the stream failed"
fi

# The window is the session's, across rails: with only rail 1's port
# shallow, both rails still carry their share.
rails_shape 0 200mbit
tc -n "$A" qdisc replace dev "$(rail_dev 1 a)" root tbf rate 200mbit burst 32kb limit 64kb
if run_stream $((32 << 20)) FM_RAILS="$(rails_spec 0 1)"; then
  sent=$(stat tx_packets 0) fast=$(stat retransmits_fast 0) rto=$(stat retransmits_timeout 0)
  r0=$(stat rail0_tx_bytes 0) r1=$(stat rail1_tx_bytes 0)
  if [ $((4 * (${fast:-0} + ${rto:-0}))) -lt "${sent:-0}" ] && [ "${r0:-0}" -gt $((8 << 20)) ] &&
    [ "${r1:-0}" -gt $((8 << 20)) ]; then
    pass "2 rails, one port with a 64 KB buffer: exactly once, in order, shares $r0 and \
$r1 bytes, $((fast + rto)) of $sent packets resent"
  else
    fail "2 rails, one port with a 64 KB buffer: shares $r0 and $r1, $fast + $rto of $sent resent"
  fi
else
  fail "2 rails, one port with a 64 KB buffer: the stream failed"
fi

for i in 0 1 2; do rails_shape $i 200mbit; done

# Two and three equal rails: the stream uses every one, each a fair share.
for set in "0 1" "0 1 2"; do
  n=$(echo $set | wc -w)
  # shellcheck disable=SC2086
  if run_stream $((24 << 20)) FM_RAILS="$(rails_spec $set)"; then
    ok=1
    for r in $(seq 0 $((n - 1))); do
      tx=$(stat "rail${r}_tx_bytes" 0)
      [ "${tx:-0}" -gt $((24 * 1048576 / n / 2)) ] || ok=0
    done
    if [ $ok = 1 ]; then pass "$n equal rails: exactly once, in order, each rail a fair share"
    else fail "$n equal rails: a rail carried less than half its share"; fi
  else
    fail "$n equal rails: the stream failed"
  fi
done

# Seed 000's explicit status query instead of the piggybacked status.
if run_stream $((8 << 20)) FM_RAILS="$(rails_spec 0 1)" FM_RAIL_STATUS=query; then
  pass "2 rails, rail status by query (FM_RAIL_STATUS=query): exactly once, in order"
else
  fail "2 rails, rail status by query"
fi

# Rails of different speeds: the faster carries more (no equal segments).
rails_shape 1 60mbit
if run_stream $((24 << 20)) FM_RAILS="$(rails_spec 0 1)"; then
  r0=$(stat rail0_tx_bytes 0) r1=$(stat rail1_tx_bytes 0)
  if [ "${r0:-0}" -gt $((2 * ${r1:-0})) ]; then
    pass "200 + 60 Mbit/s rails: the faster one carries more ($r0 vs $r1 bytes)"
  else
    fail "200 + 60 Mbit/s rails: shares $r0 and $r1 do not follow the speeds"
  fi
else
  fail "200 + 60 Mbit/s rails: the stream failed"
fi
rails_shape 1 100mbit
rails_shape 0 100mbit

# break_rail HOW: what happens to rail 1 in the middle of a stream, and back.
# oneway: B drops what comes from A on it (a tc bpf filter that returns
# TC_ACT_SHOT), while B's packets still reach A.
break_rail() {
  case $1 in
  down) ip -n "$A" link set "$(rail_dev 1 a)" down ;;
  blackhole) ip -n "$B" addr del "$(rail_net 1).2/24" dev "$(rail_dev 1 b)" ;;
  oneway)
    tc -n "$B" qdisc add dev "$(rail_dev 1 b)" ingress &&
      tc -n "$B" filter add dev "$(rail_dev 1 b)" ingress protocol ip bpf bytecode "1,6 0 0 2" da
    ;;
  esac
}
mend_rail() {
  case $1 in
  down) ip -n "$A" link set "$(rail_dev 1 a)" up ;;
  blackhole) ip -n "$B" addr add "$(rail_net 1).2/24" dev "$(rail_dev 1 b)" ;;
  oneway) tc -n "$B" qdisc del dev "$(rail_dev 1 b)" ingress ;;
  esac
}
for how in down blackhole oneway; do
  for fault in "" "drop=0.01,dup=0.01,reorder=0.01"; do
    case $how in
    down) what="set down" ;;
    blackhole) what="dropping everything (link up)" ;;
    oneway) what="dropping everything from A to B only" ;;
    esac
    name="rail 1 $what during a stream, then back${fault:+, with FM_FAULT=$fault}"
    run_stream $((64 << 20)) FM_RAILS="$(rails_spec 0 1)" FM_RAIL_HEARTBEAT_MS=100 ${fault:+FM_FAULT=$fault,seed=$$} &
    job=$!
    sleep 1
    break_rail $how
    sleep 1.5
    mend_rail $how
    if wait $job; then
      down=$(stat rail_failovers 0) up=$(stat rail_recoveries 0) lost=$(stat peers_lost 0)
      if [ "${down:-0}" -ge 1 ] && [ "${up:-0}" -ge 1 ] && [ "${lost:-1}" -eq 0 ]; then
        pass "$name: exactly once, in order ($down failover(s), $up recovery)"
      else
        fail "$name: failovers=$down recoveries=$up peers_lost=$lost"
      fi
    else
      fail "$name: the stream failed"
    fi
  done
done

# A peer killed while the next message goes out over two rails: the rank
# that sends it goes on (it died of SIGSEGV when the first rail's send
# ended the session whose rings the second rail's packets pointed into).
FM_RAILS="$(rails_spec 0 1)" "$FMRUN" --keep-going "${launch[@]}" -n 2 "$CONF" peer_killed \
  >"$tmp/out" 2>"$tmp/err"
if grep -q "rank 0 went on" "$tmp/out" && ! grep -q "rank 0 .*signal" "$tmp/err"; then
  pass "a peer killed under a send over two rails"
else
  fail "a peer killed under a send over two rails"
fi

# A rail the peer does not have is reported and left out.
ip -n "$B" addr del "$(rail_net 2).2/24" dev "$(rail_dev 2 b)"
ip -n "$B" addr add "10.$((60 + $$ % 50)).1.2/24" dev "$(rail_dev 2 b)"
if run_stream $((4 << 20)) FM_RAILS="$(rails_spec 0 2)" &&
  grep -q "reaches none of rank 1's rails" "$tmp/err"; then
  pass "a rail with no partner on the peer is reported and not used"
else
  fail "a rail with no partner on the peer"
fi

# Every rail gone: FM_EPEERLOST on both sides, within FM_NET_TIMEOUT_MS.
FM_RAILS="$(rails_spec 0 1)" FM_NET_TIMEOUT_MS=1000 "$FMRUN" --keep-going "${launch[@]}" -n 2 \
  "$CONF" linkdown 2>"$tmp/err" &
job=$!
sleep 1
ip -n "$A" link set "$(rail_dev 0 a)" down
ip -n "$A" link set "$(rail_dev 1 a)" down
if wait $job; then pass "every rail down: FM_EPEERLOST"; else fail "every rail down"; fi

[ $fails -eq 0 ] || { echo "$fails rails check(s) failed" >&2; exit 1; }
