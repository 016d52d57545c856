#!/usr/bin/env bash
# The Sandia OpenSHMEM test suite (openshmem-org/tests-sos: unit tests and
# the specification's examples) against libfmshmem, built with its oshcc.
#   SOS_TESTS=DIR bash tests/sos_test.sh [BUILD]
# DIR is a checkout of tests-sos (docs/shmem.md says where); BUILD is the
# fastmsg build directory (default build/release). Builds the suite in
# DIR/build-fastmsg, then runs every test with 2 PEs on this node, 4 PEs
# with every peer remote over UDP, and the examples with 2 PEs; one test at
# a time, 120 s each.
# Exit status: 0 when every test passed, 1 otherwise, 77 without SOS_TESTS.
set -u
cd "$(dirname "$0")/.."
BUILD=$PWD/${1:-build/release}
[ -n "${SOS_TESTS:-}" ] && [ -f "$SOS_TESTS/configure.ac" ] || {
  echo "SKIP: set SOS_TESTS to a checkout of tests-sos" >&2
  exit 77
}
bdir=$SOS_TESTS/build-fastmsg
if [ ! -f "$bdir/Makefile" ]; then
  (cd "$SOS_TESTS" && ./autogen.sh >/dev/null 2>&1) || exit 1
  mkdir -p "$bdir"
  (cd "$bdir" && "$SOS_TESTS/configure" CC="$BUILD/tools/oshcc" --disable-cxx --disable-fortran \
    --with-test-runner="timeout 120 $BUILD/tools/fmrun -n \$(NPROCS)" >/dev/null) || exit 1
fi
fails=0
# check DIR NPROCS [VAR=VALUE...]: make check in one directory of the suite.
check() {
  local dir=$1 np=$2
  shift 2
  local out
  out=$(cd "$bdir/test/$dir" && env "$@" make -s check -j1 NPROCS="$np" 2>&1)
  echo "== test/$dir, $np PEs${*:+, $*}"
  grep -E '^(FAIL|ERROR|XPASS):|^# (TOTAL|PASS|FAIL|ERROR):' <<<"$out"
  grep -qE '^# (FAIL|ERROR): +[1-9]' <<<"$out" && fails=$((fails + 1))
  grep -q '^# TOTAL' <<<"$out" || { echo "(did not build or run)"; fails=$((fails + 1)); }
}
check unit 2
check unit 4 FM_SHMEM_LOCAL=0 FM_TRANSPORTS=udp
check spec-example 2
[ $fails -eq 0 ]
