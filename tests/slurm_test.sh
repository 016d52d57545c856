#!/usr/bin/env bash
# Slurm on one machine, as a small cluster would run it: munged, slurmctld
# and slurmd from Debian's packages with a generated slurm.conf (their own
# ports, sockets and state in a temporary directory), then fastmsg programs
# under srun with each PMI plugin Slurm has. Removes everything after.
#   slurm_test.sh CONFORMANCE
set -u
CONF=$1
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root to run the Slurm daemons"
for p in munged slurmctld slurmd srun sinfo; do
  command -v $p >/dev/null || skip "$p not installed (Debian packages munge, slurmctld, slurmd, slurm-client)"
done

tmp=$(mktemp -d)
chmod 700 "$tmp"
daemons=()
cleanup() {
  # Foreground daemons, children of this script: it reaps them.
  [ ${#daemons[@]} -gt 0 ] && kill "${daemons[@]}" 2>/dev/null && wait "${daemons[@]}" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$tmp/munge.key"
munged --foreground --force --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" \
  --pid-file="$tmp/munged.pid" --log-file="$tmp/munged.log" --seed-file="$tmp/munge.seed" >/dev/null 2>&1 &
daemons+=($!)
for i in $(seq 50); do [ -S "$tmp/munge.sock" ] && break; sleep 0.1; done
[ -S "$tmp/munge.sock" ] || skip "munged does not start here: $(tail -3 "$tmp/munged.log")"

host=$(hostname -s)
port=$((20000 + ($$ % 5000) * 2))
mkdir "$tmp/state" "$tmp/spool"
cat >"$tmp/slurm.conf" <<CONF
ClusterName=fmtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=fm Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -D -c >/dev/null 2>&1 &
daemons+=($!)
slurmd -D >/dev/null 2>&1 &
daemons+=($!)
for i in $(seq 100); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 0.1
done
sinfo -h -o %t 2>/dev/null | grep -q idle ||
  skip "the Slurm node never became idle: $(tail -3 "$tmp/slurmctld.log" "$tmp/slurmd.log" 2>&1)"

fails=0
check() { # check NAME COMMAND...
  local name=$1
  shift
  if timeout 120 "$@"; then echo "ok: $name"; else echo "FAIL: $name" >&2; fails=$((fails + 1)); fi
}
# -O: four ranks may share the machine's two CPUs.
check "srun --mpi=pmi2 -n 4 (PMI-2)" srun --mpi=pmi2 -O -n 4 "$CONF" order_many
check "srun --mpi=pmi2 -n 4 (PMI-2), every pair" srun --mpi=pmi2 -O -n 4 "$CONF" pingpong
check "srun --mpi=pmi2 -n 4, PMI-1 forced" env FM_BOOTSTRAP=pmi1 srun --mpi=pmi2 -O -n 4 "$CONF" order_many
if srun --mpi=list 2>&1 | grep -q pmix; then
  check "srun --mpi=pmix -n 4 (PMIx)" srun --mpi=pmix -O -n 4 "$CONF" order_many
else
  echo "note: this Slurm has no pmix plugin: the PMIx case is left out"
fi
# Without a PMI plugin every rank would be a job of one: fm_init refuses.
srun -O -n 2 "$CONF" pingpong 2>"$tmp/err" >/dev/null
check "srun without --mpi is refused with a hint" grep -q "use srun --mpi=pmi2" "$tmp/err"

exit $((fails > 0))
