#!/usr/bin/env bash
# fmrun as a user meets it: bad usage, missing programs, failing and killed
# ranks, output tagging, CPU binding, the PMI address ranks on --hosts are
# given, and fmrun itself being killed.
#   fmrun_test.sh FMRUN CONFORMANCE
set -u
FMRUN=$1
CONF=$2
fails=0
out=$(mktemp)
err=$(mktemp)
ns=fmrunNS$$
trap 'rm -f "$out" "$err"; [ -e "/run/netns/$ns" ] && ip netns del "$ns"' EXIT

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
run() { "$@" >"$out" 2>"$err"; }
expect_status() { [ "$1" -eq "$2" ] || fail "$3: status $1, expected $2 ($(head -c 300 "$err"))"; }
expect_err() { grep -q -- "$1" "$err" || fail "stderr lacks '$1': $(head -c 300 "$err")"; }

run "$FMRUN"; expect_status $? 2 "no arguments"; expect_err "number of ranks is missing"
run "$FMRUN" -n 2; expect_status $? 2 "no program"; expect_err "program to run is missing"
run "$FMRUN" -n zero true; expect_status $? 2 "bad -n"; expect_err "not 'zero'"
run "$FMRUN" -n 2 --bind-to socket true; expect_status $? 2 "bad --bind-to"
run "$FMRUN" --frobnicate -n 2 true; expect_status $? 2 "unknown option"
run "$FMRUN" -n 2 no-such-program-xyz; expect_status $? 127 "missing program"
expect_err "cannot run 'no-such-program-xyz': not found in PATH"
run "$FMRUN" -n 2 /tmp; expect_status $? 126 "a directory"; expect_err "is a directory"
run "$FMRUN" --help; expect_status $? 0 "--help"
grep -q "usage: fmrun" "$out" || fail "--help prints no usage"
run "$FMRUN" -n 3 true; expect_status $? 0 "three ranks of true"

# A failing rank ends the job with its status and says which and how.
start=$(date +%s)
run "$FMRUN" -n 3 sh -c '[ "$PMI_RANK" = 1 ] && exit 3; sleep 30'
expect_status $? 3 "rank exit 3"
expect_err "rank 1 (pid [0-9]*) exited with status 3"
[ $(($(date +%s) - start)) -lt 10 ] || fail "the other ranks were not ended"

run "$FMRUN" -n 2 sh -c '[ "$PMI_RANK" = 0 ] && kill -9 $$; sleep 30'
expect_status $? 137 "rank killed"
expect_err "rank 0 (pid [0-9]*) was killed by signal 9 (SIGKILL)"

# --keep-going: the others finish their work.
run "$FMRUN" --keep-going -n 2 sh -c '[ "$PMI_RANK" = 0 ] && exit 4; sleep 1; echo survivor'
expect_status $? 4 "keep-going status"
grep -q survivor "$out" || fail "--keep-going: the other rank did not finish"

# --tag-output prefixes each line, also a last line without newline.
run "$FMRUN" -n 2 --tag-output sh -c 'echo "hello $PMI_RANK"; printf "tail"'
expect_status $? 0 "tag-output"
for r in 0 1; do
  grep -qx "\[$r\] hello $r" "$out" || fail "--tag-output: no '[$r] hello $r' in $(cat "$out")"
done
[ "$(grep -c '^\[[01]\] tail$' "$out")" -eq 2 ] || fail "--tag-output: unterminated lines lost"

# Binding: rank i on CPU i mod CPUs by default, nothing with --bind-to none.
ncpu=$(nproc)
run "$FMRUN" -n 3 sh -c 'echo "$PMI_RANK $(taskset -pc $$ | sed "s/.*: //")"'
for r in 0 1 2; do
  grep -qx "$r $((r % ncpu))" "$out" || fail "rank $r not bound to CPU $((r % ncpu)): $(cat "$out")"
done
run "$FMRUN" -n 2 --bind-to none sh -c 'taskset -pc $$ | sed "s/.*: //"'
[ "$(sort -u "$out")" = "$(taskset -pc $$ | sed 's/.*: //')" ] || fail "--bind-to none bound ranks"

# A rank that dies before the bootstrap fence: the others fail fm_init with
# a message instead of hanging.
run "$FMRUN" --keep-going -n 2 sh -c '[ "$PMI_RANK" = 1 ] && exit 5; exec "$0" pingpong' "$CONF"
expect_status $? 5 "death before init"
expect_err "bootstrap"

# --hosts whose names are no addresses (namespaces, ssh aliases): the ranks
# get an address of this machine, not loopback, which would refuse them.
# The launcher starts them here, as a launcher would on the host.
nohost=fmrun-no-such-host.invalid
here="env FMRUN_HOST={host}"
if command -v ip >/dev/null && ip -4 -o addr show up | grep -qv ' inet 127\.'; then
  run "$FMRUN" --hosts $nohost --launcher "$here" -n 2 sh -c 'echo "${PMI_PORT%:*}"'
  expect_status $? 0 "--hosts with a name that does not resolve"
  addr=$(sort -u "$out")
  case $addr in 127.* | "") fail "PMI_PORT names '$addr' for a host that does not resolve" ;; esac
  ip -4 -o addr show | grep -q " inet $addr/" || fail "PMI_PORT names '$addr', not this machine"
  run "$FMRUN" --hosts $nohost --launcher "$here" -n 2 "$CONF" pingpong
  expect_status $? 0 "ranks reach fmrun's PMI at the address chosen for them"
fi
if unshare -rn true 2>/dev/null; then
  # A machine with loopback only has nothing to offer: fmrun says so at once.
  run unshare -rn "$FMRUN" --hosts $nohost --launcher "$here" -n 2 true
  expect_status $? 1 "--hosts on a machine with loopback only"
  expect_err "no IPv4 address but loopback: .* --pmi-addr"
  # Ranks that cannot reach the PMI address (in a network namespace of their
  # own here) fail in fm_init; fmrun says what to do.
  run "$FMRUN" --hosts $nohost --launcher "unshare -rn $here" --pmi-addr 127.0.0.1 -n 2 \
    "$CONF" pingpong
  expect_status $? 1 "ranks that cannot reach the PMI address"
  expect_err "rank [01] never connected to PMI_PORT=127.0.0.1:[0-9]*: .* --pmi-addr A"
fi
# Hosts that are network namespaces ('ip netns exec {host}'): fmrun's
# address on the namespace's network, not merely its first one.
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && ip netns add "$ns" 2>/dev/null; then
  sub=10.$((250 + $$ % 5)).$(($$ % 250))
  ip link add "fmrv$$" type veth peer name eth0 netns "$ns" &&
    ip addr add "$sub.254/24" dev "fmrv$$" && ip link set "fmrv$$" up &&
    ip -n "$ns" addr add "$sub.1/24" dev eth0 && ip -n "$ns" link set eth0 up &&
    ip -n "$ns" link set lo up || fail "cannot set up the namespace $ns"
  run "$FMRUN" --hosts "$ns" --launcher "ip netns exec {host}" -n 2 sh -c 'echo "${PMI_PORT%:*}"'
  [ "$(sort -u "$out")" = "$sub.254" ] ||
    fail "namespace host: PMI_PORT names '$(sort -u "$out")', not $sub.254 ($(head -c 300 "$err"))"
  run "$FMRUN" --hosts "$ns" --launcher "ip netns exec {host}" -n 2 "$CONF" pingpong
  expect_status $? 0 "ranks in a namespace reach fmrun's PMI"
fi

# fmrun killed: its ranks go too, and nothing is left in /dev/shm.
shm_before=$(ls -A /dev/shm | sort)
set +m
"$FMRUN" -n 2 "$CONF" wait_idle >/dev/null 2>&1 &
fmrun_pid=$!
sleep 0.3
kill -9 $fmrun_pid
wait $fmrun_pid 2>/dev/null || true
sleep 0.5
if pgrep -f "$CONF wait_idle" >/dev/null; then
  fail "ranks survived fmrun's death"
  pkill -9 -f "$CONF wait_idle"
fi
[ "$(ls -A /dev/shm | sort)" = "$shm_before" ] || fail "/dev/shm changed after fmrun was killed"

[ $fails -eq 0 ] && echo "fmrun: all checks passed"
exit $((fails > 0))
