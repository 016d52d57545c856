#!/usr/bin/env bash
# Several rails (issue 4, seed 000): two hosts made of network namespaces
# joined by three veth rails, each shaped with tc tbf to 1 Gbit/s both ways.
# fmperf bw and latency over 1, 2 and 3 rails, over unequal rails, under each
# FM_RAIL_POLICY, and multiplex (two pairs on one rail), with kernel TCP over
# one rail and MPTCP over two in the same run. JSON lines to
# build/bench/rails.jsonl, table to build/bench/rails.md.
#   bench/rails.sh [--quick]        (root; run by bench/run.sh)
set -u
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
FMRUN=build/release/tools/fmrun
FMPERF=build/release/tools/fmperf
out=build/bench
log() { printf 'rails.sh: %s\n' "$*" >&2; }
[ "$(id -u)" -eq 0 ] || { log "skipped: needs root for network namespaces"; exit 0; }
mkdir -p "$out"

source bench/rails_ns.sh
trap rails_ns_down EXIT
rails_ns_up || { log "cannot create namespaces"; exit 1; }
for i in 0 1 2; do rails_shape $i 1gbit; done

# MPTCP: B announces its second rail, A opens a subflow from its own.
mptcp=1
if [ "$(cat /proc/sys/net/mptcp/enabled 2>/dev/null)" = 1 ] &&
  ip -n "$A" mptcp limits set subflow 2 add_addr_accepted 2 2>/dev/null &&
  ip -n "$B" mptcp limits set subflow 2 add_addr_accepted 2 &&
  ip -n "$A" mptcp endpoint add "$(rail_net 1).1" dev "$(rail_dev 1 a)" subflow &&
  ip -n "$B" mptcp endpoint add "$(rail_net 1).2" dev "$(rail_dev 1 b)" signal; then
  :
else
  mptcp=0
  log "no MPTCP in this kernel: its rows are left out"
fi

launch=(--hosts "$A,$B" --launcher "ip netns exec {host}" --pmi-addr "$MGMT.254")
jsonl=$out/rails.jsonl
: >"$jsonl"
# perf ROUND CASE RAILS TEST ARGS...: one fmperf run, its lines tagged.
perf() {
  local round=$1 case=$2 rails=$3 test=$4
  shift 4
  log "round $round: $case (FM_RAILS=$rails) fmperf $test $*"
  FM_RAILS=$rails timeout 300 "$FMRUN" "${launch[@]}" -n "$( [ "$test" = multiplex ] && echo 4 || echo 2)" \
    "$FMPERF" "$test" --json "$@" |
    sed "s#^{#{\"round\": $round, \"case\": \"$case\", #" >>"$jsonl"
  report_exit "${PIPESTATUS[0]}" 300 "$case"
}
bw=(--sizes 1M --window 16 --iters 320)

rounds=3
[ $quick -eq 1 ] && rounds=1
for r in $(seq 1 $rounds); do
  perf "$r" "1 rail" "$(rails_spec 0)" bw "${bw[@]}" --peer tcp
  perf "$r" "rail 1 alone" "$(rails_spec 1)" bw "${bw[@]}"
  perf "$r" "rail 2 alone" "$(rails_spec 2)" bw "${bw[@]}"
  if [ $mptcp = 1 ]; then
    perf "$r" "2 rails" "$(rails_spec 0 1)" bw "${bw[@]}" --peer mptcp
  else
    perf "$r" "2 rails" "$(rails_spec 0 1)" bw "${bw[@]}"
  fi
  perf "$r" "3 rails" "$(rails_spec 0 1 2)" bw "${bw[@]}"
  # Unequal rails: rail 1 at 300 Mbit/s.
  rails_shape 1 300mbit
  perf "$r" "rail 1 alone, 300 Mbit/s" "$(rails_spec 1)" bw "${bw[@]}"
  perf "$r" "2 rails, 1 Gbit/s + 300 Mbit/s" "$(rails_spec 0 1)" bw "${bw[@]}"
  rails_shape 1 1gbit
  # Seed 000's figure 2: two pairs sharing one rail.
  perf "$r" "multiplex, 1 rail" "$(rails_spec 0)" multiplex "${bw[@]}" --peer tcp
  perf "$r" "multiplex, 1 rail" "$(rails_spec 0)" multiplex "${bw[@]}" --opposite --peer tcp
done
# fmperf rails: latency and bandwidth over 1, 2 and 3 rails (one round).
rails_sizes=(--sizes 8,64K,1M --window 16)
perf 1 "fmperf rails, 1 rail" "$(rails_spec 0)" rails "${rails_sizes[@]}" --peer tcp
if [ $mptcp = 1 ]; then
  perf 1 "fmperf rails, 2 rails" "$(rails_spec 0 1)" rails "${rails_sizes[@]}" --peer mptcp
else
  perf 1 "fmperf rails, 2 rails" "$(rails_spec 0 1)" rails "${rails_sizes[@]}"
fi
perf 1 "fmperf rails, 3 rails" "$(rails_spec 0 1 2)" rails "${rails_sizes[@]}"
# An idle rank's CPU share with one and two rails (rails are not probed
# while idle).
perf 1 "idle, 1 rail" "$(rails_spec 0)" idle
perf 1 "idle, 2 rails" "$(rails_spec 0 1)" idle
# Seed 000's explicit rail status query against the piggybacked status.
FM_RAIL_STATUS=query perf 1 "fmperf rails, 2 rails, status by query" "$(rails_spec 0 1)" rails \
  "${rails_sizes[@]}"
# The policies compared.
for policy in dynamic static unidirectional; do
  FM_RAIL_POLICY=$policy perf 1 "2 rails, $policy" "$(rails_spec 0 1)" bw "${bw[@]}"
  FM_RAIL_POLICY=$policy perf 1 "2 rails, $policy" "$(rails_spec 0 1)" multiplex "${bw[@]}" \
    --opposite
done

# Failover: rail 1 fails in the middle of a 2-rail transfer and comes back;
# each 1 MiB window is traced, bench/rails_failover.py times the dip. Two
# ways to fail: the link set down (the sender's kernel refuses at once), and
# the peer's address removed with the link up (packets vanish silently:
# only the heartbeat tells).
hb=100
fail_rail() { # fail_rail down|blackhole on|off
  case $1-$2 in
  down-on) ip -n "$A" link set "$(rail_dev 1 a)" down ;;
  down-off) ip -n "$A" link set "$(rail_dev 1 a)" up ;;
  blackhole-on) ip -n "$B" addr del "$(rail_net 1).2/24" dev "$(rail_dev 1 b)" ;;
  blackhole-off) ip -n "$B" addr add "$(rail_net 1).2/24" dev "$(rail_dev 1 b)" ;;
  esac
}
for how in down blackhole; do
  for r in $(seq 1 $rounds); do
    trace=$out/rails_failover_${how}_$r.trace
    log "round $r: failover, rail 1 $how at 1.5 s, back at 3 s"
    FM_RAILS=$(rails_spec 0 1) FM_RAIL_HEARTBEAT_MS=$hb FM_LOG=error timeout 300 "$FMRUN" \
      "${launch[@]}" -n 2 "$FMPERF" bw --sizes 256K --window 4 --iters 3200 --trace "$trace" \
      --json >/dev/null &
    job=$!
    sleep 1.5
    t_down=$(date +%s%N)
    fail_rail $how on
    sleep 1.5
    t_up=$(date +%s%N)
    fail_rail $how off
    wait $job || log "failover run $r failed"
    python3 bench/rails_failover.py "$trace" "$t_down" "$t_up" "$r" "$hb" "$how" >>"$jsonl"
  done
done

python3 bench/rails_report.py "$jsonl" >"$out/rails.md"
cat "$out/rails.md"
