# A one-machine Slurm for tests and benchmarks, sourced by bash scripts:
# munged, slurmctld and slurmd in the foreground with a generated
# slurm.conf whose ports, socket, state and logs live in DIR, so nothing of
# the machine's own configuration is touched.
#   source scripts/slurm_local.sh
#   slurm_local_start DIR || echo "$slurm_local_error"   # exports SLURM_CONF
#   srun ...
#   slurm_local_stop
# Needs root and Debian's munge, slurmctld, slurmd and slurm-client.

slurm_local_pids=()
slurm_local_error=""

slurm_local_start() {
  local dir=$1 p
  [ "$(id -u)" -eq 0 ] || { slurm_local_error="needs root to run the Slurm daemons"; return 1; }
  for p in munged slurmctld slurmd srun sinfo; do
    command -v $p >/dev/null || {
      slurm_local_error="$p not installed (Debian packages munge, slurmctld, slurmd, slurm-client)"
      return 1
    }
  done
  chmod 700 "$dir"
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null
  chmod 400 "$dir/munge.key"
  munged --foreground --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge.seed" \
    >/dev/null 2>&1 &
  slurm_local_pids+=($!)
  for p in $(seq 50); do [ -S "$dir/munge.sock" ] && break; sleep 0.1; done
  [ -S "$dir/munge.sock" ] || {
    slurm_local_error="munged does not start here: $(tail -3 "$dir/munged.log" 2>&1)"
    return 1
  }
  local host port
  host=$(hostname -s)
  port=$((20000 + ($$ % 5000) * 2))
  mkdir -p "$dir/state" "$dir/spool"
  cat >"$dir/slurm.conf" <<CONF
ClusterName=fmlocal
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
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
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -D -c >/dev/null 2>&1 &
  slurm_local_pids+=($!)
  slurmd -D >/dev/null 2>&1 &
  slurm_local_pids+=($!)
  for p in $(seq 100); do
    sinfo -h -o %t 2>/dev/null | grep -q idle && return 0
    sleep 0.1
  done
  slurm_local_error="the Slurm node never became idle: $(tail -3 "$dir/slurmctld.log" "$dir/slurmd.log" 2>&1)"
  return 1
}

slurm_local_stop() {
  # The daemons are this shell's children: kill and reap them.
  [ ${#slurm_local_pids[@]} -gt 0 ] || return 0
  kill "${slurm_local_pids[@]}" 2>/dev/null
  wait "${slurm_local_pids[@]}" 2>/dev/null
  slurm_local_pids=()
}
