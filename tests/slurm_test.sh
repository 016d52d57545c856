#!/usr/bin/env bash
# Slurm on one machine, as a small cluster would run it (munged, slurmctld
# and slurmd from Debian's packages, see scripts/slurm_local.sh), then
# fastmsg programs under srun with each PMI plugin Slurm has.
#   slurm_test.sh CONFORMANCE
set -u
CONF=$1
source "$(dirname "$0")/../scripts/slurm_local.sh"
tmp=$(mktemp -d)
trap 'slurm_local_stop; rm -rf "$tmp"' EXIT
slurm_local_start "$tmp" || { echo "SKIP: $slurm_local_error"; exit 77; }

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
