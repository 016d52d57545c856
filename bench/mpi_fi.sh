#!/usr/bin/env bash
# MPI over fastmsg's libfabric provider (issue 9): bench/mpi_perf.c (latency 0 B..4 MiB,
# bandwidth, seed 001's MsgRate, 8 B allreduce on 4 ranks) through
#   one node:  Open MPI ob1+vader, ob1 with UCX (pml ucx), pml cm + mtl ofi over fastmsg and
#              over libfabric's own shm, tcp, net and udp providers;
#   two network-namespace hosts (bench/rails_ns.sh; 1 rank a host, 2 for allreduce):
#              Open MPI's TCP BTL, the OFI MTL over tcp, net and udp, fastmsg over one rail;
#              and 1 MiB bandwidth over rails shaped to 1 Gbit/s: fastmsg with one and two
#              rails, the TCP BTL over one and two (it stripes over interfaces);
#   MPICH from the PyPI wheel (${FM_VENV:-~/.cache/fastmsg/venv}/mpich) over fastmsg and over
#              its own transports (posix shm, ucx, ofi tcp), on one node and between the hosts;
#   fastmsg's own API (fmperf msgrate): seed 001's question, MPI's MsgRate over fastmsg / fastmsg's;
#   seed 004's applications (apps/: pi, mm, lu) between the hosts with 1, 2 and 4 ranks over
#              Open MPI with fastmsg and with its TCP BTL: times and speedups.
# Variants alternate within each round (the order rotates every round); the report takes
# medians over rounds and each ratio within a round, so it compares neighbours.
#   bench/mpi_fi.sh [--quick]      (ROUNDS=N, default 3, quick 1; QUICK=1 = --quick;
#                                   root for the hosts; FI_PROVIDER_DIR = where
#                                   libfastmsg-fi.so is, default build/release/src;
#                                   MPI_FI_PARTS = some of "node hosts rails apps";
#                                   MPI_FI_VARIANTS = only these, e.g. "ompi-vader ompi-ofi-fastmsg";
#                                   MPI_FI_YIELD=0: Open MPI's 4 ranks on the 2 hosts spin;
#                                   FM_* variables reach Open MPI's ranks over fastmsg)
# Build first (bench/run.sh does). JSON lines: build/bench/mpi_fi.jsonl; the tables
# (bench/mpi_fi_report.py): build/bench/mpi_fi.md; the launchers' output: build/bench/mpi_fi.log.
set -u
cd "$(dirname "$0")/.."
quick=${QUICK:-0}
[ "${1:-}" = "--quick" ] && quick=1
rounds=${ROUNDS:-$([ "$quick" = 1 ] && echo 1 || echo 3)}
out=build/bench
mkdir -p "$out/mpi_fi"
res=$out/mpi_fi.jsonl
logf=$out/mpi_fi.log
: >"$res"
: >"$logf"
bin=$PWD/$out/mpi_fi
fidir=${FI_PROVIDER_DIR:-$PWD/build/release/src}
venv=${FM_VENV:-$HOME/.cache/fastmsg/venv}
FMRUN=$PWD/build/release/tools/fmrun
FMPERF=$PWD/build/release/tools/fmperf
limit=$([ "$quick" = 1 ] && echo 90 || echo 240) # seconds per launch
parts=" ${MPI_FI_PARTS:-node hosts rails apps} " # the sections to run
part() { [[ $parts == *" $1 "* ]]; }
only=${MPI_FI_VARIANTS:+ $MPI_FI_VARIANTS } # if set: only these variants (and "serial")
wanted() { [ -z "$only" ] || [[ $only == *" $1 "* ]]; }
log() {
  printf 'mpi_fi.sh: %s\n' "$*" >&2
  printf '## %s\n' "$*" >>"$logf"
}
have() { command -v "$1" >/dev/null 2>&1; }

# ------------------------------------------------------------------ sizes and counts
if [ "$quick" = 1 ]; then
  lat_small=(--sizes 0,8 --iters 3000) lat_large=(--sizes 1M --iters 50)
  bw_small=() bw_large=(--sizes 1M --window 16 --iters 160)
  rate=(--sizes 8 --iters 50000 --reps 3) allred=(--sizes 8 --reps 3)
  rails_bw=(--sizes 1M --window 16 --iters 160)
  apps=(${MPI_FI_APPS:-"pi 500000000" "mm 1000" "lu 1200"})
else
  lat_small=(--sizes 0,1,8,64,512,4K,32K --iters 10000) lat_large=(--sizes 256K,1M,4M --iters 200)
  bw_small=(--sizes 8,512,4K,32K --window 64 --iters 6400)
  bw_large=(--sizes 256K,1M,4M --window 16 --iters 160)
  rate=(--sizes 8 --iters 200000 --reps 3) allred=(--sizes 8 --reps 5)
  rails_bw=(--sizes 1M --window 16 --iters 320)
  apps=("pi" "mm" "lu") # their defaults: 1-5 s on 2-4 ranks here
fi

# ------------------------------------------------------------------ programs
have mpirun.openmpi && have mpicc.openmpi || {
  log "skipped: Debian's Open MPI (mpirun.openmpi, mpicc.openmpi) is not installed"
  exit 0
}
compile() { # compile OUT CC ARGS... SRC: rebuilt when SRC is newer
  local o=$1
  shift
  [ "$o" -nt "${!#}" ] && return 0
  "$@" -o "$o" >>"$logf" 2>&1 || {
    log "build of $o failed (see $logf)"
    return 1
  }
}
compile "$bin/mpi_perf.openmpi" mpicc.openmpi -std=c11 -O2 bench/mpi_perf.c || exit 1
for a in pi mm lu; do # CMake's build (apps/CMakeLists.txt) when it is current, else our own
  if [ build/release/apps/$a -nt apps/$a.c ]; then
    ln -sf "$PWD/build/release/apps/$a" "$bin/$a"
  else
    rm -f "$bin/$a"
    compile "$bin/$a" mpicc.openmpi -std=c11 -O3 apps/$a.c -lm || exit 1
  fi
done
mpich=0
if [ -x "$venv/mpich/bin/mpicc" ] && [ -x "$venv/mpich/bin/mpiexec" ]; then
  compile "$bin/mpi_perf.mpich" "$venv/mpich/bin/mpicc" -std=c11 -O2 bench/mpi_perf.c && mpich=1
fi
fm=0
if [ ! -f "$fidir/libfastmsg-fi.so" ]; then
  fm_why="$fidir/libfastmsg-fi.so is absent (build the provider: cmake --build build/release)"
elif ! FI_PROVIDER_PATH=$fidir timeout 20 fi_info -p fastmsg >/dev/null 2>>"$logf"; then
  fm_why="FI_PROVIDER_PATH=$fidir fi_info -p fastmsg lists no provider"
else
  fm=1
fi
fmapi=0
[ -x "$FMRUN" ] && [ -x "$FMPERF" ] && fmapi=1

# note TEXT: said on stderr and kept in the results, so the report can say what was left out.
note() {
  log "$*"
  python3 -c 'import json, sys; print(json.dumps({"note": sys.argv[1]}))' "$*" >>"$res"
}
[ $mpich = 1 ] ||
  note "MPICH rows left out: no MPICH wheel in $venv/mpich (tests/mpi_test.sh installs it)"
[ $fm = 1 ] || note "fastmsg rows left out: $fm_why"
[ $fmapi = 1 ] || note "fastmsg's own API rows left out: no $FMRUN or $FMPERF"

# Helper scripts: an ssh stand-in that runs a command in a namespace under the namespace's own
# host name (Open MPI and MPICH tell nodes apart by it: under one name, Open MPI binds both
# hosts' ranks to core 0), and a rank wrapper that points libfabric's and UCX's socket transports
# at this host's interface on one subnet, and pins a host's lone rank to a core of its own.
tmp=$(mktemp -d)
cat >"$tmp/nsagent" <<'EOS'
#!/bin/sh
while [ $# -gt 0 ]; do
  case $1 in -o | -p | -i | -l | -F) shift 2 ;; -*) shift ;; *) break ;; esac
done
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host && $*"
EOS
cat >"$tmp/inrail" <<'EOS'
#!/bin/sh
# inrail SUBNET FIRST_HOST|- CMD...: the first host's rank on core 0, the other's on core 1
dev=$(ip -o -4 addr show to "$1" | awk '{print $2; exit}')
export FI_TCP_IFACE=$dev FI_UDP_IFACE=$dev FI_NET_IFACE=$dev FI_SOCKETS_IFACE=$dev
export UCX_NET_DEVICES=$dev
first=$2
shift 2
[ "$first" = - ] && exec "$@"
exec taskset -c "$([ "$(hostname)" = "$first" ] && echo 0 || echo 1)" "$@"
EOS
chmod +x "$tmp/nsagent" "$tmp/inrail"

ns=0 status=0
cleanup() {
  if [ $ns = 1 ]; then # ranks and daemons a timeout left in the namespaces, then the namespaces
    for h in "$A" "$B"; do
      for p in $(ip netns pids "$h" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    done
    rails_ns_down
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ one launch
# run WHERE ROUND VARIANT CMD...: under the time limit; mpi_perf's and fmperf's JSON lines, and
# the apps' result lines turned into JSON, go to the results tagged with round, where, variant.
run() {
  local where=$1 round=$2 variant=$3 rc
  shift 3
  printf '+ [%s, round %s] %s: %s\n' "$where" "$round" "$variant" "$*" >>"$logf"
  timeout -k 10 "$limit" "$@" </dev/null >"$tmp/out" 2>>"$logf"
  rc=$?
  awk '/^\{.*\}$/ { print; next }
       /^(pi|mm|lu) n=[0-9]+ ranks=[0-9]+ time_s=/ {
         split($2, n, "="); split($3, p, "="); split($4, t, "=")
         printf "{\"test\": \"app\", \"app\": \"%s\", \"size\": %s, \"ranks\": %s, ", $1, n[2], p[2]
         printf "\"value\": %s, \"unit\": \"s\", \"ok\": %s}\n", t[2], ($NF == "ok") ? "true" : "false"
         next }
       { print >> "/dev/stderr" }' "$tmp/out" 2>>"$logf" |
    sed "s/^{/{\"round\": $round, \"where\": \"$where\", \"variant\": \"$variant\", /" >>"$res"
  if [ $rc -ne 0 ]; then
    status=1
    log "FAILED [$where, round $round] $variant: exit $rc$([ $rc = 124 ] && echo ', timed out')," \
      "see $logf"
    return 1
  fi
}

# ------------------------------------------------------------------ the variants
# mca VARIANT WHERE: the Open MPI arguments of a variant, in the array `mca`.
mca() {
  local ofi=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include)
  local tcp=(--mca pml ob1 --mca btl self,vader,tcp --mca btl_tcp_if_include)
  case $1 in
  ompi-vader) mca=(--mca pml ob1 --mca btl self,vader) ;;
  ompi-ucx) mca=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any) ;;
  ompi-tcp) mca=("${tcp[@]}" "$(rail_net 0).0/24") ;;
  ompi-tcp-1g) mca=("${tcp[@]}" "$(rail_net 1).0/24") ;;
  ompi-tcp-2x1g) mca=("${tcp[@]}" "$(rail_net 1).0/24,$(rail_net 2).0/24") ;;
  ompi-ofi-fastmsg*)
    mca=(-x FI_PROVIDER_PATH="$fidir" "${ofi[@]}" fastmsg)
    case $1 in
    *-2x1g) mca+=(-x FM_RAILS="$(rails_spec 1 2)") ;;
    *-1g) mca+=(-x FM_RAILS="$(rails_spec 1)") ;;
    *) [ "$2" = node ] || mca+=(-x FM_RAILS="$(rails_spec 0)") ;;
    esac
    local v # fastmsg's settings in our environment reach the ranks
    for v in $(compgen -e FM_); do [ "$v" = FM_RAILS ] || mca+=(-x "$v"); done ;;
  # Open MPI 4.1 takes the include list instead of its default exclude list
  # (shm,sockets,tcp,udp,...); both set is refused as "mutually exclusive".
  ompi-ofi-*) mca=("${ofi[@]}" "${1#ompi-ofi-}") ;;
  esac
}

# menv VARIANT WHERE: MPICH's environment for a variant, in the array `menv`.  On one node
# MPIR_CVAR_NOLOCAL=1 sends intra-node traffic through the netmod too, except for mpich-shm,
# MPICH's default (its posix shm).  Between the hosts UCX is held to TCP: left alone it finds
# the other namespace on the same kernel and uses shared memory.
menv() {
  local nolocal=MPIR_CVAR_NOLOCAL=1
  case $1 in
  mpich-shm) menv=() ;;
  mpich-ucx) menv=(MPICH_CH4_NETMOD=ucx)
    if [ "$2" = node ]; then menv+=("$nolocal"); else menv+=(UCX_TLS=self,tcp); fi ;;
  mpich-ofi-tcp) menv=(MPICH_CH4_NETMOD=ofi FI_PROVIDER=tcp "$nolocal") ;;
  mpich-ofi-fastmsg)
    menv=(MPICH_CH4_NETMOD=ofi FI_PROVIDER=fastmsg FI_PROVIDER_PATH="$fidir" "$nolocal")
    [ "$2" = node ] || menv+=(FM_RAILS="$(rails_spec 0)") ;;
  esac
}

# launch WHERE VARIANT NRANKS: the launcher of a run, in the array `cmd`; the program follows.
# On one node 2 ranks get a core each and 4 share them, as in bench/peers.sh.  Between the
# hosts the ranks are split evenly (1 rank: host A); a host's lone rank gets a core of its own.
launch() {
  local where=$1 v=$2 n=$3
  if [ "$where" = node ]; then
    case $v in
    ompi-*)
      mca "$v" node
      cmd=(mpirun.openmpi --allow-run-as-root -n "$n" "${mca[@]}")
      if [ "$n" -le 2 ]; then
        cmd+=(--map-by core --bind-to core)
      else
        cmd+=(--oversubscribe --map-by core --bind-to core:overload-allowed)
      fi ;;
    mpich-*) menv "$v" node
      cmd=(env "${menv[@]}" "$venv/mpich/bin/mpiexec" -n "$n" -bind-to core) ;;
    fastmsg-api) cmd=("$FMRUN" -n "$n") ;;
    esac
    return
  fi
  local hl="$A:$((n / 2)),$B:$((n / 2))" first=- subnet
  [ "$n" = 1 ] && hl=$A:1
  [ "$n" -le 2 ] && first=$A
  case $v in
  *-1g | *-2x1g) subnet=$(rail_net 1).0/24 ;;
  *) subnet=$(rail_net 0).0/24 ;;
  esac
  case $v in
  ompi-*)
    mca "$v" hosts
    cmd=(mpirun.openmpi --allow-run-as-root --host "$hl" -n "$n" --bind-to none
      --mca plm_rsh_agent "$tmp/nsagent" --mca oob_tcp_if_include "$MGMT.0/24" "${mca[@]}")
    # More ranks than cores: idle ranks yield, as under --oversubscribe on one node
    # (MPI_FI_YIELD=0: they spin).
    [ "$n" -gt 2 ] && cmd+=(--mca mpi_yield_when_idle "${MPI_FI_YIELD:-1}")
    cmd+=("$tmp/inrail" "$subnet" "$first") ;;
  mpich-*) menv "$v" hosts
    cmd=(env "${menv[@]}" "$venv/mpich/bin/mpiexec" -hosts "$hl" -n "$n"
      -launcher ssh -launcher-exec "$tmp/nsagent" -localhost "$MGMT.254"
      "$tmp/inrail" "$subnet" "$first") ;;
  fastmsg-api) # fmrun binds rank i to CPU i
    cmd=(env FM_RAILS="$(rails_spec 0)" "$FMRUN" --hosts "$A,$B" -n "$n"
      --launcher "ip netns exec {host}" --pmi-addr "$MGMT.254") ;;
  esac
}

prog() { # prog VARIANT: the benchmark program of a variant
  case $1 in
  ompi-*) echo "$bin/mpi_perf.openmpi" ;;
  mpich-*) echo "$bin/mpi_perf.mpich" ;;
  fastmsg-api) echo "$FMPERF" ;;
  esac
}

# usable WHERE VARIANT...: prints the variants whose short trial run works; says why not.
usable() {
  local where=$1 v
  shift
  for v in "$@"; do
    wanted "$v" || continue
    launch "$where" "$v" 2
    if timeout -k 5 60 "${cmd[@]}" "$(prog "$v")" latency --sizes 8 --iters 200 </dev/null \
      >>"$logf" 2>&1; then
      echo "$v"
    else
      case $v in
      ompi-ofi-shm) note "$where: $v left out: libfabric's shm provider offers FI_LOCAL_COMM" \
        "only and Open MPI 4.1's OFI MTL asks for FI_REMOTE_COMM too: no provider is selected" ;;
      ompi-ucx) note "$where: $v left out: pml ucx cannot be selected (see $logf)" ;;
      *) note "$where: $v left out: its trial run failed (see $logf)" ;;
      esac
    fi
  done
}

rotate() { # rotate K ITEMS...: the items, starting from the K-th (mod their number)
  local k=$1
  shift
  local n=$# i
  local a=("$@")
  for ((i = 0; i < n; i++)); do echo "${a[$(((k + i) % n))]}"; done
}

# bench WHERE ROUND VARIANTS...: one round of mpi_perf's four tests over the variants, each test
# through every variant back to back, the variants' order rotated every round.
bench() {
  local where=$1 r=$2 v test
  shift 2
  local vs
  mapfile -t vs < <(rotate "$r" "$@")
  for test in latency bw msgrate allreduce; do
    for v in "${vs[@]}"; do
      [ "$v" = fastmsg-api ] && [ $test != msgrate ] && continue
      local p
      p=$(prog "$v")
      case $test in
      latency)
        launch "$where" "$v" 2
        run "$where" "$r" "$v" "${cmd[@]}" "$p" latency "${lat_small[@]}" --json --label "$v"
        run "$where" "$r" "$v" "${cmd[@]}" "$p" latency "${lat_large[@]}" --json --label "$v" ;;
      bw)
        launch "$where" "$v" 2
        [ ${#bw_small[@]} -gt 0 ] &&
          run "$where" "$r" "$v" "${cmd[@]}" "$p" bw "${bw_small[@]}" --json --label "$v"
        run "$where" "$r" "$v" "${cmd[@]}" "$p" bw "${bw_large[@]}" --json --label "$v" ;;
      msgrate)
        launch "$where" "$v" 2
        run "$where" "$r" "$v" "${cmd[@]}" "$p" msgrate "${rate[@]}" --json --label "$v" ;;
      allreduce)
        launch "$where" "$v" 4
        run "$where" "$r" "$v" "${cmd[@]}" "$p" allreduce "${allred[@]}" --json --label "$v" ;;
      esac
    done
  done
}

# ------------------------------------------------------------------ one node
node=(ompi-vader ompi-ucx ompi-ofi-shm ompi-ofi-tcp ompi-ofi-net ompi-ofi-udp)
[ $fm = 1 ] && node+=(ompi-ofi-fastmsg)
[ $mpich = 1 ] && node+=(mpich-shm mpich-ucx mpich-ofi-tcp)
[ $mpich = 1 ] && [ $fm = 1 ] && node+=(mpich-ofi-fastmsg)
if part node; then
  mapfile -t node < <(usable node "${node[@]}")
  [ $fmapi = 1 ] && wanted fastmsg-api && node+=(fastmsg-api)
  for r in $(seq 1 "$rounds"); do
    log "one node, round $r of $rounds: ${node[*]}"
    bench node "$r" "${node[@]}"
  done
fi

# ------------------------------------------------------------------ two hosts
if ! part hosts && ! part rails && ! part apps; then
  :
elif [ "$(id -u)" -ne 0 ]; then
  note "two-host rows left out: network namespaces need root"
else
  source bench/rails_ns.sh
  if ! rails_ns_up; then
    rails_ns_down
    note "two-host rows left out: cannot create the network namespaces"
  else
    ns=1
    rails_shape 1 1gbit && rails_shape 2 1gbit || note "cannot shape rails 1 and 2 to 1 Gbit/s"
    hosts=(ompi-tcp ompi-ofi-tcp ompi-ofi-net ompi-ofi-udp)
    [ $fm = 1 ] && hosts+=(ompi-ofi-fastmsg)
    [ $mpich = 1 ] && hosts+=(mpich-ucx mpich-ofi-tcp)
    [ $mpich = 1 ] && [ $fm = 1 ] && hosts+=(mpich-ofi-fastmsg)
    part hosts && mapfile -t hosts < <(usable hosts "${hosts[@]}")
    [ $fmapi = 1 ] && wanted fastmsg-api && hosts+=(fastmsg-api)
    rails=(ompi-tcp-1g ompi-tcp-2x1g)
    [ $fm = 1 ] && rails+=(ompi-ofi-fastmsg-1g ompi-ofi-fastmsg-2x1g)
    appvars=(ompi-tcp)
    [ $fm = 1 ] && appvars+=(ompi-ofi-fastmsg)
    mapfile -t rails < <(for v in "${rails[@]}"; do wanted "$v" && echo "$v"; done)
    mapfile -t appvars < <(for v in "${appvars[@]}"; do wanted "$v" && echo "$v"; done)
    for r in $(seq 1 "$rounds"); do
      if part hosts; then
        log "two hosts, round $r of $rounds: ${hosts[*]}"
        bench hosts "$r" "${hosts[@]}"
      fi
      part rails && log "two hosts, rails shaped to 1 Gbit/s, round $r of $rounds: ${rails[*]}"
      part rails && for v in $(rotate "$r" "${rails[@]}"); do
        launch hosts "$v" 2
        run rails "$r" "$v" "${cmd[@]}" "$bin/mpi_perf.openmpi" bw "${rails_bw[@]}" --json \
          --label "$v"
      done
      part apps && log "two hosts, seed 004's applications, round $r of $rounds: ${appvars[*]}"
      part apps && for a in "${apps[@]}"; do
        set -- $a # the app and its arguments
        launch hosts ompi-tcp 1 # one rank: the serial time the speedups are of
        run apps "$r" serial "${cmd[@]}" "$bin/$1" "${@:2}"
        for n in 2 4; do
          for v in $(rotate "$r" "${appvars[@]}"); do
            launch hosts "$v" "$n"
            run apps "$r" "$v" "${cmd[@]}" "$bin/$1" "${@:2}"
          done
        done
      done
    done
  fi
fi

python3 bench/mpi_fi_report.py "$res" >"$out/mpi_fi.md" || status=1
cat "$out/mpi_fi.md"
exit $status # 1 if a run failed (the tables have what the others measured)
