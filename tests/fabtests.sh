#!/usr/bin/env bash
# libfabric's own test suite (fabtests) against the fastmsg provider.
#   FABTESTS_BIN=DIR bash tests/fabtests.sh [BUILD]
# DIR holds fabtests built for the installed libfabric (docs/mpi.md says
# how: libfabric's fabtests/ at the tag of that version); BUILD is the
# fastmsg build directory (default build/release). Runs the unit,
# functional and standard sets with runfabtests.sh on this host, server and
# client on 127.0.0.1: over shared memory, then (FM_TRANSPORTS=udp) over
# the network path.
#
# Unit tests pass names by host and port; the others exchange the opaque
# fastmsg names out of band (-b), as fi_pingpong does. Excluded: tests of
# MSG (connected) endpoints, which the provider does not offer and which
# runfabtests counts as failures under -b, and fi_getinfo_test, whose
# cases expect a source address in every fi_info (docs/mpi.md).
# Exit status: 0 when nothing failed, 1 otherwise, 77 without FABTESTS_BIN.
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
[ -n "${FABTESTS_BIN:-}" ] && [ -x "$FABTESTS_BIN/runfabtests.sh" ] || {
  echo "SKIP: set FABTESTS_BIN to a directory with fabtests' runfabtests.sh" >&2
  exit 77
}
export FI_PROVIDER_PATH=$PWD/$BUILD/src
[ -f "$FI_PROVIDER_PATH/libfastmsg-fi.so" ] || {
  echo "FAIL: no $FI_PROVIDER_PATH/libfastmsg-fi.so" >&2
  exit 1
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() { # run SET [runfabtests options...]
  local set=$1
  shift
  timeout 1800 "$FABTESTS_BIN/runfabtests.sh" -v -p "$FABTESTS_BIN" -s 127.0.0.1 -c 127.0.0.1 \
    -t "$set" "$@" fastmsg >>"$log" 2>&1
}
for transports in shm,udp udp; do
  echo "+ FM_TRANSPORTS=$transports" >>"$log"
  export FM_TRANSPORTS=$transports
  run unit -e fi_getinfo_test
  run functional -b -e "-e msg,fi_cm_data,fi_msg_sockets"
  run standard -b -e "-e msg"
done
unset FM_TRANSPORTS
awk '/^\+ FM_TRANSPORTS/ {print; next}
     /^- name:/ {sub(/^- name: +/, ""); name = $0; next}
     / result:/ {sub(/^ +result: +/, ""); printf "  %-8s %s\n", $0, name}' "$log"
fails=$(grep -c 'result: Fail' "$log")
passes=$(grep -c 'result: Pass' "$log")
echo "fabtests: $passes passed, $fails failed (the others not run: capabilities not offered)"
if [ "$fails" -ne 0 ]; then
  grep -A12 'result: Fail' "$log" >&2
  exit 1
fi
