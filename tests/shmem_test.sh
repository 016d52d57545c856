#!/usr/bin/env bash
# OpenSHMEM jobs that a single ctest line cannot express.
#   shmem_test.sh errors FMRUN ERRORS_PROGRAM
#       bad use ends the job with one clear line: a PE out of range, an
#       address that is not symmetric, an exhausted heap, a PE that dies
#       (on this node, and across the network with the server threads);
#       shmem_global_exit ends every PE with its status
#   [ERRORS=ERRORS_PROGRAM] shmem_test.sh netns FMRUN PROGRAM...
#       each program across two hosts made of network namespaces, 2 PEs on
#       each (half of every PE's peers on its node, half across the
#       network), over one rail and over two; with ERRORS, a PE of one host
#       killed in a barrier, and one calling shmem_global_exit
# Creates what it needs and removes it after; fails if anything is left in
# /dev/shm.
set -u
mode=$1 FMRUN=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
fails=0
check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then echo "ok: $name"; else echo "FAIL: $name" >&2; fails=$((fails + 1)); fi
}
shm_before=$(ls -A /dev/shm | sort)

# expect NAME STATUS PATTERN [ENV=V...] -- fmrun args: runs the job with a
# time limit; the status must match (a number, or "fail" for any but 0) and
# stderr must contain PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local err rc
  err=$(env "${envs[@]}" timeout 60 "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 124 ]; then
    echo "  $name: hung (no end after 60 s)" >&2
    return 1
  fi
  if { [ "$want" = fail ] && [ $rc -eq 0 ]; } || { [ "$want" != fail ] && [ $rc -ne "$want" ]; }; then
    echo "  $name: status $rc, wanted $want; stderr: $err" >&2
    return 1
  fi
  if ! grep -q -- "$pattern" <<<"$err"; then
    echo "  $name: stderr lacks '$pattern': $err" >&2
    return 1
  fi
}

case $mode in
errors)
  prog=$1
  check "a PE out of range is named" \
    expect pe fail "PE 2 is out of range" FM_LOG=error -- "$FMRUN" -n 2 "$prog" pe
  check "a stack address is not symmetric" \
    expect addr fail "is not symmetric" FM_LOG=error -- "$FMRUN" -n 2 "$prog" addr
  check "an exhausted heap returns NULL and names SHMEM_SYMMETRIC_SIZE" \
    expect heap 0 "raise SHMEM_SYMMETRIC_SIZE" FM_LOG=error -- "$FMRUN" -n 2 "$prog" heap
  check "a dead PE ends the job (the launcher)" \
    expect die fail "killed by signal 9" FM_LOG=error -- "$FMRUN" -n 3 "$prog" die
  # Without the launcher's help: the survivors see the loss themselves.
  check "a dead PE on this node: the others end with its number" \
    expect die-local fail "PE 2 died" FM_LOG=error -- "$FMRUN" --keep-going -n 3 "$prog" die
  check "shmem_global_exit(0) ends every PE, and the job with 0" \
    expect exit0 0 "rank 1 asked to end the job with status 0" FM_LOG=error -- \
    "$FMRUN" -n 3 "$prog" exit 0
  check "shmem_global_exit(3) ends every PE, and the job with 3" \
    expect exit3 3 "rank 1 asked to end the job with status 3" FM_LOG=error FM_SHMEM_LOCAL=0 \
    FM_TRANSPORTS=udp -- "$FMRUN" -n 3 "$prog" exit 3
  check "a dead PE across the network: the others end with its number" \
    expect die-net fail "PE 2 died" FM_LOG=error FM_SHMEM_LOCAL=0 FM_TRANSPORTS=udp \
    FM_NET_TIMEOUT_MS=1000 -- "$FMRUN" --keep-going -n 3 "$prog" die
  ;;
netns)
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
  cd "$HERE/.."
  source bench/rails_ns.sh
  trap rails_ns_down EXIT
  rails_ns_up || { echo "SKIP: cannot create network namespaces here"; exit 77; }
  launch=(--hosts "$A,$B" --launcher "ip netns exec {host}" --pmi-addr "$MGMT.254")
  for rails in "0" "0 1"; do
    for prog in "$@"; do
      # shellcheck disable=SC2086
      check "$(basename "$prog"): 4 PEs on 2 hosts, rails $rails" \
        env FM_RAILS="$(rails_spec $rails)" FM_LOG=error timeout 300 "$FMRUN" "${launch[@]}" \
        -n 4 "$prog"
    done
  done
  if [ -n "${ERRORS:-}" ]; then
    # PE 3 (host B) dies in a barrier: PE 2 sees it on its node, PEs 0 and 1
    # through the network's timeout; all end naming it.
    check "a dead PE on another host: the others end with its number" \
      expect die-hosts fail "PE 3 died" FM_RAILS="$(rails_spec 0)" FM_LOG=error \
      FM_NET_TIMEOUT_MS=1000 -- "$FMRUN" --keep-going "${launch[@]}" -n 4 "$ERRORS" die
    # PE 1 (host A) ends the job: its request reaches fmrun over TCP.
    check "shmem_global_exit(5) on one host ends the PEs of both, and the job with 5" \
      expect exit-hosts 5 "rank 1 asked to end the job with status 5" \
      FM_RAILS="$(rails_spec 0)" FM_LOG=error -- "$FMRUN" "${launch[@]}" -n 4 "$ERRORS" exit 5
  fi
  ;;
*)
  echo "usage: shmem_test.sh errors|netns FMRUN PROGRAM..." >&2
  exit 2
  ;;
esac

new=$(comm -13 <(echo "$shm_before") <(ls -A /dev/shm | sort))
if [ -n "$new" ]; then
  echo "FAIL: left behind in /dev/shm: $new" >&2
  fails=$((fails + 1))
fi
[ $fails -eq 0 ]
