#!/usr/bin/env bash
# peers.sh — build and run the baselines that fmperf is compared against, on one node.
#
#   bash bench/peers.sh > peers.jsonl          # full run
#   QUICK=1 bash bench/peers.sh > peers.jsonl  # smoke run: few sizes, few iterations
#   bash bench/peers.sh --one LABEL TEST ARGS  # one run: LABEL raw, openmpi-vader, openmpi-ucx
#                                              # or mpich; TEST and ARGS as for mpi_perf
#
# stdout carries only JSON lines (one per result, keys as in fmperf --json); everything else,
# including each failed or timed-out run, goes to stderr.  A failed run does not stop the others;
# the exit status is 1 if any build or run failed.
#
# Peers: raw_shm (no library: the hardware floor), then for each test Open MPI over its own
# shared-memory BTL ("openmpi-vader"), Open MPI over UCX ("openmpi-ucx") and MPICH ("mpich").
# latency, bw and msgrate use 2 ranks bound to cores 0 and 1; ring and allreduce use 4 ranks,
# two per core on this 2-core machine.
#
# Environment:
#   BENCH_BUILD     build directory (default /tmp/fastmsg-bench-build)
#   SIZES_LATENCY   --sizes for latency, e.g. 0,8,1K,64K
#   SIZES_BW        --sizes for bw
#   ITERS           --iters for every run (mpi_perf: see its --help; bw counts messages)
#   QUICK=1         few sizes and iterations; explicit SIZES_*/ITERS still win
#   TIMEOUT         seconds allowed per run (default 300, QUICK 90)
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${BENCH_BUILD:-/tmp/fastmsg-bench-build}
quick=${QUICK:-0}
status=0

log() { printf 'peers.sh: %s\n' "$*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------- settings

if [ "$quick" = 1 ]; then
    limit=${TIMEOUT:-90}
    sizes_lat=${SIZES_LATENCY:-0,8,1K,64K}
    sizes_bw=${SIZES_BW:-8,4K,1M}
    reps=(--reps 3)
    # per-test counts; bw counts messages, so 640 = 10 windows of 64
    it_lat=(--iters "${ITERS:-1000}")
    it_bw=(--iters "${ITERS:-640}")
    it_rate=(--iters "${ITERS:-100000}")
    it_coll=(${ITERS:+--iters "$ITERS"}) # unset: mpi_perf sizes ring/allreduce by time
    it_raw=(--iters "${ITERS:-200000}")
else
    limit=${TIMEOUT:-300}
    sizes_lat=${SIZES_LATENCY:-}
    sizes_bw=${SIZES_BW:-}
    reps=()
    it_lat=(${ITERS:+--iters "$ITERS"})
    it_bw=("${it_lat[@]}")
    it_rate=("${it_lat[@]}")
    it_coll=("${it_lat[@]}")
    it_raw=("${it_lat[@]}")
fi

# ---------------------------------------------------------------- build

mkdir -p "$build" || exit 1
warn=(-std=c11 -O2 -Wall -Wextra)

compile() { # compile OUTPUT COMPILER ARGS... (the source is the last argument)
    local out=$1
    shift
    [ "$build/$out" -nt "${!#}" ] && return 0 # up to date
    if ! have "$1"; then
        log "skip $out: $1 not found"
        status=1
        return 1
    fi
    if ! "$@" -o "$build/$out" >&2; then
        log "build of $out failed"
        status=1
        return 1
    fi
}

compile raw_shm gcc "${warn[@]}" "$here/raw_shm.c"
compile mpi_perf.openmpi mpicc.openmpi "${warn[@]}" "$here/mpi_perf.c"
compile mpi_perf.mpich mpicc.mpich "${warn[@]}" "$here/mpi_perf.c"

# ---------------------------------------------------------------- running

# run DESCRIPTION CMD... : run under a time limit, pass JSON lines to stdout, the rest to stderr.
run() {
    local what=$1 out err rc
    shift
    out=$(mktemp) err=$(mktemp)
    log "run $what"
    # TERM first so mpirun/mpiexec can take their ranks down with them; KILL 10 s later.
    timeout -k 10 "$limit" "$@" >"$out" 2>"$err"
    rc=$?
    grep -E '^\{.*\}$' "$out"
    grep -vE '^\{.*\}$' "$out" >&2
    cat "$err" >&2
    if [ "$rc" -ne 0 ]; then
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            log "FAILED $what: timed out after ${limit}s"
        else
            log "FAILED $what: exit status $rc"
        fi
        status=1
    fi
    rm -f "$out" "$err"
}

ompi=(mpirun.openmpi --allow-run-as-root)
ompi_2=(--map-by core --bind-to core)
# 4 ranks on 2 cores: ranks 0,2 on core 0 and 1,3 on core 1, as MPICH's -bind-to core does.
ompi_4=(--oversubscribe --map-by core --bind-to core:overload-allowed)
pml_vader=(--mca pml ob1 --mca btl self,vader)
pml_ucx=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)

# peer_cmd LABEL NRANKS : print nothing, set the array `cmd` to the launcher prefix
peer_cmd() {
    local label=$1 n=$2 place
    if [ "$n" -le 2 ]; then place=("${ompi_2[@]}"); else place=("${ompi_4[@]}"); fi
    case $label in
    openmpi-vader) cmd=("${ompi[@]}" -n "$n" "${place[@]}" "${pml_vader[@]}" "$build/mpi_perf.openmpi") ;;
    openmpi-ucx) cmd=("${ompi[@]}" -n "$n" "${place[@]}" "${pml_ucx[@]}" "$build/mpi_perf.openmpi") ;;
    mpich) cmd=(mpiexec.mpich -n "$n" -bind-to core "$build/mpi_perf.mpich") ;;
    esac
}

# --one LABEL TEST ARGS...: one run of one peer (bench/run.sh's goal rounds).
if [ "${1:-}" = "--one" ]; then
    label=$2 test=$3
    shift 3
    case $test in ring | allreduce) n=4 ;; *) n=2 ;; esac
    if [ "$label" = raw ]; then
        run raw_shm "$build/raw_shm" --json "$@"
    else
        peer_cmd "$label" "$n"
        run "$test $label ($n ranks)" "${cmd[@]}" "$test" --json --label "$label" "$@"
    fi
    exit "$status"
fi

if [ -x "$build/raw_shm" ]; then
    run raw_shm "$build/raw_shm" --json "${it_raw[@]}"
fi

for test in latency bw msgrate ring allreduce; do
    case $test in
    latency) n=2 args=(${sizes_lat:+--sizes "$sizes_lat"} "${it_lat[@]}") ;;
    bw) n=2 args=(${sizes_bw:+--sizes "$sizes_bw"} "${it_bw[@]}") ;;
    msgrate) n=2 args=("${it_rate[@]}" "${reps[@]}") ;;
    ring | allreduce) n=4 args=("${it_coll[@]}" "${reps[@]}") ;;
    esac
    for label in openmpi-vader openmpi-ucx mpich; do
        case $label in
        openmpi-*) bin=$build/mpi_perf.openmpi ;;
        mpich) bin=$build/mpi_perf.mpich ;;
        esac
        [ -x "$bin" ] || continue # its build failure was reported above
        peer_cmd "$label" "$n"
        run "$test $label ($n ranks)" "${cmd[@]}" "$test" --json --label "$label" "${args[@]}"
    done
done

exit "$status"
