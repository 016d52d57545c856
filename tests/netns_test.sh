#!/usr/bin/env bash
# Two hosts as a cluster has them, made of network namespaces: each has a
# management interface on a bridge to the root namespace, where the
# launchers run and PMI travels, and the two share a data link, which
# FM_RAILS picks for the ranks' UDP traffic. Ranks of one host use shared
# memory. fmrun starts ranks with 'ip netns exec' or with ssh (when sshd is
# installed), hydra with an ssh stand-in. Creates everything it needs and
# removes it after.
#   netns_test.sh FMRUN CONFORMANCE
set -u
FMRUN=$1
CONF=$2
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: needs ip (iproute2)"; exit 77; }

a=fmA$$ b=fmB$$ br=fmbr$$ ma=fmma$$ mb=fmmb$$ va=fmva$$ vb=fmvb$$
mgmt=10.$((150 + $$ % 50)).$(($$ % 250))
net=10.$((200 + $$ % 50)).$(($$ % 250)).0
tmp=$(mktemp -d)
cleanup() {
  [ -f "$tmp/sshd.pids" ] && kill $(cat "$tmp/sshd.pids") 2>/dev/null
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  ip link del "$br" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$a" && ip netns add "$b" &&
  ip link add "$br" type bridge && ip addr add "$mgmt.254/24" dev "$br" && ip link set "$br" up &&
  ip link add "$ma" type veth peer name mgmt netns "$a" &&
  ip link add "$mb" type veth peer name mgmt netns "$b" &&
  ip link set "$ma" master "$br" up && ip link set "$mb" master "$br" up &&
  ip -n "$a" addr add "$mgmt.1/24" dev mgmt && ip -n "$b" addr add "$mgmt.2/24" dev mgmt &&
  ip -n "$a" link set mgmt up && ip -n "$b" link set mgmt up &&
  ip link add "$va" type veth peer name "$vb" &&
  ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" &&
  ip -n "$a" addr add "${net%.0}.1/24" dev "$va" && ip -n "$b" addr add "${net%.0}.2/24" dev "$vb" &&
  ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up &&
  ip -n "$a" link set lo up && ip -n "$b" link set lo up ||
  { echo "SKIP: cannot create network namespaces here"; exit 77; }

export FM_RAILS="$net/24" FMT_TIMEOUT=120
launch=(--hosts "$a,$b" --launcher "ip netns exec {host}" --pmi-addr "$mgmt.254")
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
for fault in drop=0.05 dup=0.05 reorder=0.05 corrupt=0.01 drop=0.02,dup=0.02,reorder=0.02,corrupt=0.005 \
  drop=0.05,corrupt=0.01,on=send dup=0.05,reorder=0.05,on=recv; do
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
ip -n "$a" link set "$va" up

# The launchers clusters run, across the two hosts.
if command -v mpiexec.hydra >/dev/null; then
  hydra=(mpiexec.hydra -hosts "$a,$b" -launcher ssh -launcher-exec "$HERE/netns_exec_ssh.sh"
         -localhost "$mgmt.254")
  check "hydra -hosts a,b -n 4, PMI-1" "${hydra[@]}" -n 4 "$CONF" order_many
  check "hydra -hosts a,b -n 4, PMI-2" env FM_BOOTSTRAP=pmi2 "${hydra[@]}" -n 4 "$CONF" pingpong
  check "hydra -hosts a,b -n 4, PMI-1 over PMI_PORT" "${hydra[@]}" -pmi-port -n 4 "$CONF" order_many
fi
# fmrun through a launcher that hands the command to a shell, as ssh does.
mkdir "$tmp/bin" && ln -s "$HERE/netns_exec_ssh.sh" "$tmp/bin/ssh"
check "fmrun --hosts through an ssh-like launcher" \
  "$FMRUN" --hosts "$a,$b" --launcher "$tmp/bin/ssh {host}" --pmi-addr "$mgmt.254" -n 4 \
  "$CONF" pingpong
# And through real ssh to an sshd in each namespace, on the management
# network; fmrun finds its own PMI address from the route to the host.
if [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null; then
  ssh-keygen -q -t ed25519 -N "" -f "$tmp/host_key" && ssh-keygen -q -t ed25519 -N "" -f "$tmp/id"
  cp "$tmp/id.pub" "$tmp/authorized_keys"
  printf '%s\n' "HostKey $tmp/host_key" "AuthorizedKeysFile $tmp/authorized_keys" \
    "PermitRootLogin prohibit-password" "PasswordAuthentication no" "UsePAM no" \
    "StrictModes no" "PidFile none" >"$tmp/sshd_config"
  printf '%s\n' "Host *" "IdentityFile $tmp/id" "StrictHostKeyChecking no" \
    "UserKnownHostsFile /dev/null" "LogLevel ERROR" "BatchMode yes" "ConnectTimeout 5" \
    >"$tmp/ssh_config"
  mkdir -p /run/sshd
  for h in "$a:1" "$b:2"; do
    ip netns exec "${h%:*}" /usr/sbin/sshd -D -f "$tmp/sshd_config" \
      -o ListenAddress="$mgmt.${h#*:}" -E "$tmp/sshd.log" &
    echo $! >>"$tmp/sshd.pids"
  done
  for i in $(seq 50); do # until both listen
    ssh -F "$tmp/ssh_config" "$mgmt.1" true 2>/dev/null && ssh -F "$tmp/ssh_config" "$mgmt.2" true 2>/dev/null && break
    sleep 0.1
  done
  check "fmrun --hosts over ssh" \
    "$FMRUN" --hosts "$mgmt.1,$mgmt.2" --launcher "ssh -F $tmp/ssh_config {host}" -n 4 \
    "$CONF" order_many
  # A host nothing answers for: fmrun says which rank and asks about the host.
  "$FMRUN" --hosts "$mgmt.1,$mgmt.9" --launcher "ssh -F $tmp/ssh_config -o ConnectTimeout=1 {host}" \
    -n 2 "$CONF" pingpong 2>"$tmp/err"
  check "an unreachable host is named" grep -q "failed for rank 1: is its host reachable" "$tmp/err"
else
  echo "note: sshd not installed (Debian package openssh-server): the real ssh cases are left out"
fi

exit $((fails > 0))
