#!/usr/bin/env bash
# The network path, measured between two network namespaces joined by an
# unshaped veth pair (two "hosts" on this machine), next to kernel UDP and
# TCP between the same namespaces and iperf3. Prints JSON lines on stdout.
#   bench/net.sh [--quick]        (root; run by bench/run.sh)
set -u
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
FMRUN=build/release/tools/fmrun
FMPERF=build/release/tools/fmperf
log() { printf 'net.sh: %s\n' "$*" >&2; }
[ "$(id -u)" -eq 0 ] || { log "skipped: needs root for network namespaces"; exit 0; }

# Two hosts: the rails setup (bench/rails_ns.sh) with a management bridge
# for fmrun's PMI and rail 0, unshaped, as the data link.
source bench/rails_ns.sh
trap rails_ns_down EXIT
rails_ns_up || { log "cannot create namespaces"; exit 1; }
export FM_RAILS=$(rails_spec 0)
peer_ip=$(rail_net 0).2

# perf ARGS: fmperf between the two hosts, labelled as the network path.
# (Kernel peers are renamed tcp-net and udp-net: apart from the loopback
# ones of the shared-memory runs.)
perf() {
  local test=$1
  shift
  log "fmperf $test $*"
  timeout 600 "$FMRUN" --hosts "$A,$B" --launcher "ip netns exec {host}" --pmi-addr "$MGMT.254" \
    -n 2 "$FMPERF" "$test" \
    --label fastmsg-net --json "$@" |
    sed 's/"transport": "\(tcp\|udp\)", "peer": "\(tcp\|udp\)"/"transport": "\1-net", "peer": "\2-net"/' ||
    log "fmperf $test $* failed"
}
# iperf3 ROUND: one TCP stream for 3 s, as a JSON line in fmperf's format.
iperf() {
  ip netns exec "$B" iperf3 -s -1 >/dev/null 2>&1 &
  sleep 0.3
  ip netns exec "$A" iperf3 -c "$peer_ip" -t 3 -J 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8e6
print(json.dumps({"test": "bw", "transport": "iperf3-tcp", "peer": "iperf3-tcp",
                  "size": 1048576, "value": round(r, 1), "unit": "MB/s", "stat": "mean of 3 s",
                  "ranks": 2, "round": int(sys.argv[1])}))' "$1"
  wait
}
round() { sed "s/^{/{\"round\": $1, /"; }

rounds=3
[ $quick -eq 1 ] && rounds=1
for r in $(seq 1 $rounds); do
  log "network goal round $r of $rounds"
  perf latency --sizes 8 --peer udp | round "$r"
  perf msgrate --reps 3 --iters 300000 --peer udp | round "$r"
  perf bw --sizes 1M | round "$r"
  iperf "$r"
  FM_FAULT=drop=0.01,seed=$r perf bw --sizes 1M --label fastmsg-net-drop1 | round "$r"
  perf connect --sizes 128,4096 --iters 1000 --peer tcp | round "$r"
done
if [ $quick -eq 0 ]; then
  perf latency --sizes 0,8,64,1K,4K,16K,64K,256K,1M --peer udp
  perf latency --sizes 8,1K,64K --peer tcp
  perf bw --sizes 8,512,4K,64K,1M,4M --peer tcp
  perf connect --peer tcp
  perf sweep --sizes 1K,4K,16K,64K --windows 1,4,16,64 --peer tcp
fi
