#!/usr/bin/env bash
# Incast through a shaped port (issue 11, item 4): N senders, each in its own
# network namespace, stream into one receiver through a Linux bridge whose
# port towards the receiver is a 1 Gbit/s tbf with a 256 KB buffer, while a
# victim namespace ping-pongs 8 B with the receiver through the same port.
# fmperf incast runs it over fastmsg, then over kernel TCP (CUBIC) in the
# same job; the port's drops and queue are sampled for each. Topology as in
# ../shared/notes/net-cc-loss.md section 5:
#
#   switch namespace: br0 (data, 10.98.0.0/24) and br1 (management, for
#   fmrun's PMI, joined to this namespace by one veth)
#   receiver (rank 0), senders s1..sN (ranks 1..N), victim (rank N+1):
#   a veth to br0 and one to br1 each; tbf on br0's port to the receiver.
#
# Prints fmperf's JSON lines (metric goodput, fairness, minmax, victim_p50,
# victim_p99) and, per transport, the port's (port_drops in % of packets,
# port_backlog_p50 and port_backlog_p99 in bytes, sampled every 20 ms over
# the measured interval), each with "round"; a log on stderr, with the
# qdisc's counters after each run. Then tests/incast_sim's lines (test
# "incast_sim"): 8 to 1000 senders simulated over the engine, running at
# once and waiting 300 us and 1 ms on average for a CPU.
#
#   bench/incast.sh [--quick] [--senders "8 32"]      (root)
#   --quick: one round of 2 s per count instead of three of 3 s
# Environment: INCAST_WINDOW (messages in flight per sender, fmperf's
# default otherwise), INCAST_SIZE (default 64K), INCAST_SIM (the simulator
# to run at the end; empty: none, for A/B rounds of the real runs).
set -u
cd "$(dirname "$0")/.."
quick=0
senders="8 32"
while [ $# -gt 0 ]; do
  case $1 in
  --quick) quick=1 ;;
  --senders)
    senders=${2:-}
    shift
    ;;
  *)
    echo "usage: bench/incast.sh [--quick] [--senders \"8 32\"]" >&2
    exit 2
    ;;
  esac
  shift
done
FMRUN=build/release/tools/fmrun
FMPERF=build/release/tools/fmperf
log() { printf 'incast.sh: %s\n' "$*" >&2; }
[ "$(id -u)" -eq 0 ] || { log "skipped: needs root for network namespaces"; exit 0; }
[ -x "$FMRUN" ] && [ -x "$FMPERF" ] || { log "build first: cmake --build build/release"; exit 1; }
for n in $senders; do
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] ||
    { log "--senders takes counts from 1 to 200, not '$n'"; exit 2; }
done

P=fmi$$                                   # every name this run makes starts so
SW=${P}sw                                 # the switch
MGMT=10.$((150 + $$ % 50)).$(($$ % 250))  # management /24 (this namespace: .254)
DATA=10.98.0                              # data /24, inside the namespaces only
RATE=1gbit
export FM_RAILS=$DATA.0/24
made=()     # namespaces to remove
failed=0    # runs that failed: the exit status
sampler=""  # the queue sampler's pid
tmp=$(mktemp -d /tmp/fmincast.XXXXXX)

# Kills what still runs in our namespaces (a rank fmrun lost), then removes
# them; the veths go with them.
cleanup() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  local ns
  for ns in "${made[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "${P}m" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# add_host NS PORT N: a host with data address .N and management .N, on
# switch ports PORT (br0) and mPORT (br1).
add_host() {
  local ns=$1 port=$2 n=$3
  ip netns add "$ns" && made+=("$ns") &&
    ip -n "$SW" link add "$port" type veth peer name data netns "$ns" &&
    ip -n "$SW" link set "$port" master br0 up &&
    ip -n "$SW" link add "m$port" type veth peer name mgmt netns "$ns" &&
    ip -n "$SW" link set "m$port" master br1 up &&
    ip -n "$ns" addr add "$DATA.$n/24" dev data && ip -n "$ns" addr add "$MGMT.$n/24" dev mgmt &&
    ip -n "$ns" link set lo up && ip -n "$ns" link set data up && ip -n "$ns" link set mgmt up
}

# topology N: the switch, the receiver (.100), N senders (.1..N), the victim
# (.200); sets HOSTS, fmrun's --hosts in rank order.
topology() {
  local n=$1 i
  ip netns add "$SW" && made+=("$SW") &&
    ip -n "$SW" link add br0 type bridge && ip -n "$SW" link add br1 type bridge &&
    ip -n "$SW" link set br0 up && ip -n "$SW" link set br1 up &&
    ip link add "${P}m" type veth peer name root netns "$SW" &&
    ip -n "$SW" link set root master br1 up &&
    ip addr add "$MGMT.254/24" dev "${P}m" && ip link set "${P}m" up || return 1
  add_host "${P}r" r 100 || return 1
  HOSTS=${P}r
  for i in $(seq 1 "$n"); do
    add_host "${P}s$i" "s$i" "$i" || return 1
    HOSTS=$HOSTS,${P}s$i
  done
  add_host "${P}v" v 200 || return 1
  HOSTS=$HOSTS,${P}v
}

# The bottleneck, afresh (counters from zero) before each run.
shape() {
  tc -n "$SW" qdisc del dev r root 2>/dev/null
  tc -n "$SW" qdisc add dev r root tbf rate $RATE burst 32kb limit 256kb
}

# sample FILE: the port's counters every 20 ms, "ns json" per line, until killed.
sample() {
  while :; do
    printf '%s %s\n' "${EPOCHREALTIME/./}000" "$(tc -s -j -n "$SW" qdisc show dev r)"
    sleep 0.02
  done >"$1"
}

# port_stats N ROUND: per transport, the port over its measured interval
# (from fmperf's --trace) as JSON lines.
port_stats() {
  python3 - "$tmp/trace" "$tmp/samples" "$1" "$2" "$size" <<'EOF'
import json, sys
trace, samples = sys.argv[1], sys.argv[2]
senders, rnd, size = (int(a) for a in sys.argv[3:6])
s = []
for line in open(samples):
    t, _, js = line.partition(" ")
    try:
        q = json.loads(js)[0]
        s.append((int(t), q.get("drops", 0), q.get("packets", 0), q.get("backlog", 0)))
    except (ValueError, IndexError):
        pass
marks = {}
for line in open(trace):
    t, x, what = line.split()
    marks.setdefault(x, {})[what] = int(t)
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))] if v else 0
for x, m in marks.items():
    inside = [e for e in s if m.get("measure", 0) <= e[0] <= m.get("end", 0)]
    if len(inside) < 2:
        continue
    drops, pkts = inside[-1][1] - inside[0][1], inside[-1][2] - inside[0][2]
    base = {"test": "incast", "transport": "fastmsg" if x == "fastmsg" else x,
            "peer": None if x == "fastmsg" else x, "size": size, "senders": senders,
            "round": rnd, "samples": len(inside)}
    rows = [("port_drops", round(100.0 * drops / max(1, drops + pkts), 4), "% of packets",
             {"drops": drops, "packets": pkts}),
            ("port_backlog_p50", pct([e[3] for e in inside], 0.5), "B", {}),
            ("port_backlog_p99", pct([e[3] for e in inside], 0.99), "B", {})]
    for metric, value, unit, extra in rows:
        print(json.dumps(dict(base, metric=metric, value=value, unit=unit, **extra)))
EOF
}

rounds=3 seconds=3
[ $quick -eq 1 ] && rounds=1 seconds=2
# The message size in bytes (the port's rows carry it as fmperf's do).
size=$(python3 -c "import sys; s=sys.argv[1].upper(); m={'K':1<<10,'M':1<<20}
print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))" "${INCAST_SIZE:-64K}") ||
  { log "INCAST_SIZE takes bytes like 65536, 64K or 1M"; exit 2; }
window=()
[ -n "${INCAST_WINDOW:-}" ] && window=(--window "$INCAST_WINDOW")
for n in $senders; do
  log "topology: $n senders, a victim and a receiver behind a $RATE tbf port"
  topology "$n" || { log "cannot create namespaces"; exit 1; }
  for r in $(seq 1 $rounds); do
    log "$n senders, round $r of $rounds"
    shape
    : >"$tmp/trace"
    sample "$tmp/samples" &
    sampler=$!
    timeout -k 10 $((seconds * 2 + 30 + n * 2)) "$FMRUN" --hosts "$HOSTS" \
      --launcher "ip netns exec {host}" --pmi-addr "$MGMT.254" -n $((n + 2)) \
      "$FMPERF" incast --sizes "$size" --seconds "$seconds" "${window[@]}" --peer tcp --json \
      --trace "$tmp/trace" | sed "s/^{/{\"round\": $r, /"
    rc=${PIPESTATUS[0]}
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    sampler=""
    [ "$rc" -eq 124 ] && log "fmperf incast with $n senders timed out"
    if [ "$rc" -ne 0 ]; then
      log "fmperf incast with $n senders failed (exit $rc)"
      failed=$((failed + 1))
    fi
    port_stats "$n" "$r"
    log "port after the run (fastmsg and tcp together): $(tc -s -n "$SW" qdisc show dev r |
      tr -s ' \n' ' ')"
  done
  # The next count gets a topology of its own.
  for ns in "${made[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns"
  done
  made=()
  ip link del "${P}m" 2>/dev/null # gone with the switch already, as a rule
done
# What two CPUs cannot run with real processes: up to a thousand senders,
# simulated over the engine (tests/incast_sim.c), into the same kind of port.
SIM=${INCAST_SIM-build/release/tests/incast_sim}
if [ -n "$SIM" ] && [ ! -x "$SIM" ]; then
  log "no simulator at $SIM (INCAST_SIM): the simulation is skipped"
elif [ -n "$SIM" ]; then
  log "simulated: 8 to 1000 senders into a 1 Gbit/s port with a 256 KB buffer"
  # 500 ms: a thousand senders' turns take 100-150 ms to come round. Then
  # with senders that wait for a CPU, as on a crowded host.
  for wait in 0 300 1000; do
    "$SIM" --senders 8,32,64,256,1000 --ms 500 --warmup-ms 100 --cpu-wait-us $wait --json ||
      { log "incast_sim failed"; failed=$((failed + 1)); }
  done
fi
exit $((failed > 0))
