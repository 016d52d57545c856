#!/usr/bin/env bash
# The main job: builds fastmsg, runs its benchmark over every transport with
# the baselines in the same run (kernel TCP and UDP, raw shared memory,
# Open MPI with vader and with UCX, MPICH; the network path between two
# network namespaces next to kernel UDP, TCP and iperf3; several rails next
# to TCP and MPTCP; OpenSHMEM next to Open MPI's oshmem; names next to TCP's
# connection per message; job start-up under each launcher next to
# MPI_Init), and prints the comparison.
#   bench/run.sh [--quick] [--publish]
# Raw results: build/bench/results.jsonl; the report: build/bench/report.md,
# with plots (bench/plots.py, matplotlib from build/venv) in build/bench/img/
# linked from its "## Plots" section. --publish (or FM_PUBLISH_PLOTS=1) also
# copies those PNGs to docs/img/, for docs/PERFORMANCE.md.
set -eu
cd "$(dirname "$0")/.."
quick=0
publish=${FM_PUBLISH_PLOTS:-0}
for a in "$@"; do
  case $a in
  --quick) quick=1 ;;
  --publish) publish=1 ;;
  *) echo "run.sh: unknown option $a (--quick, --publish)" >&2; exit 2 ;;
  esac
done
bash scripts/deps.sh bench
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release >/dev/null
mkdir -p build/bench
out=build/bench/results.jsonl
: > "$out"
FMRUN=build/release/tools/fmrun
FMPERF=build/release/tools/fmperf

# Runs one fastmsg measurement, its JSON lines into the results.
perf() {
  local n=$1
  shift
  echo "+ fmrun -n $n fmperf $*" >&2
  timeout 900 "$FMRUN" -n "$n" "$FMPERF" "$@" --json >>"$out" ||
    echo "fmperf $* failed" >&2
}

if [ $quick -eq 1 ]; then
  lat_sizes=0,8,1K,64K,1M
  bw_sizes=4K,1M,4M
  export QUICK=1
else
  lat_sizes=0,1,2,4,8,16,32,64,128,256,512,1K,2K,4K,8K,16K,32K,64K,128K,256K,512K,1M,2M,4M
  bw_sizes=8,64,512,4K,32K,256K,1M,4M
fi

# Goal rounds: the figures the goals compare, taken back to back and
# repeated, so that each ratio compares neighbours. (This VM's two CPUs
# sometimes sit on one physical core and sometimes not, for minutes at a
# time, which moves every shared-memory figure by 3-4x.)
rounds=3
[ $quick -eq 1 ] && rounds=1
round() { sed "s/^{/{\"round\": $1, /"; }
peer() { bash bench/peers.sh --one "$@" 2>/dev/null; }
for r in $(seq 1 $rounds); do
  echo "+ goal round $r of $rounds" >&2
  {
    peer raw latency --iters 50000
    "$FMRUN" -n 2 "$FMPERF" latency --sizes 8 --json
    peer openmpi-vader latency --sizes 8
    "$FMRUN" -n 2 "$FMPERF" msgrate --reps 3 --json
    peer openmpi-vader msgrate --reps 3
    "$FMRUN" -n 2 "$FMPERF" bw --sizes 1M,4M --json
    peer openmpi-ucx bw --sizes 1M,4M
    "$FMRUN" -n 2 "$FMPERF" bw --sizes 1M,4M --in-place --json
    "$FMRUN" -n 4 "$FMPERF" ring --json
    peer openmpi-vader ring
  } | round "$r" >>"$out"
done

# The full tables.
perf 2 latency --sizes "$lat_sizes" --peer tcp
perf 2 latency --sizes 8,1K,64K --peer udp
perf 2 bw --sizes "$bw_sizes" --peer tcp
perf 2 bw --sizes 64K,1M,4M --in-place
perf 2 msgrate --peer tcp
perf 2 msgrate --peer udp
perf 4 ring --peer tcp
perf 8 ring
perf 2 idle
echo "+ bench/peers.sh (raw shared memory, Open MPI, MPICH)" >&2
bash bench/peers.sh >>"$out" || echo "bench/peers.sh failed" >&2
echo "+ bench/net.sh (the network path between two namespaces)" >&2
bash bench/net.sh $([ $quick -eq 1 ] && echo --quick) >>"$out" || echo "bench/net.sh failed" >&2

echo "+ bench/incast.sh (8 and 32 senders into one receiver through a 1 Gbit/s port)" >&2
bash bench/incast.sh $([ $quick -eq 1 ] && echo --quick) >>"$out" || echo "bench/incast.sh failed" >&2

echo "+ bench/rails.sh (several rails shaped to 1 Gbit/s, MPTCP)" >&2
bash bench/rails.sh $([ $quick -eq 1 ] && echo --quick) >/dev/null || echo "bench/rails.sh failed" >&2

echo "+ bench/shmem.sh (OpenSHMEM next to Open MPI's oshmem, and between two hosts)" >&2
bash bench/shmem.sh $([ $quick -eq 1 ] && echo --quick) >/dev/null || echo "bench/shmem.sh failed" >&2

echo "+ bench/names.sh (names: lookup, events, multicast, connection per message)" >&2
bash bench/names.sh $([ $quick -eq 1 ] && echo --quick) >/dev/null || echo "bench/names.sh failed" >&2

echo "+ bench/startup.sh (job start-up under each launcher)" >&2
bash bench/startup.sh $([ $quick -eq 1 ] && echo --quick) >/dev/null || echo "bench/startup.sh failed" >&2

echo "+ bench/mpi_fi.sh (MPI over fastmsg's libfabric provider; seed 004's applications)" >&2
bash bench/mpi_fi.sh $([ $quick -eq 1 ] && echo --quick) >/dev/null || echo "bench/mpi_fi.sh failed" >&2

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
machine="Machine: $(nproc) CPUs ($cpu), Linux $(uname -r), $(date -u +%Y-%m-%d)."
python3 bench/report.py "$out" --title "fastmsg benchmark" --command "bash bench/run.sh" \
        --machine "$machine" --out build/bench/report.md
if [ -s build/bench/rails.md ]; then
  { echo; echo "## Several rails (bench/rails.sh)"; echo; cat build/bench/rails.md; } \
    >>build/bench/report.md
  sed -n '1,/^### Every figure/p' build/bench/rails.md | sed '$d'
fi
if [ -s build/bench/shmem.md ]; then
  { echo; echo "## OpenSHMEM (bench/shmem.sh)"; echo; cat build/bench/shmem.md; } \
    >>build/bench/report.md
  sed -n '/^### The goals/,$p' build/bench/shmem.md
fi
if [ -s build/bench/names.md ]; then
  { echo; echo "## Names (bench/names.sh)"; echo; cat build/bench/names.md; } >>build/bench/report.md
  cat build/bench/names.md
fi
if [ -s build/bench/startup.md ]; then
  { echo; echo "## Job start-up (bench/startup.sh)"; echo; cat build/bench/startup.md; } \
    >>build/bench/report.md
  cat build/bench/startup.md
fi
if [ -s build/bench/mpi_fi.md ]; then
  { echo; echo "## MPI over fastmsg (bench/mpi_fi.sh)"; echo; cat build/bench/mpi_fi.md; } \
    >>build/bench/report.md
  sed -n '1,/^### One node, Open MPI/p' build/bench/mpi_fi.md | sed '$d'
  sed -n "/^### Seed 004's applications/,\$p" build/bench/mpi_fi.md
fi

# The plots last, after every section of the report: they append theirs.
echo "+ bench/plots.py (PNG figures of the run)" >&2
python3 bench/plots.py "$out" --out build/bench/img --md build/bench/report.md ||
  echo "bench/plots.py failed" >&2
if [ "$publish" = 1 ] && ls build/bench/img/*.png >/dev/null 2>&1; then
  mkdir -p docs/img
  cp build/bench/img/*.png docs/img/
  echo "+ plots copied to docs/img/" >&2
fi
