#!/bin/sh
# run_oshmem.sh: builds the OpenSHMEM test programs of this directory with Open MPI's oshmem
# (Open MPI 4.1, OpenSHMEM 1.4) and runs each at 2 and 4 PEs, to show that they are valid
# programs on an independent implementation.  Their 1.5-only parts compile out there; each
# file's header lists what else is guarded because of oshmem bugs.
#
# Usage: tests/shmem/run_oshmem.sh [NP ...]        (default: 2 4)
# Environment: OSHCC (default /usr/bin/oshcc), OSHRUN (default /usr/bin/oshrun),
#              TIMEOUT, seconds per run (default 120).
# Exit status: 0 if every program built and passed at every NP, 77 if oshmem is not
# installed, 1 otherwise.
set -u

here=$(cd "$(dirname "$0")" && pwd)
oshcc=${OSHCC:-/usr/bin/oshcc}
oshrun=${OSHRUN:-/usr/bin/oshrun}
limit=${TIMEOUT:-120}
nps=${*:-2 4}

if [ ! -x "$oshcc" ] || [ ! -x "$oshrun" ]; then
    echo "skip: $oshcc or $oshrun missing (Open MPI's oshmem is not installed)"
    exit 77
fi

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT

failed=0
for src in "$here"/*.c; do
    prog=$(basename "$src" .c)
    if ! "$oshcc" -std=c11 -O2 -Wall -Wextra -Werror -I"$here" -o "$build/$prog" "$src"; then
        echo "FAIL build $prog"
        failed=1
        continue
    fi
    for np in $nps; do
        # Without "--mca osc ^rdma" oshmem crashes in shmem_finalize.
        out=$(timeout "$limit" "$oshrun" --allow-run-as-root --oversubscribe --mca osc ^rdma \
            -np "$np" "$build/$prog" 2>&1)
        rc=$?
        if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -qx "ok: $prog"; then
            echo "pass $prog -np $np"
            printf '%s\n' "$out" | grep "^$prog: " | sed 's/^/    /'
        else
            echo "FAIL $prog -np $np (exit $rc)"
            printf '%s\n' "$out" | head -n 20 | sed 's/^/    /'
            failed=1
        fi
    done
done
exit "$failed"
