#!/usr/bin/env bash
# Services by name (tests/services.c): programs that know only a service
# type find each other through the node agents, with no launcher.
#   services_test.sh local SERVICES   on this host
#   services_test.sh netns SERVICES   three network namespaces as three hosts
#                                     (FM_TRANSPORTS=udp), the third joining late
set -u
mode=$1
SVC=$2
tmp=$(mktemp -d)
fails=0
pids=()
hosts=()
export FMT_TIMEOUT=60 FM_LOG=error FM_NAMES_LINGER_MS=1500 FM_NAMES_LOG=$tmp/agents.log
# A domain of this test's own: its agents are not anybody else's.
export FM_KEY="services-test-$$"
# This test's agents: they inherit its key.
agents() {
  for p in $(pgrep -x fmnamed); do
    grep -qz "^FM_KEY=$FM_KEY\$" "/proc/$p/environ" 2>/dev/null && echo "$p"
  done
}
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for h in "${hosts[@]}"; do
    ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$h" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then echo "ok: $name"; else echo "FAIL: $name" >&2; fails=$((fails + 1)); fi
}
# wait_line FILE TEXT: until FILE has a line starting with TEXT (10 s).
wait_line() {
  for _ in $(seq 1000); do grep -q "^$2" "$1" 2>/dev/null && return 0; sleep 0.01; done
  echo "no '$2' in $1:" >&2
  cat "$1" >&2
  return 1
}
# within FILE EVENT LOST START LIMIT_MS: FILE shows EVENT with that lost
# flag, no later than LIMIT_MS after START (the monotonic clock in ms).
within() {
  local line
  line=$(grep -m1 "^$2 .* $3 " "$1") || { echo "no $2 (lost=$3) in $1:" >&2; cat "$1" >&2; return 1; }
  awk -v t="${line##* }" -v s="$4" -v lim="$5" -v what="$2" \
    'BEGIN { d = t - s; printf "  %s seen %.1f ms after the kill (bound %d)\n", what, d, lim; exit !(d <= lim) }'
}

run_on() { # run_on HOST COMMAND...: in the foreground
  local h=$1
  shift
  if [ "$mode" = netns ]; then ip netns exec "fmS$h$$" "$@"; else "$@"; fi
}
bg_on() { # bg_on HOST OUT COMMAND...: in the background, stdout to OUT; $! is it
  local h=$1 out=$2
  shift 2
  if [ "$mode" = netns ]; then
    ip netns exec "fmS$h$$" "$@" >"$out" 2>>"$tmp/errors" &
  else
    "$@" >"$out" 2>>"$tmp/errors" &
  fi
  pids+=($!)
}

if [ "$mode" = netns ]; then
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
  br=fmSbr$$
  ip link add "$br" type bridge && ip link set "$br" up ||
    { echo "SKIP: cannot create a bridge here"; exit 77; }
  hosts+=(DUMMY)
  i=0
  for h in A B C; do
    i=$((i + 1))
    ns=fmS$h$$
    ip netns add "$ns" && hosts+=("$ns") &&
      ip link add "fmS$h$$" type veth peer name "fmSp$h$$" &&
      ip link set "fmS$h$$" netns "$ns" && ip link set "fmSp$h$$" master "$br" &&
      ip link set "fmSp$h$$" up && ip -n "$ns" addr add "10.73.0.$i/24" dev "fmS$h$$" &&
      ip -n "$ns" link set lo up && ip -n "$ns" link set "fmS$h$$" up ||
      { echo "SKIP: cannot create network namespaces here"; exit 77; }
  done
  trap 'cleanup; ip link del "$br" 2>/dev/null' EXIT
  export FM_TRANSPORTS=udp FM_RAILS=10.73.0.0/24 FM_NET_TIMEOUT_MS=1000 FM_NAMES_DOWN_MS=1000
fi

# 1. Bad calls get the documented codes.
check "errors" run_on A "$SVC" invalid

# 2. A client that knows only the type finds the server and exchanges
# byte-exact messages (the server on A, the client on B).
scope=cluster
[ "$mode" = local ] && scope=node
bg_on A "$tmp/serve" "$SVC" serve 1000 7 $scope
server=${pids[-1]}
wait_line "$tmp/serve" ready
check "client finds the server by name" run_on B "$SVC" client 1000 7 200

# 3. Anycast spreads over three publishers of one instance.
for i in 1 2; do bg_on A "$tmp/serve$i" "$SVC" serve 1000 7 $scope; wait_line "$tmp/serve$i" ready; done
spread() { sleep 0.3; [ "$(run_on B "$SVC" spread 1000 7 30)" = "distinct 3" ]; }
check "anycast reaches all three publishers" spread

# 4. Events: the state at subscribe time, then a kill -9.
bg_on B "$tmp/watch" "$SVC" watch 1000 0 100 4 20000
wait_line "$tmp/watch" subscribed
wait_line "$tmp/watch" PUBLISHED
sleep 0.2
killed=$(run_on A "$SVC" now)
kill -9 "$server"
wait_line "$tmp/watch" WITHDRAWN
# Locally the agent sees the connection close: far sooner than any silence
# (FM_NAMES_DOWN_MS, 1,500 ms) would tell. 500 ms and not less: under
# ctest -j2 with sanitizers, the processes wait for a CPU (100 ms failed).
if [ "$mode" = local ]; then bound=500; else bound=$((1000 + 100)); fi
check "a killed publisher is withdrawn (lost) within ${bound} ms" within "$tmp/watch" WITHDRAWN 1 "$killed" $bound
check "three PUBLISHED at subscribe time" [ "$(grep -c ^PUBLISHED "$tmp/watch")" = 3 ]

# 5. Multicast: three members (one publishes two overlapping ranges), each
# gets every message once and in order.
for i in 1 2 3; do
  h=A
  [ $i = 2 ] && h=B
  bg_on $h "$tmp/member$i" "$SVC" member 2000 $((i * 10))
  wait_line "$tmp/member$i" ready
done
sleep 0.5
members=$(run_on B "$SVC" mcast 2000 0 100 1000)
check "multicast goes to three members ($members)" [ "$members" = "members 3" ]
run_on B "$SVC" quit 2000 0 100
sleep 0.5
for i in 1 2 3; do
  wait_line "$tmp/member$i" got
  check "member $i got 1000 once, in order" grep -q "^got 1000 dup 0" "$tmp/member$i"
  grep -q "^got 1000 dup 0" "$tmp/member$i" || cat "$tmp/member$i" >&2
done

if [ "$mode" = local ]; then
  # 5b. A subscriber that stops reading: the agent keeps at most 1,024 of
  # its events, then sends RESYNC and the current state (one publication).
  bg_on A "$tmp/stall" "$SVC" stall 3000 4000
  wait_line "$tmp/stall" subscribed
  bg_on A "$tmp/churn" "$SVC" churn 3000 4000
  wait_line "$tmp/churn" ready
  wait_line "$tmp/stall" events
  bounded() {
    read -r _ events _ resync _ after < <(grep '^events' "$tmp/stall")
    echo "  a subscriber that did not read got $events of 8,001 events, $resync RESYNC, then $after"
    [ "$resync" -ge 1 ] && [ "$after" = 1 ] && [ "$events" -lt 8001 ]
  }
  check "a stalled subscriber is bounded and resynchronised" bounded
  "$SVC" quit 3000 0 100

  # 6. The agent is killed: the processes start another and publish again.
  kill -9 $(agents)
  refound() { SERVICES_WAIT_MS=5000 "$SVC" client 1000 7 5 >/dev/null; }
  check "after the agent is killed, the names come back" refound
fi

if [ "$mode" = netns ]; then
  # 6. A host that joins late receives the current table.
  check "a late host sees the table" run_on C "$SVC" client 1000 7 5
  # 7. Another domain key sees nothing and is not let in.
  other_key() { ! FM_KEY=$FM_KEY-other SERVICES_WAIT_MS=2000 run_on C "$SVC" client 1000 7 1 2>/dev/null; }
  check "another domain key finds nothing" other_key
  # 8. Host loss: everything of host A dies at once, its agent included.
  bg_on B "$tmp/watch2" "$SVC" watch 1000 0 100 4 20000
  wait_line "$tmp/watch2" subscribed
  sleep 0.3
  killed=$(run_on A "$SVC" now)
  ip netns pids "fmSA$$" | xargs -r kill -9
  wait_line "$tmp/watch2" WITHDRAWN
  check "a lost host's names are withdrawn within FM_NAMES_DOWN_MS + 1 s" within "$tmp/watch2" WITHDRAWN 1 "$killed" 2000
fi

# 9. Nothing left: every process ends, then the agents leave by themselves.
run_on A "$SVC" quit 1000 0 100 2>/dev/null
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
pids=()
gone() {
  for _ in $(seq 300); do
    [ -z "$(agents)" ] && return 0
    sleep 0.02
  done
  echo "agents still running: $(agents)" >&2
  return 1
}
check "the agents leave after their last client" gone
# The agents' own errors (a sanitizer's report included) go to their log.
clean_log() { ! grep -E "Sanitizer|runtime error|FAIL|error" "$tmp/agents.log" >&2; }
check "the agents logged no error" clean_log
if [ -s "$tmp/errors" ]; then
  echo "--- stderr of the programs:" >&2
  cat "$tmp/errors" >&2
fi
[ $fails -eq 0 ] && echo "services $mode: all passed" || echo "services $mode: $fails failed" >&2
exit $((fails > 0))
