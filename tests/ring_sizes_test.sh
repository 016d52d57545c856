#!/usr/bin/env bash
# Ring memory follows use on the network path (docs/udp.md): a flow's ring
# grows for large messages and goes back to FM_NET_RING_MIN after a pause
# (the sender's gauge at exit; the receiver's flows have ended by then); with the receiver's FM_NET_RX_MEM exhausted, large
# messages go in parts of a small ring and still arrive whole and in order;
# a receiver with a smaller FM_NET_RING_SIZE than its sender gets it all.
#   ring_sizes_test.sh FMRUN CONFORMANCE
set -u
FMRUN=$1
CONF=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export FM_TRANSPORTS=udp FM_STATS=1 FM_LOG=warn
fails=0
# stat NAME RANK: a counter from rank RANK's FM_STATS line
stat() { sed -n "s/^fastmsg\[$2\] net:.* $1=\([0-9]*\).*/\1/p" "$tmp/err"; }
failed() { # failed WHAT: the run of WHAT failed; its stderr follows
  echo "FAIL: $1" >&2
  cat "$tmp/err" >&2
  fails=$((fails + 1))
}
check() { # check WHAT ACTUAL EXPECTED-TEST
  if [ -n "$2" ] && eval "[ $2 $3 ]"; then
    echo "ok: $1 ($2)"
  else
    echo "FAIL: $1: got '${2}', want $3" >&2
    fails=$((fails + 1))
  fi
}

if "$FMRUN" -n 2 "$CONF" ring_idle 2>"$tmp/err"; then
  check "64 KiB messages grew the sender's ring" "$(stat rings_grown 0)" "-ge 1"
  check "after a pause the sender holds a 32 KiB ring" "$(stat ring_tx_bytes 0)" "-eq 32768"
else
  failed ring_idle
fi

# A flow left unused for FM_NET_FLOW_IDLE_MS ends, small ring and all; what
# follows the pause goes by a new flow, in order. Not within the default.
if FM_NET_FLOW_IDLE_MS=300 "$FMRUN" -n 2 "$CONF" flow_idle 2>"$tmp/err"; then
  check "a small flow unused for 1.5 s with FM_NET_FLOW_IDLE_MS=300 ended" \
    "$(stat flows_idle_ended 0)" "-ge 1"
else
  failed "flow_idle with FM_NET_FLOW_IDLE_MS=300"
fi
if env -u FM_NET_FLOW_IDLE_MS "$FMRUN" -n 2 "$CONF" flow_idle 2>"$tmp/err"; then
  check "with the default (10 s) it did not" "$(stat flows_idle_ended 0)" "-eq 0"
else
  failed "flow_idle"
fi

if FM_NET_RX_MEM=1 FM_NET_RING_SIZE=256K FMT_STREAM_BYTES=$((4 << 20)) "$FMRUN" -n 2 "$CONF" stream 2>"$tmp/err"; then
  echo "ok: FM_NET_RX_MEM=1: a 4 MiB stream of messages up to 64 KiB, exactly, in order"
  check "the receiver's rings stayed at most one grown ring" "$(stat ring_rx_bytes 1)" "-le 262144"
else
  failed "stream under FM_NET_RX_MEM=1"
fi
# A receiver whose FM_NET_RING_SIZE is below its sender's: the sender's first
# large messages come before the receiver's first ACK says what it allows.
ranks_env() { # ranks_env ZERO ONE CASE: CASE with assignments ZERO for rank 0, ONE for rank 1
  # (FM_LOG=warn, as exported above, leaves a rank as it is)
  "$FMRUN" -n 2 sh -c "if [ \"\$PMI_RANK\" = 0 ]; then export $1; else export $2; fi; exec \"$CONF\" $3"
}
if ranks_env FM_LOG=warn FM_NET_RING_SIZE=64K stream 2>"$tmp/err"; then
  echo "ok: receiver's FM_NET_RING_SIZE=64K below the sender's: the stream exactly, in order"
  check "the receiver's rings stayed at most 64 KiB" "$(stat ring_rx_bytes 1)" "-le 65536"
else
  failed "stream to a receiver with a smaller FM_NET_RING_SIZE"
fi
# A sender whose FM_NET_RING_MIN is above the receiver's FM_NET_RING_SIZE,
# in a session the receiver opened (compute starts with a barrier): the
# receiver's HELLO bounds the sender's first flow (1 MiB before; the
# sender's gauge, taken while its flows are open).
if FM_NET_TIMEOUT_MS=400 FM_PROGRESS_THREAD=1 \
   ranks_env FM_NET_RING_MIN=1M FM_NET_RING_SIZE=64K compute 2>"$tmp/err"; then
  check "the receiver's HELLO bounded the sender's first flow" "$(stat ring_tx_bytes 0)" "-le 65536"
else
  failed "compute with the sender's FM_NET_RING_MIN above the receiver's FM_NET_RING_SIZE"
fi
# The same in a session the sender opened: its first flow goes with its
# HELLO at its FM_NET_RING_MIN, before the receiver said what it allows;
# after a pause it ends, and its successor is within the bound.
if ranks_env "FM_NET_RING_MIN=128K FM_NET_RING_SIZE=1M" FM_NET_RING_SIZE=64K ring_idle \
   2>"$tmp/err"; then
  check "after a pause the sender's ring is within the receiver's bound" \
    "$(stat ring_tx_bytes 0)" "-le 65536"
else
  failed "ring_idle with the sender's FM_NET_RING_MIN above the receiver's FM_NET_RING_SIZE"
fi
[ $fails -eq 0 ]
