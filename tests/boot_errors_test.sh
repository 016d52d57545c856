#!/usr/bin/env bash
# A program started by one launcher while fastmsg expects another, a missing
# libpmix, a launcher that cannot be reached: each fails fm_init with a
# message that names the bootstrap and what to change, never a hang or a
# job of singletons. So does a malformed FM_FAULT, even in a job on one node
# that never uses the network path, and FM_TRANSPORTS set differently on two
# ranks.
#   boot_errors_test.sh FMRUN CONFORMANCE
set -u
FMRUN=$1
CONF=$2
fails=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# expect_failure "what" "message part" command...
expect_failure() {
  local what=$1 msg=$2
  shift 2
  timeout 60 "$@" >/dev/null 2>"$err"
  local st=$?
  [ $st -ne 0 ] && [ $st -ne 124 ] || fail "$what: status $st, expected a failure"
  grep -q -- "$msg" "$err" || fail "$what: stderr lacks '$msg': $(head -c 400 "$err")"
}

expect_failure "pmix forced under fmrun" "PMIX_NAMESPACE is not set" \
  env FM_BOOTSTRAP=pmix "$FMRUN" -n 2 "$CONF" pingpong
grep -q "unset FM_BOOTSTRAP or set it to pmi1" "$err" || fail "pmix under fmrun: no hint"
expect_failure "pmi2 forced under fmrun" "speaks PMI version 1, not 2" \
  env FM_BOOTSTRAP=pmi2 "$FMRUN" -n 2 "$CONF" pingpong
expect_failure "pmi1 forced without a launcher" "neither PMI_FD nor PMI_PORT is set" \
  env FM_BOOTSTRAP=pmi1 "$CONF" singleton
expect_failure "srun without a PMI plugin" "use srun --mpi=pmi2" \
  env SLURM_NTASKS=4 SLURM_PROCID=0 "$CONF" singleton
# Nothing listens on port 1 of the loopback.
expect_failure "unreachable PMI_PORT" "cannot connect to the launcher at PMI_PORT=127.0.0.1:1" \
  env PMI_PORT=127.0.0.1:1 PMI_ID=0 "$CONF" singleton
expect_failure "PMI_PORT without PMI_ID" "PMI_ID is not a number" \
  env PMI_PORT=127.0.0.1:1 "$CONF" singleton
# Each rank reads its own environment: a rank with other transports says so.
expect_failure "FM_TRANSPORTS differs between ranks" "FM_TRANSPORTS is udp here and shm,udp on rank 0" \
  "$FMRUN" -n 2 sh -c "[ \"\$PMI_RANK\" = 1 ] && export FM_TRANSPORTS=udp; exec \"$CONF\" pingpong"
expect_failure "FM_FAULT on=sideways, one node" "on=sideways is not send, recv or both" \
  env FM_FAULT=drop=0.01,on=sideways "$FMRUN" -n 2 "$CONF" pingpong

# libpmix missing: hide it in a private mount namespace.
lib=$(ldconfig -p | awk '/libpmix\.so\.2 .*x86-64/ {print $NF; exit}')
if [ -n "$lib" ] && unshare -m true 2>/dev/null; then
  expect_failure "libpmix missing" "libpmix.so.2 cannot be loaded" \
    unshare -m sh -c 'mount --bind /dev/null "$(readlink -f "$1")" && shift && exec "$@"' \
    sh "$lib" env PMIX_NAMESPACE=job-without-pmix "$CONF" singleton
else
  echo "note: libpmix not installed or no mount namespaces: missing-libpmix case left out"
fi

[ $fails -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "boot errors: all messages as expected"
